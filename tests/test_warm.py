"""A warm start: the compile artifacts one process saves make the next process's compile a cache hit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from playground import warm
from playground.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent


def test_artifacts_are_kept_per_graph_setting_not_per_prompt(monkeypatch, tmp_path):
    monkeypatch.setenv(warm.CACHE_ENV, str(tmp_path))
    base = RunConfig(prompt="a", cache_impl="static", compile="default")
    path = warm.artifact_path(base, "cpu")
    assert path.parent == tmp_path and path.name.startswith(f"{base.model}-transformers-default-")
    assert warm.artifact_path(base.replace(prompt="another prompt", new_tokens=7), "cpu") == path
    assert warm.artifact_path(base.replace(dtype="bf16"), "cpu") != path
    fast = base.replace(backend="fast")
    assert warm.artifact_path(fast.replace(kernels="tuned"), "cpu") != warm.artifact_path(fast, "cpu")
    batch = base.replace(batch_size=4)
    assert warm.artifact_path(batch.replace(length_spread_pct=30), "cpu") != warm.artifact_path(batch, "cpu")
    assert warm.artifact_path(batch.replace(length_spread_pct=30), "cpu") == warm.artifact_path(
        batch.replace(length_spread_pct=60), "cpu")  # padded either way: the same graphs
    assert warm.artifact_path(base, "NVIDIA H200") != path
    assert not warm.load(tmp_path / "missing.bin")


def _warm(tmp_path: Path, inductor_dir: str) -> str:
    """`python -m playground warm` in a fresh process with its own empty inductor cache: only the artifacts carry.

    A crash shows every thread's Python stack (faulthandler) and what the process had printed."""
    env = dict(os.environ, PLAYGROUND_COMPILE_CACHE=str(tmp_path / "artifacts"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / inductor_dir), PYTHONFAULTHANDLER="1")
    result = subprocess.run([sys.executable, "-m", "playground", "warm", "tiny-random-llama", "--compile", "default",
                             "--cache-impl", "static", "--new-tokens", "4"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, f"stdout: {result.stdout[-1000:]}\nstderr: {result.stderr[-4000:]}"
    return result.stdout


def test_a_second_process_compiles_from_the_first_ones_artifacts(tmp_path):
    first = _warm(tmp_path, "inductor-1")
    assert "compile cache miss (artifacts saved)" in first, first
    assert len(list((tmp_path / "artifacts").glob("tiny-random-llama-transformers-default-*.bin"))) == 1
    second = _warm(tmp_path, "inductor-2")
    assert "compile cache hit" in second, second


def test_the_record_says_how_many_saved_steps_loaded_and_why_a_step_was_not_kept(tmp_path, monkeypatch):
    from collections import Counter

    from torch._dynamo.utils import counters

    from playground.engine import _compile_cache_use

    monkeypatch.setitem(counters, "playground", Counter(counters["playground"]))  # this process's counts come back
    monkeypatch.setattr(warm, "not_kept", [])
    monkeypatch.setattr(warm, "save", lambda path: None)  # as if torch had no artifacts to save
    artifacts = tmp_path / "artifacts.bin"
    before = (warm.cache_hits(), warm.compiles(), warm.steps_loaded(), len(warm.not_kept))
    counters["playground"]["precompiled_step_hit"] += 2
    assert _compile_cache_use(artifacts, *before) == "hit (2 saved steps loaded, not traced)"
    before = (warm.cache_hits(), warm.compiles(), warm.steps_loaded(), len(warm.not_kept))
    counters["playground"]["precompiled_step_miss"] += 1
    warm.not_kept.append("prefill: the saved step's guards refuse these inputs")
    assert _compile_cache_use(artifacts, *before) == (
        "miss; traced, not kept: prefill: the saved step's guards refuse these inputs")  # nothing else compiled


def test_inductors_cache_is_kept_in_the_compile_cache_folder_unless_the_user_says_where(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv(warm.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what torch writes there on import
    warm.keep_inductor_cache()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    warm.keep_inductor_cache()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
