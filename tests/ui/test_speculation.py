"""The speculation comparisons through the page's own event functions, on the shipped target and draft."""

from __future__ import annotations

from playground.presets import DEFAULT_MODEL
from playground.speculative import GROUNDED_PROMPT
from playground.ui import events


def _run_comparison(store, name: str) -> dict:
    app = events.Playground(store, DEFAULT_MODEL)
    values = {k: v for k, v in events.apply_comparison(name, DEFAULT_MODEL).items() if k != "comparison_note"}
    values.update(model=DEFAULT_MODEL, prompt=GROUNDED_PROMPT, new_tokens=24, repeats=1, warmup=0, selection=[])
    return list(events.run(app, values, ("A", "B"), "s1"))[-1]


def test_prompt_lookup_comparison_marks_drafts_and_keeps_the_tokens(store):
    final = _run_comparison(store, "Speculation: off vs prompt lookup")
    assert "state-ok" in final["pane_A"] and "state-ok" in final["pane_B"], final["pane_B"]
    assert "identical tokens (24 of 24)" in final["summary"]
    assert "tk-draft" in final["pane_B"] and "tk-draft" not in final["pane_A"]
    assert "tokens per target step" in final["metrics"] and "Speculation really drafted" in final["diagnostics"]
    b = store.records()[0]
    assert (b.spec, b.spec_effective, b.draft_tokens) == ("prompt_lookup", "prompt_lookup", 10)


def test_draft_comparison_runs_the_shipped_draft(store):
    final = _run_comparison(store, "Speculation: off vs draft model")
    assert "identical tokens (24 of 24)" in final["summary"], final["pane_B"]
    assert "of decode time" in final["metrics"]

