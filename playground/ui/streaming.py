"""Run A then B through the engine and keep what each pane shows, cheaply, while tokens arrive.

One generator drives both sides in turn, so the two runs never share the device (interleaving
would corrupt both timings). Every figure shown comes from the engine's own timestamps
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
        self.record, self.state = record, record.status
        self.status = "done" if record.status == "ok" else record.status
        self.message = record.reason

    def refuse(self, state: str, message: str) -> None:
        self.state, self.status, self.message = state, state, message

    def html(self) -> str:
        return render.pane_html(self, live=self.state == "running")


Generate = Callable[[RunConfig, threading.Event], Iterator["engine.Event"]]


def generate(config: RunConfig, stop: threading.Event | None = None) -> Iterator[engine.Event]:
    """The engine's `generate`, imported when a run starts: the page loads without torch."""
    from playground import engine

    return engine.generate(config, stop)


def run_sides(configs: dict[str, RunConfig | ConfigError], store: RunStore | SessionRuns, stop: threading.Event,
              generate: Generate = generate, clock: Callable[[], float] = time.monotonic
              ) -> Iterator[dict[str, Pane]]:
    """Run each side in order and yield the panes (mutated in place) at throttled moments.

    Finished runs with status ok go into the store; a Stop skips the sides not yet started.
    `generate` is the engine's, or the same wrapped to run on a ZeroGPU worker.
    """
    panes = {side: Pane(side, render.config_title(cfg)) for side, cfg in configs.items()}
    yield panes
    for side, config in configs.items():
        pane = panes[side]
        if isinstance(config, ConfigError):
            pane.refuse("invalid", str(config))
            yield panes
        elif stop.is_set():
            pane.refuse("skipped", "not run: stopped before this side started")
            yield panes
        else:
            yield from _stream_one(pane, generate(config, stop), store, clock, panes)
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


def _stream_one(pane: Pane, events: Iterator[engine.Event], store: RunStore | SessionRuns,
                clock: Callable[[], float], panes: dict[str, Pane]) -> Iterator[dict[str, Pane]]:
    from playground.engine import Phase, Token

    last = clock()
    with contextlib.closing(events):  # closing stops the engine and frees the device
        for event in events:
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
