"""Event functions: plain Python in, plain values out, keyed by the names `layout` gives components.

They know nothing of where components sit on the page, so tests call them directly, and the
layout maps each returned name to its component.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator

import gradio as gr
import pandas as pd

from playground.config import SETTINGS, ConfigError, RunConfig
from playground.diagnostics import HEADLINES
from playground.hosting import HostingPolicy, gpu_runner
from playground.presets import PRESETS
from playground.record import BUSY_HOST_PCT, RunRecord
from playground.store import NOT_SAVED, RunStore
from playground.ui import charts, render
from playground.ui.sessions import SessionHistories, SessionHistory, session_key
from playground.ui.settings import (FEW_USERS, LONG_PROMPT_TOKENS, SIDES, ColumnSettings, SharedSettings,
                                    check_column, comparisons, context_of, make_config, serving_advice)
from playground.ui.streaming import Pane, generate, run_sides

MAX_CHART_RUNS = 10  # newest runs kept selected for the charts; more makes the bars unreadable
SWEEP_BATCH_SIZES = (1, 2, 4, 8)  # the one-click batch sweep, cut to the hosting limit
EXPORT_DIR = Path(tempfile.gettempdir()) / "llm-speed-playground"
HISTORY_COLUMNS = {  # record field -> column header (units in the header, numbers rounded)
    "run_id": "#", "created_at": "when (UTC)", "model": "model", "backend": SETTINGS["backend"].label,
    "attn": "attention", "dtype_effective": "dtype",
    "cache": "cache", "compile": "compile", "device_effective": "device", "tokens": "tokens in→out",
    "ttft_ms": "TTFT ms", "decode_tok_s": "decode tok/s", "peak_mem_mb": "peak MB", "kv_cache_mb": "KV MB",
}


History = RunStore | SessionHistory  # what the history views read: the shared store, or one session's runs


class Playground:
    """The app's state: the hosting policy, the run history and one stop switch per browser session.

    Locally every session shares the durable `store`; in hosted mode `store` is None and each
    session has its own in-memory runs, so no visitor sees another's prompts or outputs.
    """

    def __init__(self, store: RunStore | None, default_model: str, policy: HostingPolicy = HostingPolicy()) -> None:
        self.store, self.default_model, self.policy = store, default_model, policy
        self.histories = SessionHistories() if policy.hosted else None
        self.generate = gpu_runner(generate, policy.zero_gpu)
        self._stops: dict[str, threading.Event] = {}
        self.panes: dict[str, dict[str, Pane]] = {}  # each session's latest panes, so Stop can show where it ended
        self._lock = threading.Lock()

    def new_stop(self, session: str) -> threading.Event:
        """A fresh stop switch for this session's next run."""
        with self._lock:
            self._stops[session] = threading.Event()
            return self._stops[session]

    def stop(self, session: str) -> bool:
        with self._lock:
            event = self._stops.get(session)
        if event is not None:
            event.set()
        return event is not None

    def history(self, session: str) -> History:
        return self.histories.history(session) if self.histories else self.store

    def export_dir(self, session: str) -> Path:
        """Where this session's downloads are written: one shared folder locally, a private one when hosted."""
        if not self.policy.hosted:
            return EXPORT_DIR
        return EXPORT_DIR / "sessions" / hashlib.sha256(session.encode()).hexdigest()[:20]  # the hash is client-sent

    def configs(self, shared: SharedSettings, columns: dict[str, ColumnSettings]) -> dict[str, RunConfig | ConfigError]:
        """Each side's engine request, or the ConfigError (engine rule or hosting limit) that refuses it."""
        out: dict[str, RunConfig | ConfigError] = {}
        for side, column in columns.items():
            try:
                out[side] = make_config(shared, column, self.policy)
            except ConfigError as exc:
                out[side] = exc
        return out

    def end_session(self, session: str) -> None:
        """Forget a closed page: its stop switch, panes and, in hosted mode, its runs and downloads."""
        with self._lock:
            self._stops.pop(session, None)
            self.panes.pop(session, None)
        if self.histories:
            self.histories.drop(session)
            shutil.rmtree(self.export_dir(session), ignore_errors=True)


def session_of(request: Any) -> str:
    """The caller's browser or client session, keyed with its address so that hosted mode can bound the
    sessions one client holds; a request without a session gets a fresh id, so it shares nobody's history."""
    session = getattr(request, "session_hash", None) or f"no-session-{uuid.uuid4().hex}"
    return session_key(client_address(request), session)


def client_address(request: Any) -> str:
    """Where the request came from: on a Space, the last X-Forwarded-For hop (added by the Space's proxy,
    so a client cannot choose it); elsewhere the connection's peer, since a header there is the client's word."""
    headers = getattr(request, "headers", None) or {}
    forwarded = headers.get("x-forwarded-for", "") if os.environ.get("SPACE_ID") else ""
    if forwarded.strip():
        return forwarded.split(",")[-1].strip()
    return getattr(getattr(request, "client", None), "host", None) or "unknown"


# ---- reading the controls ----------------------------------------------------------------------

def read_settings(values: dict[str, Any]) -> tuple[SharedSettings, dict[str, ColumnSettings]]:
    """Split named control values ('prompt', 'A.attn', ...) into shared and per-side settings."""
    shared = SharedSettings(**{f.name: values[f.name] for f in dataclasses.fields(SharedSettings)
                               if f.name in values or f.default is dataclasses.MISSING})
    columns = {side: ColumnSettings(**{f.name: values[f"{side}.{f.name}"] for f in dataclasses.fields(ColumnSettings)})
               for side in SIDES}
    return shared, columns


def side_notes(values: dict[str, Any], policy: HostingPolicy = HostingPolicy()) -> dict[str, str]:
    """A line under each column: what it will run as, or why it cannot run here."""
    shared, columns = read_settings(values)
    notes = {}
    for side, column in columns.items():
        ok, why = check_column(shared, column, policy)
        notes[f"note_{side}"] = f"✓ {why}" if ok else f"⛔ {why}"
    return notes


def model_info(model: str) -> str:
    preset = PRESETS.get((model or "").strip())
    if preset is None:
        return "A Hugging Face id or a local directory: loaded on the first run (downloads need network access)."
    return preset.summary + (". Timings are real; the text is noise." if preset.random_weights else ".")


def apply_comparison(name: str, model: str, policy: HostingPolicy = HostingPolicy()) -> dict[str, Any]:
    """Control values that set up a classic comparison for `model`, plus its note: what it will run, and,
    before Run, why a side cannot run on this host."""
    comparison = comparisons()[name]
    context = context_of(model)
    workload = comparison.workload(context)
    values: dict[str, Any] = dict(workload)
    for side, column in (("A", comparison.a), ("B", comparison.b)):
        values.update({f"{side}.{k}": v for k, v in dataclasses.asdict(column).items()})
    note = f"**{comparison.name}.** {comparison.note}"
    if comparison.long_prompt:
        cut = workload["prompt_tokens"] < LONG_PROMPT_TOKENS
        note += (f" Prompt: {workload['prompt_tokens']:,} synthetic tokens + {workload['new_tokens']} new"
                 + (f", cut to fit the model's {context:,}-token context." if cut else "."))
    note += f" The headline leads with **{render.HEADLINE_LABELS[comparison.figure]}**"
    estimate = comparison.estimate_s(model, policy)
    if estimate is not None:
        planned, most = estimate
        more = f", up to {most:,.0f} s if the verdict needs more pairs" if most > planned + 0.5 else ""
        note += f"; ≈ {planned:,.0f} s for both sides here{more}."
    else:
        note += "."
    if comparison.cannot_show:
        note = f"⚠ **This host cannot show it:** {comparison.cannot_show}\n\n{note}"
    shared = SharedSettings(model=model, **workload)
    for side, column in reversed((("A", comparison.a), ("B", comparison.b))):
        ok, why = check_column(shared, column, policy)
        if not ok:
            note = f"⛔ **{side} cannot run on this host:** {why}.\n\n{note}"
    values["comparison_note"] = note
    return values


def store_notice(store: RunStore | None) -> str:
    """A banner when the history file was moved aside as damaged, or cannot be used at all."""
    if store is None:
        return ""
    if store.problem:
        return f"⚠ **Run history not saved.** {store.problem}."
    if store.recovered_from:
        return (f"⚠ **The run history could not be read**, so a new one was started. The damaged file was kept "
                f"as `{store.recovered_from}`; nothing was deleted.")
    return ""


# ---- running -----------------------------------------------------------------------------------

def status_line(panes: dict[str, Pane]) -> str:
    """The run's state in one line; 'Finished' only once no side is left waiting."""
    running = next((p for p in panes.values() if p.state == "running"), None)
    if running is not None:
        return f"**Running {running.side}** · {running.status}"
    waiting = [s for s, p in panes.items() if p.state == "waiting"]
    if len(waiting) == len(panes):
        return "Waiting for the device…"
    if waiting:
        done = ", ".join(f"{s} {p.state}" for s, p in panes.items() if p.state != "waiting")
        return f"**Starting {waiting[0]}** · {done}"
    states = ", ".join(f"{s} {p.state}" for s, p in panes.items())
    if any(p.state == "stopped" for p in panes.values()):
        return f"**Stopped** · {states} · the device is free; stopped runs are not saved."
    unsaved = [p.record.reason for p in panes.values() if p.record and p.record.reason.startswith(NOT_SAVED)]
    saved = f"⚠ {unsaved[0]}" if unsaved else "history updated"
    return f"**Finished** · {states} · results below, {saved}."


def _pane_values(panes: dict[str, Pane]) -> dict[str, str]:
    values = {f"pane_{s}": p.html() for s, p in panes.items()}
    for side in SIDES:
        values.setdefault(f"pane_{side}", render.empty_pane(side))
    values["status"] = status_line(panes)
    return values


def run(app: Playground, values: dict[str, Any], sides: tuple[str, ...], session: str) -> Iterator[dict[str, Any]]:
    """Run the given sides one after the other, streaming both panes, then fill results, charts and history."""
    shared, columns = read_settings(values)
    configs = app.configs(shared, {side: columns[side] for side in sides})
    history = app.history(session)
    panes: dict[str, Pane] = {}
    figure = shared.figure if shared.figure in HEADLINES else "decode"
    for panes in run_sides(configs, history, app.new_stop(session), app.generate, figure=figure):
        app.panes[session] = panes
        yield _pane_values(panes)
    finished = {s: p.record for s, p in panes.items() if p.record is not None and p.record.status == "ok"}
    selected = list(values.get("selection") or []) + [r.run_id for r in finished.values() if r.run_id is not None]
    yield {
        **_pane_values(panes),
        "summary": render.summary_html(panes, figure),
        "metrics": render.metrics_table(finished),
        "diagnostics": render.diagnostics_html(finished),
        **history_view(history, selected, app.export_dir(session)),
    }


def sweep_batch_sizes(app: Playground, values: dict[str, Any], session: str) -> Iterator[dict[str, Any]]:
    """Side A's settings at each of SWEEP_BATCH_SIZES, one run after another in pane A, then the charts of just
    those runs: throughput against latency, and memory against batch size."""
    shared, columns = read_settings(values)
    history, stop = app.history(session), app.new_stop(session)
    sizes = [b for b in SWEEP_BATCH_SIZES if b <= (app.policy.max_batch_size or b)]
    done: list[RunRecord] = []
    panes: dict[str, Pane] = {}
    for i, size in enumerate(sizes, start=1):
        configs = app.configs(shared, {"A": dataclasses.replace(columns["A"], batch_size=size)})
        for panes in run_sides(configs, history, stop, app.generate):
            app.panes[session] = panes
            yield {**_pane_values(panes), "status": f"**Batch sweep** · batch {size} ({i} of {len(sizes)}) · "
                                                    f"{panes['A'].status}"}
        record = panes["A"].record
        if record is None or record.status != "ok":
            break
        done.append(record)
    selected = [r.run_id for r in done if r.run_id is not None]
    yield {**_pane_values(panes), "status": sweep_status(done, len(sizes)),
           **history_view(history, selected, app.export_dir(session))}


def sweep_status(done: list[RunRecord], planned: int) -> str:
    """What the sweep found in one line, with the serving advice where few sequences fit."""
    if not done:
        return "**Batch sweep stopped** before any batch size finished; see pane A."
    first, last = done[0], done[-1]
    line = (f"**Batch sweep** · {len(done)} of {planned} batch sizes · decode, all sequences: "
            f"{first.aggregate_decode_tok_s or 0:,.1f} tok/s at batch {first.batch_size} → "
            f"{last.aggregate_decode_tok_s or 0:,.1f} at batch {last.batch_size}; each sequence's inter-token latency "
            f"{first.itl_ms_p50 or 0:.2f} → {last.itl_ms_p50 or 0:.2f} ms · charts below")
    if last.max_batch_predicted is not None:
        line += f" · about {last.max_batch_predicted:,} sequences of this length fit in memory"
        if last.max_batch_predicted < FEW_USERS:
            line += f": {serving_advice()}"
    busy = [r for r in done if (r.host_other_cpu_pct or 0) > BUSY_HOST_PCT]
    if busy:
        line += (f" · ⚠ batch {', '.join(str(r.batch_size) for r in busy)} timed while other processes took up to "
                 f"{max(r.host_other_cpu_pct for r in busy):.0f}% of this host's CPUs: slower than on a quiet host")
    return line


def stop(app: Playground, session: str) -> dict[str, Any]:
    """Set the session's stop switch (the engine ends within one decode step) and mark its panes.

    Gradio also cancels the streaming event, so the panes would otherwise keep their last live state.
    """
    app.stop(session)
    panes = app.panes.get(session, {})
    for pane in panes.values():
        if pane.state == "running":
            pane.refuse("stopped", f"stopped by the user after {pane.tokens} tokens of {pane.status}; not saved")
        elif pane.state == "waiting":
            pane.refuse("skipped", "not run: stopped before this side started")
    return {**(_pane_values(panes) if panes else {}),
            "status": "**Stopped.** Generation ended within one decode step and the device is free."}


# ---- history and charts ------------------------------------------------------------------------

def history_frame(records: list[RunRecord]) -> pd.DataFrame:
    rows = []
    for r in records:
        row = {k: getattr(r, k, None) for k in HISTORY_COLUMNS}
        row["cache"] = r.setting("cache_impl") if r.use_cache else "off"  # auto as the layout it picked
        row["tokens"] = f"{r.prompt_tokens} → {r.tokens_generated}"
        row["created_at"] = r.created_at.replace("T", " ")[:19]
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(HISTORY_COLUMNS)).rename(columns=HISTORY_COLUMNS)
    return frame.round(2)


def chart_records(records: list[RunRecord], selected: list[int]) -> list[RunRecord]:
    """The selected runs, oldest first (charts read left to right in run order)."""
    wanted = set(selected)
    return sorted((r for r in records if r.run_id in wanted), key=lambda r: r.run_id)


def figures(records: list[RunRecord], selected: list[int]) -> dict[str, Any]:
    chosen = chart_records(records, selected)
    return {"timing_chart": charts.timing_figure(chosen), "latency_chart": charts.latency_figure(chosen),
            "memory_chart": charts.memory_figure(chosen),
            "batch_throughput_chart": charts.batch_throughput_figure(chosen),
            "batch_memory_chart": charts.batch_memory_figure(chosen)}


def _newest(ids: list[int], records: list[RunRecord]) -> list[int]:
    known = {r.run_id for r in records}
    return sorted({int(i) for i in ids if int(i) in known}, reverse=True)[:MAX_CHART_RUNS]


def _where(store: History) -> str:
    return f"`{store.path}`" if isinstance(store, RunStore) else store.path


def history_note(store: History, records: list[RunRecord]) -> str:
    note = f"{len(records)} run(s) in {_where(store)}. Click a row to add it to or remove it from the charts."
    if store.problem:
        note += f" ⚠ History not saved: {store.problem}."
    if store.recovered_from:
        note += f" A damaged history was moved aside to `{store.recovered_from}`."
    if store.skipped:
        note += f" ⚠ {store.skipped} unreadable row(s) skipped; they are left in the file."
    if store.unsaved:
        note += f" ⚠ {store.unsaved} finished run(s) could not be saved yet and are kept in memory; they are " \
                "retried with the next save."
    return note


def history_view(store: History, selected: list[int] | None = None, export_dir: Path = EXPORT_DIR) -> dict[str, Any]:
    """Table, chart selection, charts and export files from the store; None selects the newest runs."""
    records = store.records()
    ids = [r.run_id for r in records]
    chosen = _newest(ids if selected is None else selected, records)
    csv_path, json_path = export(records, export_dir)
    return {
        "history": history_frame(records),
        "history_note": history_note(store, records),
        "selection": gr.update(choices=[(charts.run_label(r), r.run_id) for r in records], value=chosen),
        "download_csv": csv_path,
        "download_json": json_path,
        **figures(records, chosen),
    }


def toggle_run(store: History, selected: list[int], run_id: int) -> dict[str, Any]:
    """Add the clicked history row to the charts, or take it out."""
    chosen = [i for i in (selected or []) if i != run_id]
    if len(chosen) == len(selected or []):
        chosen.append(run_id)
    return {"selection": chosen, **figures(store.records(), chosen)}


def select_runs(store: History, selected: list[int]) -> dict[str, Any]:
    return figures(store.records(), selected or [])


def _write(path: Path, text: str) -> str:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a download in progress never sees a half-written file
    return str(path)


def export(records: list[RunRecord], folder: Path = EXPORT_DIR) -> tuple[str, str]:
    """Write every run (all fields) as CSV and JSON for download; nested fields become JSON in CSV cells."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [r.to_dict() for r in records]
    flat = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()} for row in rows]
    csv_text = pd.DataFrame(flat).to_csv(index=False) if flat else ""
    return (_write(folder / "runs.csv", csv_text),
            _write(folder / "runs.json", json.dumps(rows, indent=1)))


def ask_clear(store: History) -> dict[str, Any]:
    n = len(store.records())
    return {"confirm_row": gr.update(visible=True),
            "confirm_text": f"Delete all {n} run(s) from {_where(store)}? This cannot be undone."}


def clear(store: History, export_dir: Path = EXPORT_DIR) -> dict[str, Any]:
    store.clear()
    return {"confirm_row": gr.update(visible=False), **history_view(store, [], export_dir)}


def cancel_clear() -> dict[str, Any]:
    return {"confirm_row": gr.update(visible=False)}
