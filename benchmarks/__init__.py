"""Benchmark scripts that print figures (run from the repository root with python -m)."""

import json
import os


def write_json(path: str | None, payload: dict) -> None:
    """Write `payload` to `path` aside, then swap it in: a benchmark killed mid-write keeps its previous rows.
    Nothing when no path was asked for."""
    if not path:
        return
    with open(f"{path}.tmp", "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(f"{path}.tmp", path)


def spread(values: list[float]) -> float:
    """Largest over smallest, minus one: 0.1 is 10% apart."""
    return max(values) / min(values) - 1


def cold_caches_env(caches: str) -> dict[str, str]:
    """This process's environment with every compile cache a child reads or fills (inductor's, Triton's and the
    playground's own) in `caches`, so the child compiles from nothing."""
    from playground.warm import CACHE_ENV

    return dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
                TRITON_CACHE_DIR=os.path.join(caches, "triton"), **{CACHE_ENV: os.path.join(caches, "artifacts")})
