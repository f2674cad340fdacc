"""The named API endpoints `/run`, `/compare` and `/history`, for scripts driving the playground through gradio_client.

`/run` and `/compare` stream dicts: the text so far and the phase while running, then the
engine's full record(s) as JSON, each with its `name` (`RunRecord.to_dict`), as `/history`'s runs. They share the UI's device queue, so an API run never overlaps
a browser run; a client that cancels closes the stream, which stops the engine within one decode
step. Requests go through the same checks as the UI (engine rules, then the hosting policy), after
the arguments the schema types as text or true/false are checked to be exactly that (a JSON client can
send "false", which would otherwise read as true). Finished runs land in the same history the caller's session sees: the shared store locally, the
caller's own session in hosted mode.
"""

from __future__ import annotations

import inspect
import threading
import typing
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from playground.config import SETTINGS, ConfigError
from playground.diagnostics import HEADLINES, comparison
from playground.ui.events import Playground, history_note, session_of
from playground.ui.settings import SIDE_SETTINGS, ColumnSettings, SharedSettings
from playground.ui.streaming import Pane, run_sides

SHARED = ("prompt", "model", "new_tokens", "mode", "repeats", "warmup")  # the shared settings the API takes
# The published positional order (README); parameters of settings added later follow in schema order.
RUN_ORDER = ("prompt", "model", "attn", "use_cache", "dtype", "compile", "max_new_tokens", "cache_impl", "mode",
             "repeats", "warmup", "backend")
COMPARE_ORDER = ("prompt", "model", "a_attn", "a_use_cache", "a_dtype", "a_compile", "b_attn", "b_use_cache",
                 "b_dtype", "b_compile", "max_new_tokens", "mode", "repeats", "warmup", "a_cache_impl",
                 "b_cache_impl", "a_backend", "b_backend")
RUN_DEFAULTS = {"mode": "free", "repeats": 1}  # /run is one interactive pass that may stop at EOS


def _side(pane: Pane) -> dict[str, Any]:
    return {"text": pane.record.output_text if pane.record and pane.record.status == "ok" else pane.text,
            "tokens": pane.tokens, "state": pane.state, "status": pane.status, "message": pane.message,
            "record": pane.record.to_dict() if pane.record else None}


def _comparison(panes: dict[str, Pane]) -> dict[str, Any] | None:
    a, b = (panes[s].record for s in ("A", "B"))
    return comparison(a, b) if a and b and a.status == b.status == "ok" else None


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


def _unknown_figure(figure: object) -> ConfigError | None:
    if figure in HEADLINES:
        return None
    return ConfigError(f"figure must be one of {', '.join(HEADLINES)}, got {figure!r}")


def _api_name(name: str) -> str:
    return SETTINGS[name].api or name


def _parameters(prefixes: dict[str, str], order: tuple[str, ...], default_model: str,
                defaults: dict[str, Any]) -> list[inspect.Parameter]:
    """The endpoint's parameters from the schema: the shared settings, then each side's, as `<prefix><name>`."""
    def parameter(name: str, api_name: str) -> inspect.Parameter:
        setting = SETTINGS[name]
        default = {"prompt": inspect.Parameter.empty, "model": default_model}.get(name, defaults.get(name, setting.default))
        kind = str if name == "prompt" else setting.type  # the API always takes a prompt text
        return inspect.Parameter(api_name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=kind)

    params = [parameter(name, _api_name(name)) for name in SHARED]
    params += [parameter(name, prefix + _api_name(name)) for prefix in prefixes.values() for name in SIDE_SETTINGS]
    position = {name: i for i, name in enumerate(order)}
    params.sort(key=lambda p: position.get(p.name, len(order)))  # stable: new settings keep schema order
    return params


def _endpoint(name: str, doc: str, params: list[inspect.Parameter],
              body: Callable[[Callable, dict[str, Any], Any], Iterator[dict]]) -> Callable[..., Iterator[dict]]:
    """A generator function with a real, annotated signature: gr.api derives the endpoint's schema from it
    (the `gr.Request` parameter is filled by Gradio and left out of the schema)."""
    request = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                annotation=gr.Request)
    signature = inspect.Signature([*params, request], return_annotation=Iterator[dict])

    def endpoint(*args, **kwargs) -> Iterator[dict]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        request = arguments.pop("request")
        yield from body(endpoint, arguments, request)

    endpoint.__name__ = endpoint.__qualname__ = name
    endpoint.__doc__ = doc
    endpoint.__signature__ = signature
    endpoint.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {
        "return": signature.return_annotation}
    return endpoint


def make_endpoints(app: Playground):
    """The endpoint functions, bound to this app."""

    def stream(endpoint, arguments: dict[str, Any], request, prefixes: dict[str, str]) -> Iterator[dict[str, Pane]]:
        figure = arguments.pop("figure", "decode")
        refused = wrong_type(endpoint, arguments) or _unknown_figure(figure)
        shared = SharedSettings(**{name: arguments[_api_name(name)] for name in SHARED})
        columns = {side: ColumnSettings(**{name: arguments[prefix + _api_name(name)] for name in SIDE_SETTINGS})
                   for side, prefix in prefixes.items()}
        configs = {side: refused for side in columns} if refused else app.configs(shared, columns)
        return run_sides(configs, app.history(session_of(request)), threading.Event(), app.generate, figure=figure)

    one, both = {"A": ""}, {"A": "a_", "B": "b_"}

    def run_body(endpoint, arguments: dict[str, Any], request) -> Iterator[dict]:
        for panes in stream(endpoint, arguments, request, one):
            yield _side(panes["A"])

    def compare_body(endpoint, arguments: dict[str, Any], request) -> Iterator[dict]:
        for panes in stream(endpoint, arguments, request, both):
            yield {"A": _side(panes["A"]), "B": _side(panes["B"]), "comparison": _comparison(panes)}

    run = _endpoint("run", "Run one configuration; streams {text, tokens, state, status, message, record}, record "
                    "set at the end.", _parameters(one, RUN_ORDER, app.default_model, RUN_DEFAULTS), run_body)
    figure = inspect.Parameter("figure", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="decode", annotation=str)
    compare = _endpoint("compare", "Run A and B, their timed repeats in turn; streams {A, B, comparison}; comparison "
                        "(identical tokens, each figure's speedup, interval, noise floor and call) is set at the end. "
                        f"figure ({', '.join(HEADLINES)}) is the one an open verdict takes more pairs for.",
                        [*_parameters(both, COMPARE_ORDER, app.default_model, {}), figure], compare_body)

    def history(request: gr.Request = None) -> dict:
        """The runs this caller may see, newest first: {note, skipped, runs: [record, ...]} (only its own in hosted
        mode); skipped counts stored rows that could not be read."""
        store = app.history(session_of(request))
        records = store.records()
        return {"note": history_note(store, records), "skipped": store.skipped, "runs": [r.to_dict() for r in records]}

    return run, compare, history
