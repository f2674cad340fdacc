"""Benchmark scripts that print figures (run from the repository root with python -m)."""

import argparse
import json
import os
import subprocess


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


def failure_line(done: subprocess.CompletedProcess) -> str:
    """Why a child benchmark process gave no result: the last line it wrote to stderr (else stdout), else its exit
    code."""
    return ((done.stderr or done.stdout).strip().splitlines() or [f"exit code {done.returncode}"])[-1]


def cold_caches_env(caches: str) -> dict[str, str]:
    """This process's environment with every compile cache a child reads or fills (inductor's, Triton's and the
    playground's own) in `caches`, so the child compiles from nothing."""
    from playground.warm import CACHE_ENV

    return dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
                TRITON_CACHE_DIR=os.path.join(caches, "triton"), **{CACHE_ENV: os.path.join(caches, "artifacts")})


def add_fast_step_arguments(parser: argparse.ArgumentParser, cuda: bool) -> None:
    """The fast step a benchmark runs: model, attention, dtype, compile mode and lengths, defaulting to the 1B shape
    compiled in bf16 on CUDA, and to the tiny preset, eager in fp32, elsewhere (a smoke test)."""
    parser.add_argument("--model", default="llama-3.2-1b-shape" if cuda else "tiny-random-llama")
    parser.add_argument("--attn", default="sdpa",
                        help="the fast backend's attention, as the attention setting takes it (flash_attention_2 needs "
                             "flash-attn)")
    parser.add_argument("--dtype", default="bf16" if cuda else "fp32")
    parser.add_argument("--compile", default="reduce-overhead" if cuda else "off")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
