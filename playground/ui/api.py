"""The named API endpoints `/run`, `/compare` and `/history`, for scripts driving the playground through gradio_client.

`/run` and `/compare` stream dicts: the text so far and the phase while running, then the
engine's full record(s) as JSON. They share the UI's device queue, so an API run never overlaps
a browser run; a client that cancels closes the stream, which stops the engine within one decode
step. Requests go through the same checks as the UI (engine rules, then the hosting policy), after
the arguments the schema types as text or true/false are checked to be exactly that (a JSON client can
send "false", which would otherwise read as true). Finished runs land in the same history the caller's session sees: the shared store locally, the
caller's own session in hosted mode.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Iterator
from typing import Any

import gradio as gr

from playground.config import ConfigError
from playground.metrics import speedup
from playground.record import compare_outputs, differs_beyond_noise
from playground.ui.events import Playground, history_note, session_of
from playground.ui.settings import ColumnSettings, SharedSettings
from playground.ui.streaming import Pane, run_sides


def _side(pane: Pane) -> dict[str, Any]:
    return {"text": pane.record.output_text if pane.record and pane.record.status == "ok" else pane.text,
            "tokens": pane.tokens, "state": pane.state, "status": pane.status, "message": pane.message,
            "record": pane.record.to_dict() if pane.record else None}


def comparison(panes: dict[str, Pane]) -> dict[str, Any] | None:
    a, b = (panes[s].record for s in ("A", "B"))
    if not (a and b and a.status == b.status == "ok"):
        return None
    return {**compare_outputs(a, b), "ttft_speedup_b_over_a": speedup(a.ttft_ms, b.ttft_ms, False),
            "decode_speedup_b_over_a": speedup(a.decode_tok_s, b.decode_tok_s, True),
            # True/False: Welch's t-test over the repeats at 95%; None: a side ran one repeat
            "ttft_beyond_noise": differs_beyond_noise(a, b, "ttft_ms"),
            "decode_beyond_noise": differs_beyond_noise(a, b, "decode_tok_s")}


def wrong_type(endpoint, arguments: dict[str, Any]) -> ConfigError | None:
    """Why an argument the endpoint's schema types as text or true/false is something else, or None.

    Numbers are left to the settings' whole-number rule, which also takes 3.0 and "3".
    """
    hints = typing.get_type_hints(endpoint)
    for name, value in arguments.items():
        expected = hints.get(name)
        if expected in (str, bool) and not isinstance(value, expected):
            kind = "text" if expected is str else "true or false (a JSON boolean)"
            return ConfigError(f"{name} must be {kind}, got {value!r}")
    return None


def make_endpoints(app: Playground):
    """The endpoint functions, bound to this app; typed, as gr.api derives the schema from hints
    (the `gr.Request` parameter is filled by Gradio and left out of the schema)."""

    def stream(endpoint, arguments: dict[str, Any], shared: SharedSettings, columns: dict[str, ColumnSettings],
               session: str) -> Iterator[dict[str, Pane]]:
        refused = wrong_type(endpoint, arguments)
        configs = {side: refused for side in columns} if refused else app.configs(shared, columns)
        return run_sides(configs, app.history(session), threading.Event(), app.generate)

    def run(prompt: str, model: str = app.default_model, attn: str = "sdpa", use_cache: bool = True,
            dtype: str = "auto", compile: str = "off", max_new_tokens: int = 64, cache_impl: str = "dynamic",
            mode: str = "free", repeats: int = 1, warmup: int = 1, backend: str = "transformers",
            request: gr.Request = None) -> Iterator[dict]:
        """Run one configuration; streams {text, tokens, state, status, message, record}, record set at the end."""
        arguments = {k: v for k, v in locals().items() if k != "request"}
        shared = SharedSettings(model=model, prompt=prompt, new_tokens=max_new_tokens, mode=mode, repeats=repeats,
                                warmup=warmup)
        column = ColumnSettings(use_cache=use_cache, cache_impl=cache_impl, attn=attn, dtype=dtype, compile=compile,
                                backend=backend)
        for panes in stream(run, arguments, shared, {"A": column}, session_of(request)):
            yield _side(panes["A"])

    def compare(prompt: str, model: str = app.default_model, a_attn: str = "sdpa", a_use_cache: bool = True,
                a_dtype: str = "auto", a_compile: str = "off", b_attn: str = "sdpa", b_use_cache: bool = True,
                b_dtype: str = "auto", b_compile: str = "off", max_new_tokens: int = 64, mode: str = "benchmark",
                repeats: int = 3, warmup: int = 1, a_cache_impl: str = "dynamic",
                b_cache_impl: str = "dynamic", a_backend: str = "transformers", b_backend: str = "transformers",
                request: gr.Request = None) -> Iterator[dict]:
        """Run A then B; streams {A, B, comparison}; comparison (identical tokens, speedups) is set at the end."""
        arguments = {k: v for k, v in locals().items() if k != "request"}
        shared = SharedSettings(model=model, prompt=prompt, new_tokens=max_new_tokens, mode=mode, repeats=repeats,
                                warmup=warmup)
        columns = {"A": ColumnSettings(a_use_cache, a_cache_impl, a_attn, a_dtype, a_compile, a_backend),
                   "B": ColumnSettings(b_use_cache, b_cache_impl, b_attn, b_dtype, b_compile, b_backend)}
        for panes in stream(compare, arguments, shared, columns, session_of(request)):
            yield {"A": _side(panes["A"]), "B": _side(panes["B"]), "comparison": comparison(panes)}

    def history(request: gr.Request = None) -> dict:
        """The runs this caller may see, newest first: {note, skipped, runs: [record, ...]} (only its own in hosted
        mode); skipped counts stored rows that could not be read."""
        store = app.history(session_of(request))
        records = store.records()
        return {"note": history_note(store, records), "skipped": store.skipped, "runs": [r.to_dict() for r in records]}

    return run, compare, history
