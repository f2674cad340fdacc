"""A warm start for compiled runs: what torch.compile built, saved after a cold compile and loaded before the next.

A compiled run's first call traces the model, generates code and, with the fast backend's kernel choice
tuned, tunes kernels (coordinate descent): minutes on an 8B model, and the tuning can land on different
kernels each time. torch serializes what its caches built (inductor's FX graphs, AOTAutograd entries, autotuning
results: `torch.compiler.save_cache_artifacts`) and hot-loads them in another process
(`load_cache_artifacts`), which then skips code generation and tuning and runs the same kernels.

Artifacts are kept per model and per setting that changes the compiled graph, torch version and device,
in PLAYGROUND_COMPILE_CACHE (default ~/.cache/llm-speed-playground/compile), beside the fast backend's saved
steps and inductor's own cache (`keep_inductor_cache`). `python -m playground warm` fills them; the engine
loads them before a compiled run and records whether the compile hit them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from torch._dynamo.utils import counters

from playground.config import RunConfig

CACHE_ENV = "PLAYGROUND_COMPILE_CACHE"
# the settings that change what a compiled run traces, with whether the batch is left-padded (`artifact_path`);
# prompt text, lengths within a cache bucket and how uneven a padded batch is do not
GRAPH_SETTINGS = ("model", "backend", "compile", "kernels", "dtype", "attn", "quant", "spec", "draft_tokens",
                  "draft_model", "batch_size", "use_cache", "cache_impl", "temperature")
_loaded: set[Path] = set()  # artifact files already loaded into this process
not_kept: list[str] = []  # why a step was traced by torch.compile rather than kept on disk (playground.fast.precompile)


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "llm-speed-playground" / "compile")


def keep_inductor_cache() -> None:
    """Point inductor's own cache (generated code, compiled kernels, tuning results) into the compile cache folder,
    unless TORCHINDUCTOR_CACHE_DIR says where; call before the process's first compile.

    A saved step (playground.fast.precompile) holds its trace, not its kernels, and torch's artifacts (`save`)
    do not carry what an ahead-of-time compile built: a new process that loads a saved step without inductor's
    cache builds its kernels again (on the CPU 10.6-11.0 s against 1.8 s: results/cpu/2026-12-06-precompile-step.md).
    Inductor's default folder is in the temporary folder, which a reboot or a Space's restart empties. (torch
    writes its default into the environment when imported, so a value equal to it counts as unset.)"""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None or os.path.abspath(current) == os.path.abspath(default_cache_dir()):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir() / "inductor")


def artifact_path(config: RunConfig, device_name: str) -> Path:
    """Where `config`'s artifacts live: one file per graph-changing setting set, torch version and device."""
    key = {name: getattr(config, name) for name in GRAPH_SETTINGS}
    key["cache_impl"] = config.cache_impl_effective  # auto and the layout it picks trace the same graph
    key.update(padded=config.batch_size > 1 and config.length_spread_pct > 0, torch=torch.__version__,
               device=device_name)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / f"{config.model.replace('/', '--')}-{config.backend}-{config.compile}-{digest}.bin"


def load(path: Path) -> bool:
    """Hot-load `path` once per process; returns whether it holds artifacts (loaded now or before)."""
    if path in _loaded:
        return True
    if not path.is_file():
        return False
    torch.compiler.load_cache_artifacts(path.read_bytes())
    _loaded.add(path)
    return True


def cache_hits() -> int:
    """Compiled graphs served from a cache so far in this process (inductor's and AOTAutograd's counters,
    ahead-of-time packages loaded from disk: playground.fast.aot, and saved steps: playground.fast.precompile)."""
    return (counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]
            + counters["playground"]["aot_package_hit"] + steps_loaded())


def steps_loaded() -> int:
    """Compiled steps loaded from disk so far in this process, each one a trace skipped."""
    return counters["playground"]["precompiled_step_hit"]


def compiles() -> int:
    """Graphs inductor compiled or fetched so far in this process: unchanged over a run that compiled nothing."""
    inductor, aot = counters["inductor"], counters["playground"]
    return (inductor["fxgraph_cache_hit"] + inductor["fxgraph_cache_miss"] + inductor["fxgraph_cache_bypass"]
            + aot["aot_package_hit"] + aot["aot_package_miss"] + aot["precompiled_step_hit"]
            + aot["precompiled_step_miss"])


def save(path: Path) -> Path | None:
    """Write every artifact this process's compiles created to `path` (atomically); None when there were none."""
    artifacts = torch.compiler.save_cache_artifacts()
    if artifacts is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(artifacts[0])
    os.replace(tmp, path)
    _loaded.add(path)
    return path
