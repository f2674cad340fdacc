"""The compiled step kept on disk, so a new process calls it without tracing it again.

A warm start from inductor's caches (`playground.warm`) skips code generation and tuning, but Dynamo
still traces the step in every new process: on the H200 the 8B shape's first call took 85 s with every
cache hit (results/h200/2026-12-03-warm-start-and-aot/). torch's ahead-of-time Dynamo compile
(`torch.compile(fn).aot_compile(example)`) compiles the same step with the same options and can be
saved; a later process loads it (`torch.compiler.load_compiled_function`) instead of tracing. The file
holds the traced code, its guards and the compiled graph, not the weights (they stay inputs) and not
the kernels' binaries, which inductor's caches keep: a load with those caches warm skips both.

The file is keyed by everything that changes what the trace would be: the step function and its
arguments, the compile options, the SDPA backends left on, the state's shapes and dtypes, the model's
config, attention implementation and weight types, the playground's own source, torch and the device.
The loaded step's guards are checked before it runs as well: inputs they refuse are traced by
torch.compile instead, never run through the file. A run that compiles with torch's caches off (a forced
SDPA backend: `engine._compiling_under`) neither reads nor writes these files either.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path
from typing import Callable

import torch
from torch._dynamo.utils import counters

from playground import warm
from playground.fast.fuse import fused_layers
from playground.fast.state import StaticState

PACKAGE = Path(__file__).resolve().parents[1]  # the playground's source: a change to it is a change to the trace


def available() -> bool:
    """Whether this torch can save and load a Dynamo-compiled function (2.10 and later)."""
    return hasattr(torch.compiler, "load_compiled_function") and hasattr(torch._dynamo.config, "enable_aot_compile")


def savable():
    """Around a torch.compile call, so that what it returns can be compiled ahead of time: torch attaches
    `aot_compile` only under this flag, which is off by default before torch 2.13."""
    if not available():
        return contextlib.nullcontext()
    return torch._dynamo.config.patch(enable_aot_compile=True)


class PrecompiledStep:
    """`fn(model, state, *args)` for one state: per argument signature, loaded from the compile cache when an
    earlier process saved it, else compiled ahead of time now and saved there.

    `compile` makes the function under torch.compile (`generate.torch_compiled`, or the prefill's dynamic
    compile), so both routes compile the same function with the same options. It is called once for the
    ahead-of-time compile and once more for torch.compile's own route, since `aot_compile` relaxes the guards
    of the wrapper it is called on (it filters out guards on globals and object identity). That own route is
    also the fallback:
    for inputs a saved step's guards refuse (a one-token prompt against a prefill saved symbolic in its
    length), and where a step cannot be compiled ahead of time, torch.compile traces it as before, and
    the saved file stays for the inputs it fits. `notes` says, per signature, which route ran and why."""

    def __init__(self, compile: Callable[[], Callable], fn: Callable, options: dict) -> None:
        """`options`: what the trace depends on beyond the inputs (compile options, the SDPA backends left on)."""
        self.compile, self.fn, self.options = compile, fn, options
        self.compiled_fn = compile()  # torch.compile's own route, lazy until called
        self.steps: dict[tuple, Callable] = {}
        self.notes: dict[tuple, str] = {}

    def __call__(self, model, state: StaticState, *args):
        key = signature(args)
        if key not in self.steps:
            self.prepare(model, state, *args)
        step = self.steps[key]
        try:
            return step(model, state, *args)
        except RuntimeError:
            if step is self.compiled_fn or step.guard_check(model, state, *args):
                raise  # the step itself failed, not the guards before it
            self.steps[key] = self.compiled_fn
            self.notes[key] += "; its guards refused later inputs, which torch.compile traced"
            warm.not_kept.append(f"{self.fn.__name__}: the saved step's guards refuse these inputs")
            return self.compiled_fn(model, state, *args)

    def prepare(self, model, state: StaticState, *args) -> str:
        """Load or compile the step for these arguments without running it; returns how (`notes`)."""
        key = signature(args)
        self.steps[key] = self._load_or_compile(model, state, args, key)
        return self.notes[key]

    def _load_or_compile(self, model, state: StaticState, args: tuple, key: tuple) -> Callable:
        if torch.compiler.config.force_disable_caches:  # a compile that must not read or write any cache
            self.notes[key] = "traced by torch.compile (caches off for this run)"
            return self.compiled_fn
        path = step_path(self.fn, model, state, self.options, key)
        if path.is_file():
            try:
                with path.open("rb") as f:
                    loaded = torch.compiler.load_compiled_function(f)
                if loaded.guard_check(model, state, *args):
                    counters["playground"]["precompiled_step_hit"] += 1
                    self.notes[key] = f"loaded {path.name}"
                    return loaded
                self.notes[key] = f"{path.name} kept: its guards refuse these inputs; traced by torch.compile"
                warm.not_kept.append(f"{self.fn.__name__}: the saved step's guards refuse these inputs")
                return self.compiled_fn  # not compiled over: the file serves the inputs it was saved for
            except Exception as exc:  # a file from another torch or a broken write: compile over it
                self.notes[key] = f"{path.name} did not load ({type(exc).__name__}: {exc}); compiled anew"
        counters["playground"]["precompiled_step_miss"] += 1
        try:
            with torch._dynamo.config.patch(specialize_float=True):  # else a prefill restarts its trace, unsaved
                compiled = self.compile().aot_compile(((model, state, *args), {}))
        except Exception as exc:  # e.g. a backend whose output cannot be saved: torch.compile traces it lazily
            self.notes[key] = f"not compiled ahead of time ({type(exc).__name__}: {exc}); traced by torch.compile"
            warm.not_kept.append(f"{self.fn.__name__}: {type(exc).__name__}: {str(exc)[:200]}")
            return self.compiled_fn
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            compiled.save_compiled_function(str(path))
        except Exception as exc:  # a read-only cache, or a part torch cannot pickle: the step still runs, the next
            self.notes[key] = f"compiled; not saved ({type(exc).__name__}: {exc})"  # process traces it again
            warm.not_kept.append(f"{self.fn.__name__}: not saved: {type(exc).__name__}: {str(exc)[:200]}")
        else:
            self.notes.setdefault(key, f"compiled and saved {path.name}")
        return compiled


def signature(args: tuple) -> tuple:
    """The arguments as a compile sees them: values, except tensors, of which only rank and dtype (their sizes are
    the guards' business: static for a decode step, symbolic for a prefill)."""
    return tuple(f"tensor {a.dim()}d {a.dtype}" if isinstance(a, torch.Tensor) else a for a in args)


def step_path(fn: Callable, model, state: StaticState, options: dict, sig: tuple) -> Path:
    """Where the step compiled for the arguments of this `signature` lives in the compile cache."""
    fused = fused_layers(model)[0] if model.__dict__.get("_playground_fused") else None
    weights = {name: [type(p).__name__, str(p.dtype), list(p.shape)] for name, p in model.named_parameters()}
    if fused is not None:  # the fused projections' types, which quantization changes
        weights["fused"] = [type(fused.qkv.weight).__name__, type(fused.gate_up.weight).__name__]
    key = dict(fn=f"{fn.__module__}.{fn.__qualname__}", args=repr(sig), options=repr(sorted(options.items())),
               state=[[list(t.shape), str(t.dtype)] for t in state.tensors()],
               padded=state.padded, config=model.config.to_json_string(use_diff=False),
               attn=model.config._attn_implementation, weights=weights, source=source_digest(),
               torch=torch.__version__,
               device=torch.cuda.get_device_name(state.tokens.device) if state.tokens.is_cuda else "cpu")
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return warm.cache_dir() / "steps" / f"{fn.__name__}-{digest}.bin"


@functools.cache
def source_digest() -> str:
    """A digest of every Python file of the playground: a saved step holds the code it traced."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()
