"""Run A and B through the engine and keep what each pane shows, cheaply, while tokens arrive.

One engine generator drives both sides: their passes take turns on the device (A1 B1 B2 A2 ...),
never at once, so a drift of the host lands on both and no pass shares the device with another. Every figure shown comes from the engine's own timestamps
(`Token.t_ms`, taken after a device synchronize), never from when the browser drew a token.

Updates are throttled: a snapshot is yielded at most every `UPDATE_INTERVAL_S` (and at every
phase change), and a pane re-sends only its last `render.LIVE_WINDOW_TOKENS` tokens while
streaming, so the cost of one update stays flat however long the output grows.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from playground.config import ConfigError, RunConfig
from playground.diagnostics import compare_outputs
from playground.record import RunRecord
from playground.store import RunStore
from playground.ui import render
from playground.ui.sessions import SessionRuns

if TYPE_CHECKING:
    from playground import engine

UPDATE_INTERVAL_S = 0.08
PHASE_NAMES = {"loading": "loading model", "warmup": "warm-up", "repeat": "measuring", "profiling": "profiling kernels"}


@dataclass
class Pane:
    """One side's live view; `add` is O(1) per token."""

    side: str
    title: str
    state: str = "waiting"  # waiting | running | ok | invalid | error | stopped | skipped
    status: str = "waiting"
    chunks: list[str] = field(default_factory=list)  # escaped HTML span per token of the current pass
    texts: list[str] = field(default_factory=list)  # the same tokens as plain text, for the API
    first_ms: float | None = None  # engine time of the pass's first token (= TTFT of this pass)
    last_ms: float | None = None
    in_profile: bool = False
    pass_status: str = ""  # the current pass's name and count, which a compile's progress is shown after
    compiling: bool = False  # the status shows a compile's progress until the next token
    record: RunRecord | None = None
    message: str = ""
    first_difference: int | None = None  # token where A and B first differ, once both finished comparably

    @property
    def tokens(self) -> int:
        return len(self.chunks)

    @property
    def text(self) -> str:
        return "".join(self.texts)

    @property
    def live_tok_s(self) -> float | None:
        """Decode rate of the current pass so far, from engine timestamps (prefill excluded)."""
        if self.tokens < 2 or not self.last_ms or self.last_ms <= self.first_ms:
            return None
        return (self.tokens - 1) / ((self.last_ms - self.first_ms) / 1e3)

    def phase(self, event: engine.Phase) -> None:
        self.state = "running"
        if event.phase == "compiling":  # within the pass: its tokens so far stay
            self.status, self.compiling = f"{self.pass_status} · compiling: {event.detail}", True
            return
        self.in_profile = event.phase == "profiling"
        name = PHASE_NAMES.get(event.phase, event.phase)
        count = f" {event.index}/{event.total}" if event.total else ""
        detail = f" · {event.detail}" if event.detail else ""
        self.status, self.pass_status = f"{name}{count}{detail}", f"{name}{count}"
        if event.phase in ("warmup", "repeat"):
            self.chunks, self.texts, self.first_ms, self.last_ms = [], [], None, None
            self.status += " · prefill"

    def add(self, token: engine.Token) -> None:
        if self.in_profile:  # the short profiled pass names kernels; its tokens repeat the output
            return
        if self.first_ms is None or self.compiling:
            self.first_ms = token.t_ms if self.first_ms is None else self.first_ms
            self.status = f"{self.pass_status} · decode" if self.compiling else self.status.replace(" · prefill",
                                                                                                     " · decode")
            self.compiling = False
        self.last_ms = token.t_ms
        self.chunks.append(render.token_span(token.text, token.index, token.draft))
        self.texts.append(token.text)

    def finish(self, record: RunRecord) -> None:
        if record.status == "stopped" and self.state == "waiting":  # a Stop came before this side's first step
            self.refuse("skipped", "not run: stopped before this side started")
            return
        self.record, self.state = record, record.status
        self.status = "done" if record.status == "ok" else record.status
        self.message = record.reason

    def refuse(self, state: str, message: str) -> None:
        self.state, self.status, self.message = state, state, message

    def html(self) -> str:
        return render.pane_html(self, live=self.state == "running")


Generate = Callable[[dict[str, RunConfig], threading.Event, str], Iterator[tuple[str, "engine.Event"]]]


def generate(configs: dict[str, RunConfig], stop: threading.Event | None = None, figure: str = "decode",
             extra_s: float | None = None) -> Iterator[tuple[str, engine.Event]]:
    """The engine's `generate_sides`, imported when a run starts: the page loads without torch."""
    from playground import engine

    return engine.generate_sides(configs, stop, figure=figure, extra_s=extra_s)


def run_sides(configs: dict[str, RunConfig | ConfigError], store: RunStore | SessionRuns, stop: threading.Event,
              generate: Generate = generate, clock: Callable[[], float] = time.monotonic, figure: str = "decode"
              ) -> Iterator[dict[str, Pane]]:
    """Run the sides through the engine together (their timed repeats take turns) and yield the panes (mutated in
    place) at throttled moments.

    A side refused before it runs is shown at once; finished runs with status ok go into the store.
    `generate` is the engine's, or the same wrapped to run on a ZeroGPU worker; `figure` is the headline the
    engine takes more repeats for while its verdict is open.
    """
    panes = {side: Pane(side, render.config_title(cfg)) for side, cfg in configs.items()}
    yield panes
    runnable = {side: cfg for side, cfg in configs.items() if not isinstance(cfg, ConfigError)}
    for side, config in configs.items():
        if isinstance(config, ConfigError):
            panes[side].refuse("invalid", str(config))
    if stop.is_set():
        for side in runnable:
            panes[side].refuse("skipped", "not run: stopped before this side started")
    if len(runnable) < len(configs) or stop.is_set():
        yield panes
    if runnable and not stop.is_set():
        yield from _stream(panes, generate(runnable, stop, figure), store, clock)
    if _mark_first_difference(panes):
        yield panes


def _mark_first_difference(panes: dict[str, Pane]) -> bool:
    """Point both panes at the token where A and B first differ; only when both finished ok and compare."""
    records = [panes[s].record for s in ("A", "B") if s in panes and panes[s].state == "ok"]
    if len(records) != 2:
        return False
    same = compare_outputs(*records)
    if not same["comparable"] or same["identical"]:
        return False
    panes["A"].first_difference = panes["B"].first_difference = same["first_difference"]
    return True


def _stream(panes: dict[str, Pane], events: Iterator[tuple[str, engine.Event]], store: RunStore | SessionRuns,
            clock: Callable[[], float]) -> Iterator[dict[str, Pane]]:
    from playground.engine import Phase, Token

    last = clock()
    with contextlib.closing(events):  # closing stops the engine and frees the device
        for side, event in events:
            pane = panes[side]
            if isinstance(event, Token):
                pane.add(event)
                if clock() - last < UPDATE_INTERVAL_S:
                    continue
            elif isinstance(event, Phase):
                pane.phase(event)
            else:
                if event.record.status == "ok":
                    store.add(event.record)
                pane.finish(event.record)
            last = clock()
            yield panes
