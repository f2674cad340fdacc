"""The named API endpoints `/run` and `/compare`, for scripts driving the playground through gradio_client.

Each streams dicts: the text so far and the phase while running, then the engine's full record(s)
as JSON. They share the UI's device queue, so an API run never overlaps a browser run; a client
that cancels closes the stream, which stops the engine within one decode step.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from playground.config import ConfigError
from playground.metrics import speedup
from playground.record import compare_outputs
from playground.ui.events import Playground
from playground.ui.settings import ColumnSettings, SharedSettings, make_config
from playground.ui.streaming import Pane, run_sides


def _side(pane: Pane) -> dict[str, Any]:
    return {"text": pane.record.output_text if pane.record and pane.record.status == "ok" else pane.text,
            "tokens": pane.tokens, "state": pane.state, "status": pane.status, "message": pane.message,
            "record": pane.record.to_dict() if pane.record else None}


def _configs(shared: SharedSettings, columns: dict[str, ColumnSettings]) -> dict[str, Any]:
    out = {}
    for side, column in columns.items():
        try:
            out[side] = make_config(shared, column)
        except ConfigError as exc:  # reported as the side's state and message, with no record
            out[side] = exc
    return out


def comparison(panes: dict[str, Pane]) -> dict[str, Any] | None:
    a, b = (panes[s].record for s in ("A", "B"))
    if not (a and b and a.status == b.status == "ok"):
        return None
    return {**compare_outputs(a, b), "ttft_speedup_b_over_a": speedup(a.ttft_ms, b.ttft_ms, False),
            "decode_speedup_b_over_a": speedup(a.decode_tok_s, b.decode_tok_s, True)}


def make_endpoints(app: Playground):
    """The two endpoint functions, bound to this app's store; typed, as gr.api derives the schema from hints."""

    def run(prompt: str, model: str = app.default_model, attn: str = "sdpa", use_cache: bool = True,
            dtype: str = "auto", compile: str = "off", max_new_tokens: int = 64, cache_impl: str = "dynamic",
            mode: str = "free", repeats: int = 1, warmup: int = 1) -> Iterator[dict]:
        """Run one configuration; streams {text, tokens, state, status, message, record}, record set at the end."""
        shared = SharedSettings(model=model, prompt=prompt, new_tokens=max_new_tokens, mode=mode, repeats=repeats,
                                warmup=warmup)
        column = ColumnSettings(use_cache=use_cache, cache_impl=cache_impl, attn=attn, dtype=dtype, compile=compile)
        for panes in run_sides(_configs(shared, {"A": column}), app.store, threading.Event()):
            yield _side(panes["A"])

    def compare(prompt: str, model: str = app.default_model, a_attn: str = "sdpa", a_use_cache: bool = True,
                a_dtype: str = "auto", a_compile: str = "off", b_attn: str = "sdpa", b_use_cache: bool = True,
                b_dtype: str = "auto", b_compile: str = "off", max_new_tokens: int = 64, mode: str = "benchmark",
                repeats: int = 3, warmup: int = 1, a_cache_impl: str = "dynamic",
                b_cache_impl: str = "dynamic") -> Iterator[dict]:
        """Run A then B; streams {A, B, comparison}; comparison (identical tokens, speedups) is set at the end."""
        shared = SharedSettings(model=model, prompt=prompt, new_tokens=max_new_tokens, mode=mode, repeats=repeats,
                                warmup=warmup)
        columns = {"A": ColumnSettings(a_use_cache, a_cache_impl, a_attn, a_dtype, a_compile),
                   "B": ColumnSettings(b_use_cache, b_cache_impl, b_attn, b_dtype, b_compile)}
        for panes in run_sides(_configs(shared, columns), app.store, threading.Event()):
            yield {"A": _side(panes["A"]), "B": _side(panes["B"]), "comparison": comparison(panes)}

    return run, compare
