"""Event functions called directly, with the real engine on the tiny random model."""

from __future__ import annotations

import dataclasses
import json
import threading
import re

import pytest

from conftest import TINY
from playground import capabilities
from playground.presets import DEFAULT_MODEL
from playground.ui import events, render
from playground.ui.settings import SIDES, ColumnSettings, comparisons

SMALL = dict(model=TINY, prompt="Hello <b>there</b>", synthetic=False, prompt_tokens=16, new_tokens=6,
             mode="benchmark", repeats=1, warmup=0, selection=[])


def values(a: dict | None = None, b: dict | None = None, **shared) -> dict:
    out = {**SMALL, **shared}
    for side, changes in (("A", a or {}), ("B", b or {})):
        column = {**dataclasses.asdict(ColumnSettings()), **changes}
        out.update({f"{side}.{k}": v for k, v in column.items()})
    return out


def test_backend_comparison_runs_transformers_then_fast_with_identical_tokens(store):
    app = events.Playground(store, TINY)
    final = list(events.run(app, values(a=dict(cache_impl="static"), b=dict(cache_impl="static", backend="fast")),
                            ("A", "B"), "s1"))[-1]
    assert "state-ok" in final["pane_A"] and "state-ok" in final["pane_B"], final["pane_B"]
    assert "identical tokens (6 of 6)" in final["summary"]
    assert [r.backend for r in store.records()] == ["fast", "transformers"]


def test_run_a_vs_b_streams_then_fills_results(store):
    app = events.Playground(store, TINY)
    updates = list(events.run(app, values(a=dict(use_cache=False)), ("A", "B"), "s1"))
    streaming, final = updates[:-1], updates[-1]
    assert any("measuring" in u["status"] for u in streaming)
    assert any('data-tokens="0"' not in u["pane_A"] for u in streaming)  # A streamed tokens before the end
    assert any("state-running" in u["pane_B"] and "state-ok" in u["pane_A"] for u in streaming)  # A, then B
    assert "state-ok" in final["pane_A"] and "state-ok" in final["pane_B"]
    assert "identical tokens (6 of 6)" in final["summary"]  # greedy output is the same with and without a cache
    assert "B vs A" in final["metrics"] and "Eval mode" in final["diagnostics"]
    records = store.records()
    assert [r.use_cache for r in records] == [True, False]  # newest first: B (cache on), then A
    assert list(final["history"]["#"]) == [r.run_id for r in records]
    assert list(final["history"]["backend"]) == ["transformers", "transformers"]
    assert final["selection"]["value"] == [r.run_id for r in records]
    assert sum(t.type == "bar" for t in final["timing_chart"].data) == 4  # two runs x two panels


def test_invalid_side_explains_and_the_other_still_runs(store):
    app = events.Playground(store, TINY)
    final = list(events.run(app, values(a=dict(compile="default", cache_impl="dynamic")), ("A", "B"), "s1"))[-1]
    assert "state-invalid" in final["pane_A"] and "cache_impl=static" in final["pane_A"]
    assert "state-ok" in final["pane_B"]
    assert len(store.records()) == 1  # only ok runs enter the history


def test_run_a_only_leaves_b_idle(store):
    app = events.Playground(store, TINY)
    final = list(events.run(app, values(), ("A",), "s1"))[-1]
    assert "state-ok" in final["pane_A"] and "state-waiting" in final["pane_B"]
    assert "B vs A" not in final["metrics"]


def _running_with_tokens(app):
    """A long A-then-B run, advanced until pane A shows tokens streaming; returns the open stream."""
    stream = events.run(app, values(new_tokens=400), ("A", "B"), "s1")
    for update in stream:
        if 'data-tokens="0"' not in update["pane_A"] and "state-running" in update["pane_A"]:
            break
    return stream


def test_stop_ends_the_run_and_skips_b(store):
    app = events.Playground(store, TINY)
    stream = _running_with_tokens(app)
    events.stop(app, "s1")
    final = list(stream)[-1]
    assert "state-stopped" in final["pane_A"]
    assert "state-skipped" in final["pane_B"] or "state-stopped" in final["pane_B"]  # B loads while A warms up
    assert store.records() == []


def test_closing_the_stream_frees_the_device(store):
    """What Gradio does on Stop (`cancels=`): close the generator; the engine lock must be released."""
    from playground.engine import DEVICE_LOCK

    app = events.Playground(store, TINY)
    stream = _running_with_tokens(app)
    stream.close()
    assert DEVICE_LOCK.acquire(timeout=5)
    DEVICE_LOCK.release()


def test_side_notes_name_the_reason_an_option_cannot_run():
    notes = events.side_notes(values(a=dict(attn="flash_attention_2", dtype="bf16")))
    assert notes["note_A"].startswith("⛔") and "flash" in notes["note_A"]
    assert notes["note_B"].startswith("✓ runs as sdpa")


def test_every_comparison_sets_every_control_it_depends_on():
    """So the order of clicks never matters: each sets all settings but the model and the prompt text."""
    settable = (set(values()) | {"figure"}) - {"model", "prompt", "selection"}
    for name in comparisons():
        update = events.apply_comparison(name, TINY)
        assert set(update) - {"prompt"} == settable | {"comparison_note"}, name  # a comparison may pick its prompt
    kv = events.apply_comparison("KV cache: off vs on", TINY)
    assert kv["A.use_cache"] is False and kv["B.use_cache"] is True


def test_a_dtype_click_after_a_long_context_click_runs(store):
    """Seen by a user: the long prompt a long-context click left behind made a later dtype run overflow."""
    state = values(model=DEFAULT_MODEL)
    for name in ("Attention: eager vs sdpa (long context)", "dtype: fp32 vs bf16"):
        state.update(events.apply_comparison(name, DEFAULT_MODEL))
    assert state["synthetic"] is False
    notes = events.side_notes(state)
    assert all(n.startswith("✓ runs") for n in notes.values()), notes


def test_long_context_comparison_says_what_it_uses_and_passes_the_pre_run_check():
    update = events.apply_comparison("Attention: eager vs sdpa (long context)", DEFAULT_MODEL)
    assert "2,016 synthetic tokens + 32 new, cut to fit the model's 2,048-token context" in update["comparison_note"]
    notes = events.side_notes({**values(model=DEFAULT_MODEL), **update})
    assert all(n.startswith("✓ runs") for n in notes.values()), notes


def test_side_notes_catch_a_prompt_beyond_the_context():
    notes = events.side_notes(values(model=DEFAULT_MODEL, synthetic=True, prompt_tokens=2048, new_tokens=32))
    assert notes["note_A"] == notes["note_B"]
    assert notes["note_A"].startswith("⛔") and "exceeds the model's context of 2048 tokens" in notes["note_A"]


def test_flash_comparison_on_a_cpu_host_says_before_run_that_b_cannot_run():
    if capabilities.host().cuda:
        pytest.skip("CPU host only")
    note = events.apply_comparison("Attention: sdpa vs flash_attention_2 (long context)", DEFAULT_MODEL)["comparison_note"]
    assert note.startswith("⛔ **B cannot run on this host:**") and "needs a CUDA GPU" in note


def test_a_comparison_says_before_run_which_figure_it_leads_with_and_what_it_costs_here():
    for name, comparison in comparisons().items():
        note = events.apply_comparison(name, DEFAULT_MODEL)["comparison_note"]
        assert f"The headline leads with **{render.HEADLINE_LABELS[comparison.figure]}**" in note, name
        if comparison.cannot_show:
            assert "⚠ **This host cannot show it:**" in note, name
        if "cannot run on this host" not in note:
            assert re.search(r"≈ [\d,]+ s for both sides here(, up to [\d,]+ s if the verdict needs more pairs)?\.", note), name
    assert comparisons()["Batching: 1 vs 4 sequences"].figure == "throughput"


def test_status_says_finished_only_when_no_side_waits():
    from playground.ui.streaming import Pane
    from records import make_record

    panes = {s: Pane(s, "t") for s in SIDES}
    panes["A"].finish(make_record(1))
    assert events.status_line(panes) == "**Starting B** · A ok"
    panes["B"].finish(make_record(2))
    assert events.status_line(panes) == "**Finished** · A ok, B ok · results below, history updated."
    panes["B"].finish(make_record(2, reason="not saved to the history: database is locked"))
    assert events.status_line(panes).endswith("results below, ⚠ not saved to the history: database is locked.")


def test_history_toggle_export_and_clear(store):
    from records import make_record

    for i in range(3):
        store.add(make_record(None, attn=("eager", "sdpa", "sdpa")[i]))
    view = events.history_view(store)
    assert list(view["history"]["#"]) == [3, 2, 1] and view["selection"]["value"] == [3, 2, 1]
    assert events.toggle_run(store, [3, 2, 1], 2)["selection"] == [3, 1]
    assert events.toggle_run(store, [3, 1], 2)["selection"] == [3, 1, 2]
    rows = json.loads(open(view["download_json"]).read())
    assert [r["run_id"] for r in rows] == [3, 2, 1]
    assert open(view["download_csv"]).read().splitlines()[0].startswith("model,attn")
    assert "Delete all 3 run(s)" in events.ask_clear(store)["confirm_text"]
    cleared = events.clear(store)
    assert store.records() == [] and cleared["history"].empty and cleared["confirm_row"]["visible"] is False


def test_stop_registry_is_per_session(store):
    app = events.Playground(store, TINY)
    mine, other = app.new_stop("me"), app.new_stop("you")
    assert app.stop("me") and mine.is_set() and not other.is_set()
    assert not app.stop("nobody")
    assert isinstance(mine, threading.Event)


def test_updates_are_throttled_by_the_clock(store):
    from playground.ui.settings import ColumnSettings, SharedSettings, make_config
    from playground.ui.streaming import run_sides

    config = make_config(SharedSettings(model=TINY, prompt="hi", new_tokens=60, repeats=1, warmup=0),
                         ColumnSettings())
    frozen = sum(1 for _ in run_sides({"A": config}, store, threading.Event(), clock=lambda: 0.0))
    assert frozen <= 6  # 60 tokens, yet only the start, the phase changes and the result yield


def test_batch_sweep_runs_a_at_each_size_and_charts_just_those_runs(store):
    app = events.Playground(store, TINY)
    list(events.run(app, values(), ("A",), "s1"))  # an earlier run stays out of the sweep's charts
    updates = list(events.sweep_batch_sizes(app, values(), "s1"))
    final = updates[-1]
    assert any("batch 4 (3 of 4)" in u["status"] for u in updates[:-1])
    sweep = [r for r in store.records() if r.run_id in final["selection"]["value"]]
    assert sorted(r.batch_size for r in sweep) == list(events.SWEEP_BATCH_SIZES)
    assert list(final["batch_throughput_chart"].data[0].text) == [f"batch {b}" for b in events.SWEEP_BATCH_SIZES]
    assert "at batch 1 →" in final["status"] and "fit in memory" in final["status"]


def test_sweep_status_advises_capping_the_context_where_few_sequences_fit():
    from records import make_record

    few = [make_record(1, aggregate_decode_tok_s=10.0, max_batch_predicted=3),
           make_record(2, batch_size=2, aggregate_decode_tok_s=18.0, max_batch_predicted=3)]
    status = events.sweep_status(few, 4)
    assert "2 of 4 batch sizes" in status and "cap the context" in status and "queue requests" in status
    assert "cap the context" not in events.sweep_status([make_record(1, max_batch_predicted=500)], 4)


def test_sweep_status_flags_the_batch_sizes_timed_on_a_busy_host():
    from records import make_record

    from playground.record import BUSY_HOST_PCT

    done = [make_record(1, host_other_cpu_pct=BUSY_HOST_PCT + 15), make_record(2, batch_size=2, host_other_cpu_pct=1.0)]
    status = events.sweep_status(done, 2)
    assert f"⚠ batch 1 timed while other processes took up to {BUSY_HOST_PCT + 15:.0f}%" in status
    assert "⚠" not in events.sweep_status(done[1:], 2)
