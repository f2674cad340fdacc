"""The page: components built by small functions, then wired to the event functions by name.

Every component that an event reads or writes has a name ('A.attn', 'pane_B', 'timing_chart');
event functions return {name: value} and `_emit` maps names to components, so no handler depends
on a long positional list of outputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import gradio as gr

from playground.config import SETTINGS, Setting
from playground.hosting import HostingPolicy
from playground.presets import DEFAULT_MODEL, PRESETS
from playground.record import environment
from playground.store import RunStore
from playground.ui import events, render, style
from playground.ui.api import make_endpoints
from playground.ui.settings import (READY_PROMPTS, SIDE_SETTINGS, SIDES, ColumnSettings, SharedSettings,
                                    attention_choices, comparisons, compile_choices, flash_help)

DEVICE_QUEUE = dict(concurrency_id="device", concurrency_limit=1)  # all device work, UI and API, one at a time
PAGE_ONLY = dict(api_visibility="private")  # handlers the page calls; the API is /run, /compare and /history
Components = dict[str, gr.components.Component]


# ---- building ----------------------------------------------------------------------------------

def header(app: events.Playground) -> None:
    """Title, the host line, and the notices a visitor should see first (hosted limits, a recovered store)."""
    from playground import capabilities

    env, host = environment(), capabilities.host()
    device = f"CUDA · {host.device_name}" if host.cuda else f"CPU · {env['device_name']} · {env['cpu_count']} cores"
    gr.HTML(
        "<div id='title'><h1>⚡ LLM Speed Playground</h1><p>Two inference configurations, side by side, token by "
        "token. Every number is measured on the server by the engine (device-synchronised clocks), never in the "
        f"browser.</p><div class='hostline'>{render.escape(device)} · torch {render.escape(env['torch'])} · "
        f"transformers {render.escape(env['transformers'])} · flash-attn {render.escape(env['flash_attn'] or 'not installed')}"
        "</div></div>")
    notices = [app.policy.describe(), events.store_notice(app.store),
               flash_help(env, app.policy.hosted) if host.cuda or app.policy.hosted else ""]
    for text in filter(None, notices):
        gr.Markdown(text, elem_classes="notice")


def model_controls(default_model: str, policy: HostingPolicy) -> Components:
    allowlist = policy.model_allowlist
    where = "a built-in preset or a Hugging Face id" if policy.hosted else \
        "a built-in preset, a Hugging Face id or a local directory"
    with gr.Row(equal_height=True):
        model = gr.Dropdown(list(allowlist or PRESETS), value=default_model, label="Model", scale=2,
                            allow_custom_value=allowlist is None, info=where if allowlist is None else "allowed here")
        info = gr.Markdown(events.model_info(default_model))
    return {"model": model, "model_info": info}


def comparison_controls() -> tuple[dict[str, gr.Button], gr.Markdown]:
    gr.Markdown("**One-click comparisons**", elem_classes="compare-title")
    with gr.Row(elem_classes="compare-row"):
        buttons = {name: gr.Button(name, size="sm", variant="secondary") for name in comparisons()}
    note = gr.Markdown("Pick one to set up A and B, then press **Run A vs B**. Mode *benchmark* generates exactly "
                       "N tokens (EOS cannot end it early); *free* lets the model stop.", elem_id="comparison-note")
    return buttons, note


# How the per-side controls sit in a column: rows of settings, and each control's width. A setting not
# placed here gets a full-width row of its own, so a new lever shows up without a layout change.
COLUMN_ROWS = (("use_cache", "cache_impl"), ("attn",), ("dtype", "compile"), ("backend",), ("spec", "draft_tokens"),
               ("batch_size", "length_spread_pct"), ("parallel", "devices"))
PLACEMENT = {"use_cache": dict(min_width=90), "cache_impl": dict(min_width=120), "dtype": dict(scale=2, min_width=90),
             "compile": dict(scale=3, min_width=170), "spec": dict(scale=3, min_width=170),
             "draft_tokens": dict(min_width=90), "batch_size": dict(min_width=90),
             "length_spread_pct": dict(min_width=120), "parallel": dict(scale=3, min_width=170),
             "devices": dict(min_width=90)}


def control(setting: Setting, value: Any, choices: list | None = None, **placement: Any) -> gr.components.Component:
    """The control a setting asks for: a checkbox for true/false, a dropdown for choices, a whole-number box."""
    if setting.type is bool:
        return gr.Checkbox(value, label=setting.label, **placement)
    if setting.choices:
        labelled = choices or [(setting.choice_labels.get(c, c), c) for c in setting.choices]
        return gr.Dropdown(labelled, value=value, label=setting.label, **placement)
    if setting.bounds:
        return gr.Number(value, precision=0, minimum=setting.bounds[0], label=setting.label, **placement)
    return gr.Textbox(value, label=setting.label, **placement)


def column_controls(side: str, default: ColumnSettings, policy: HostingPolicy) -> Components:
    # choices whose labels say why this host or deployment cannot run them
    host_choices = {"attn": lambda: attention_choices(default.dtype), "compile": lambda: compile_choices(policy)}
    placed = {name for row in COLUMN_ROWS for name in row}
    rows = [*COLUMN_ROWS, *((name,) for name in SIDE_SETTINGS if name not in placed)]
    controls = {}
    with gr.Group(elem_classes="side-card"):
        gr.HTML(f"<div class='side-title'><span class='side side-{side}'>{side}</span>Configuration {side}</div>",
                padding=True)
        for row in rows:
            with gr.Row() if len(row) > 1 else contextlib.nullcontext():
                for name in row:
                    choices = host_choices[name]() if name in host_choices else None
                    controls[f"{side}.{name}"] = control(SIDE_SETTINGS[name], getattr(default, name), choices,
                                                         **PLACEMENT.get(name, {}))
        controls[f"note_{side}"] = gr.Markdown(elem_classes="side-note", padding=True, elem_id=f"note-{side}")
    return controls


def shared_controls(default: SharedSettings) -> Components:
    with gr.Group():
        with gr.Row():
            ready = gr.Dropdown(list(READY_PROMPTS), value=next(iter(READY_PROMPTS)), label="ready prompts", scale=3)
            mode = control(SETTINGS["mode"], default.mode, scale=2, min_width=150)
        with gr.Row():
            synthetic = gr.Checkbox(default.synthetic, label="synthetic prompt", min_width=150,
                                    info="random ids of an exact length")
            prompt_tokens = control(SETTINGS["prompt_tokens"], default.prompt_tokens, min_width=130)
        prompt = control(SETTINGS["prompt"], default.prompt, lines=2, max_lines=6)
        with gr.Row():
            new_tokens = control(SETTINGS["new_tokens"], default.new_tokens, min_width=130)
            repeats = control(SETTINGS["repeats"], default.repeats, maximum=SETTINGS["repeats"].bounds[1], min_width=90)
            warmup = control(SETTINGS["warmup"], default.warmup, maximum=SETTINGS["warmup"].bounds[1], min_width=90)
    figure = gr.State(default.figure)  # the headline figure a one-click comparison is about
    return {"ready_prompt": ready, "synthetic": synthetic, "prompt_tokens": prompt_tokens, "prompt": prompt,
            "new_tokens": new_tokens, "mode": mode, "repeats": repeats, "warmup": warmup, "figure": figure}


def action_controls() -> Components:
    with gr.Row():
        run_ab = gr.Button("▶ Run A vs B", variant="primary", size="lg", scale=3, elem_id="run-ab")
        run_a = gr.Button("Run A only", size="lg", scale=1, elem_id="run-a")
        sweep = gr.Button(f"Sweep A's batch size {'→'.join(map(str, events.SWEEP_BATCH_SIZES))}", size="lg", scale=1,
                          elem_id="sweep-batch")
        stop = gr.Button("■ Stop", variant="stop", size="lg", scale=1, elem_id="stop")
    status = gr.Markdown("Ready.", elem_id="run-status")
    return {"run_ab": run_ab, "run_a": run_a, "sweep_batch": sweep, "stop": stop, "status": status}


def output_panes() -> Components:
    with gr.Row(equal_height=True):
        panes = {f"pane_{s}": gr.HTML(render.empty_pane(s), elem_id=f"pane-{s}") for s in SIDES}
    return panes


def result_views() -> Components:
    summary = gr.HTML("<div class='dim'>Speedups of B over A and the token comparison appear here after a run.</div>",
                      elem_id="summary", padding=True)
    metrics = gr.HTML(render.metrics_table({}), elem_id="metrics")
    return {"metrics": metrics, "summary": summary}


def chart_views() -> Components:
    selection = gr.Dropdown([], value=[], multiselect=True, label="runs in the charts (newest first)",
                            info="or click rows in History below")
    timing = gr.Plot(label="Prefill and decode", elem_id="timing-chart", show_label=False)
    # full width each: ten runs' bars and value labels need the room
    latency = gr.Plot(label="Per-token latency", elem_id="latency-chart", show_label=False)
    memory = gr.Plot(label="Memory", elem_id="memory-chart", show_label=False)
    with gr.Row():  # filled by a batch sweep: the selected runs, one line per setting, a point per batch size
        batch_throughput = gr.Plot(label="Batching: throughput", elem_id="batch-throughput-chart", show_label=False)
        batch_memory = gr.Plot(label="Batching: memory", elem_id="batch-memory-chart", show_label=False)
    return {"selection": selection, "timing_chart": timing, "latency_chart": latency, "memory_chart": memory,
            "batch_throughput_chart": batch_throughput, "batch_memory_chart": batch_memory}


def history_views() -> Components:
    note = gr.Markdown(elem_id="history-note")
    table = gr.Dataframe(interactive=False, wrap=False, max_height=360, elem_id="history")
    with gr.Row():
        csv = gr.DownloadButton("⬇ CSV", size="sm")
        json_ = gr.DownloadButton("⬇ JSON", size="sm")
        ask = gr.Button("Clear history…", size="sm", variant="stop")
    with gr.Row(visible=False) as confirm_row:
        text = gr.Markdown()
        yes = gr.Button("Delete all runs", variant="stop", size="sm")
        no = gr.Button("Cancel", size="sm")
    return {"history_note": note, "history": table, "download_csv": csv, "download_json": json_, "ask_clear": ask,
            "confirm_row": confirm_row, "confirm_text": text, "confirm_yes": yes, "confirm_no": no}


# ---- wiring ------------------------------------------------------------------------------------

def _emit(ui: Components, update: dict[str, Any]) -> dict:
    return {ui[name]: value for name, value in update.items()}


def _outputs(ui: Components, *names: str) -> list:
    return [ui[n] for n in names]


CONTROL_NAMES = ("model", *(f.name for f in dataclasses.fields(SharedSettings) if f.name != "model"),
                 *(f"{s}.{f.name}" for s in SIDES for f in dataclasses.fields(ColumnSettings)))
CHART_OUTPUTS = ("timing_chart", "latency_chart", "memory_chart", "batch_throughput_chart", "batch_memory_chart")
HISTORY_OUTPUTS = ("history", "history_note", "selection", "download_csv", "download_json", *CHART_OUTPUTS)
RUN_OUTPUTS = ("pane_A", "pane_B", "status", "summary", "metrics", "diagnostics", *HISTORY_OUTPUTS)


def _reader(ui: Components, names: tuple[str, ...]) -> Callable[[dict], dict[str, Any]]:
    """Turn Gradio's {component: value} input dict into {name: value}."""
    return lambda data: {n: data[ui[n]] for n in names}


def wire_run(ui: Components, app: events.Playground) -> list:
    read = _reader(ui, (*CONTROL_NAMES, "selection"))

    def handler_for(sides: tuple[str, ...]):
        def handler(data: dict, request: gr.Request):
            for update in events.run(app, read(data), sides, events.session_of(request)):
                yield _emit(ui, update)
        return handler

    def sweep(data: dict, request: gr.Request):
        for update in events.sweep_batch_sizes(app, read(data), events.session_of(request)):
            yield _emit(ui, update)

    inputs = {ui[n] for n in (*CONTROL_NAMES, "selection")}
    runs = [ui[button].click(handler_for(sides), inputs=inputs, outputs=_outputs(ui, *RUN_OUTPUTS),
                             show_progress="minimal", **DEVICE_QUEUE, **PAGE_ONLY)
            for button, sides in (("run_ab", ("A", "B")), ("run_a", ("A",)))]
    return runs + [ui["sweep_batch"].click(sweep, inputs=inputs, outputs=_outputs(ui, *RUN_OUTPUTS),
                                           show_progress="minimal", **DEVICE_QUEUE, **PAGE_ONLY)]


def wire_stop(ui: Components, app: events.Playground, runs: list) -> None:
    def handler(request: gr.Request):
        return _emit(ui, events.stop(app, events.session_of(request)))

    ui["stop"].click(handler, outputs=_outputs(ui, "status", "pane_A", "pane_B"), cancels=runs, queue=False, **PAGE_ONLY)


RUN_BUTTON_IDS = ("run-ab", "run-a", "sweep-batch")


def _run_buttons_js(hold: bool) -> str:
    """Browser code that holds (or releases) the run buttons, passing the event's inputs through."""
    ids = ", ".join(f"'#{i}'" for i in RUN_BUTTON_IDS)
    return (f"(...args) => {{ for (const b of document.querySelectorAll([{ids}].join(','))) "
            f"b.disabled = {'true' if hold else 'false'}; return args.length > 1 ? args : args[0]; }}")


def wire_controls(ui: Components, comparison_buttons: dict[str, gr.Button], policy: HostingPolicy) -> None:
    read = _reader(ui, CONTROL_NAMES)
    controls = {ui[n] for n in CONTROL_NAMES}
    gr.on([ui[n].change for n in CONTROL_NAMES], lambda data: _emit(ui, events.side_notes(read(data), policy)),
          inputs=controls, outputs=_outputs(ui, "note_A", "note_B"), queue=False, trigger_mode="always_last",
          show_progress="hidden", **PAGE_ONLY)
    for side in SIDES:
        ui[f"{side}.dtype"].change(lambda d: gr.update(choices=attention_choices(d)), ui[f"{side}.dtype"],
                                   ui[f"{side}.attn"], queue=False, show_progress="hidden", **PAGE_ONLY)
    ui["model"].change(events.model_info, ui["model"], ui["model_info"], queue=False, show_progress="hidden",
                       **PAGE_ONLY)
    ui["ready_prompt"].input(lambda name: (READY_PROMPTS[name], False), ui["ready_prompt"],
                             _outputs(ui, "prompt", "synthetic"), queue=False, show_progress="hidden", **PAGE_ONLY)
    preset_outputs = [*controls, ui["comparison_note"]]
    # Run reads the controls as the page has them when it is clicked: until a comparison's values are on the
    # page, a run would start with the previous ones, so the run buttons are held (in the browser, at once).
    for name, button in comparison_buttons.items():
        button.click(lambda model, n=name: _emit(ui, events.apply_comparison(n, model, policy)), ui["model"],
                     preset_outputs, queue=False, show_progress="hidden", js=_run_buttons_js(True),
                     **PAGE_ONLY).then(None, js=_run_buttons_js(False), **PAGE_ONLY)


def wire_history(ui: Components, demo: gr.Blocks, app: events.Playground) -> None:
    """History views read the caller's history: the shared store locally, its own session's runs when hosted."""
    history_outputs = _outputs(ui, *HISTORY_OUTPUTS)
    charts = _outputs(ui, "selection", *CHART_OUTPUTS)

    def on_load(data: dict, request: gr.Request):
        session = events.session_of(request)
        view = events.history_view(app.history(session), None, app.export_dir(session))
        return _emit(ui, {**view, **events.side_notes(_reader(ui, CONTROL_NAMES)(data), app.policy)})

    def on_unload(request: gr.Request) -> None:
        app.end_session(events.session_of(request))

    demo.load(on_load, inputs={ui[n] for n in CONTROL_NAMES}, outputs=[*history_outputs, ui["note_A"], ui["note_B"]],
              **PAGE_ONLY)
    demo.unload(on_unload)

    def on_row(selected: list[int], evt: gr.SelectData, request: gr.Request):
        return _emit(ui, events.toggle_run(app.history(events.session_of(request)), selected, int(evt.row_value[0])))

    def on_select(selected: list[int], request: gr.Request):
        return _emit(ui, events.select_runs(app.history(events.session_of(request)), selected))

    def on_ask_clear(request: gr.Request):
        return _emit(ui, events.ask_clear(app.history(events.session_of(request))))

    def on_clear(request: gr.Request):
        session = events.session_of(request)
        return _emit(ui, events.clear(app.history(session), app.export_dir(session)))

    ui["history"].select(on_row, ui["selection"], charts, show_progress="hidden", **PAGE_ONLY)
    ui["selection"].input(on_select, ui["selection"], charts[1:], show_progress="hidden", **PAGE_ONLY)
    ui["ask_clear"].click(on_ask_clear, outputs=_outputs(ui, "confirm_row", "confirm_text"), queue=False, **PAGE_ONLY)
    ui["confirm_no"].click(lambda: _emit(ui, events.cancel_clear()), outputs=ui["confirm_row"], queue=False,
                           **PAGE_ONLY)
    ui["confirm_yes"].click(on_clear, outputs=[ui["confirm_row"], *history_outputs], **DEVICE_QUEUE, **PAGE_ONLY)


def wire_api(app: events.Playground) -> None:
    run, compare, history = make_endpoints(app)
    gr.api(run, api_name="run", **DEVICE_QUEUE)
    gr.api(compare, api_name="compare", **DEVICE_QUEUE)
    gr.api(history, api_name="history", queue=False)


def _default_model(requested: str | None, policy: HostingPolicy) -> str:
    model = requested or DEFAULT_MODEL
    allowlist = policy.model_allowlist
    return allowlist[0] if allowlist and model not in allowlist else model


def build_demo(store: RunStore | None = None, default_model: str | None = None,
               policy: HostingPolicy | None = None) -> gr.Blocks:
    """The whole playground as a Blocks app; launch it with `playground.ui.launch`, which adds theme and CSS.

    `policy` defaults to `HostingPolicy.from_env()`; in hosted mode no durable store is opened:
    each browser session keeps its own runs in memory.
    """
    policy = policy or HostingPolicy.from_env()
    app = events.Playground(None if policy.hosted else store or RunStore(), _default_model(default_model, policy),
                            policy)
    shared = SharedSettings(model=app.default_model)
    ui: Components = {}
    with gr.Blocks(title="LLM Speed Playground") as demo:
        header(app)
        ui.update(model_controls(app.default_model, policy))
        buttons, ui["comparison_note"] = comparison_controls()
        with gr.Row(equal_height=False):
            for side in SIDES:
                with gr.Column(scale=2, min_width=290):
                    ui.update(column_controls(side, ColumnSettings(), policy))
            with gr.Column(scale=3, min_width=420):
                ui.update(shared_controls(shared))
        ui.update(action_controls())
        ui.update(output_panes())
        ui.update(result_views())
        with gr.Accordion("Diagnostics: the speed checklist and environment", open=False):
            ui["diagnostics"] = gr.HTML(render.diagnostics_html({}))
        gr.Markdown("### Charts")
        ui.update(chart_views())
        history_title = "History: your runs in this browser session" if policy.hosted else \
            "History: every run, from this app and the CLI"
        with gr.Accordion(history_title, open=True):
            ui.update(history_views())
        runs = wire_run(ui, app)
        wire_stop(ui, app, runs)
        wire_controls(ui, buttons, policy)
        wire_history(ui, demo, app)
        wire_api(app)
    demo.queue(max_size=policy.max_queue)
    return demo


def launch(demo: gr.Blocks, **kwargs: Any):
    """`demo.launch` with the playground's theme and CSS (Gradio 6 takes them at launch), once the engine is
    imported."""
    _import_engine()
    return demo.launch(theme=style.theme(), css=style.CSS, **kwargs)


def _import_engine() -> None:
    """Import the engine and transformers' auto classes before serving. Handlers run on several threads, and two
    of them resolving transformers' lazy names at once can meet a half-imported module: a fresh app's first
    comparison click failed with "cannot import name 'AutoConfig' from 'transformers'", leaving Run held."""
    import transformers

    from playground import engine  # noqa: F401

    for name in ("AutoConfig", "AutoTokenizer", "AutoModelForCausalLM"):
        getattr(transformers, name)
