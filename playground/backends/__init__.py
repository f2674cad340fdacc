"""Generation backends behind one interface: the engine times, proves and records; a backend generates.

A backend is a module here with the functions of `Backend`, plus one `REGISTRY` entry saying what the
config must know before anything loads. The engine asks `get(config.backend)` and never which one it
has. Which attention implementations a backend takes is said by their entries in `playground.attention`.
Modules are imported on first use, so the config and the UI never import torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    import torch

    from playground.config import RunConfig
    from playground.loader import LoadedModel


@dataclass(frozen=True)
class Entry:
    name: str
    module: str  # the module that implements `Backend`, imported by `get`
    static_cache_only: bool = False  # decodes from its own static KV cache: needs use_cache on, cache_impl auto or static
    compiles_ahead: bool = False  # takes compile=aot: its decode step exported and compiled ahead of time
    tunes_kernels: bool = False  # its torch.compile'd steps can time kernels' launch configs: takes kernels=tuned


REGISTRY: dict[str, Entry] = {e.name: e for e in (
    Entry("transformers", "playground.backends.transformers"),
    Entry("fast", "playground.backends.fast", static_cache_only=True, compiles_ahead=True, tunes_kernels=True),
)}
NAMES = tuple(REGISTRY)
AHEAD_OF_TIME = tuple(e.name for e in REGISTRY.values() if e.compiles_ahead)
TUNED = tuple(e.name for e in REGISTRY.values() if e.tunes_kernels)


class Backend(Protocol):
    def unsupported(self, config: RunConfig, lm: LoadedModel, total_tokens: int) -> str | None:
        """Why it cannot run `config` on the loaded model (prompt + new = `total_tokens`), or None."""

    def generate(self, config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int, streamer,
                 stopping_criteria: Sequence) -> Any:
        """One generate call: `streamer.put` gets the prompt, then each new token; any criterion ends it."""

    def kv_cache_bytes(self, output: Any) -> int:
        """Bytes the KV cache of `generate`'s output holds."""

    def compiled(self, config: RunConfig, lm: LoadedModel) -> str:
        """What it compiled, for the record; "" when nothing was."""

    def speculation(self, output: Any) -> Drafting | None:
        """What a speculative `generate` drafted, when the backend measured it itself; None when the
        engine's hooks on the models' forward passes do (the transformers backend)."""


@dataclass(frozen=True)
class Drafting:
    drafted: tuple[int, ...]  # drafts each target step verified (0 for the prefill)
    draft_s: float  # time in the draft's work during decode
    draft_calls: int  # draft forward passes (prompt lookup on the fast backend: its searches)
    verify_s: float | None = None  # time in the target's verify steps, where the backend times them


def get(name: str) -> Backend:
    return importlib.import_module(REGISTRY[name].module)  # type: ignore[return-value]
