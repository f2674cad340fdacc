"""The fast decode step compiled ahead of time: the same tokens as eager, and a package a later run loads."""

from __future__ import annotations

import pytest

from playground.config import ConfigError, RunConfig
from playground.engine import run
from playground.fast import aot
from playground.loader import MODELS

BASE = RunConfig(model="stdlib-llama-tiny", prompt="def main():\n    parser = ", new_tokens=16, repeats=1,
                 cache_impl="static", backend="fast", profile_kernels=False)


def test_an_aot_step_keeps_the_eager_tokens_and_a_new_process_loads_its_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_COMPILE_CACHE", str(tmp_path))
    eager = run(BASE)
    compiled = run(BASE.replace(compile="aot"))
    assert (eager.status, compiled.status) == ("ok", "ok"), compiled.reason
    assert compiled.output_ids == eager.output_ids and "AOTInductor" in compiled.compiled
    packages = list((tmp_path / "aot").glob("decode-*.pt2"))
    assert compiled.compile_cache.startswith("miss") and len(packages) == 1
    assert packages[0].stat().st_size < compiled.weights_mb * 1e6 / 4  # the weights stay out of the package
    aot.check_loads(packages[0], "cpu")  # a child process loads it (the guard CUDA loads go through)
    MODELS.clear()  # new weight objects and states, no step in memory: only the package on disk carries over
    again = run(BASE.replace(compile="aot"))
    assert again.compile_cache == "hit" and again.output_ids == eager.output_ids


@pytest.mark.parametrize("changes", [dict(backend="transformers"), dict(spec="draft")])
def test_aot_is_refused_where_nothing_compiles_ahead(changes):
    with pytest.raises(ConfigError, match="aot"):
        RunConfig(prompt="x", cache_impl="static", compile="aot", **changes)


def test_a_package_that_crashes_the_loader_is_an_error_naming_the_crash_not_a_dead_process(monkeypatch, tmp_path,
                                                                                          request):
    request.addfinalizer(aot.toolchain_failure.cache_clear)  # the crashing probe's verdict stays in this test
    package = tmp_path / "decode.pt2"
    package.write_bytes(b"not a package")
    with pytest.raises(RuntimeError, match="exit status 1.*a one-layer test package loads, so the failure is this"):
        aot.check_loads(package, "cpu")
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    monkeypatch.setattr(aot, "LOAD_PROBE", crash)  # the playground's ops crash the loader; torch alone loads
    aot.toolchain_failure.cache_clear()  # the one-layer package's verdict is kept per process
    with pytest.raises(RuntimeError, match="killed by SIGSEGV.*loads with torch alone but fails once the "
                                           "playground's custom ops are imported.*reduce-overhead"):
        aot.check_loads(package, "cpu")
    monkeypatch.setattr(aot, "BARE_PROBE", crash)  # torch alone crashes too
    aot.toolchain_failure.cache_clear()
    with pytest.raises(RuntimeError, match="killed by SIGSEGV.*one-layer test package fails too.*runs no "
                                           "ahead-of-time package.*reduce-overhead"):
        aot.check_loads(package, "cpu")
