"""Greedy ids on CPU: every backend and every attention path it takes gives the ids recorded before backends
moved behind one interface (the shipped model, so the ids vary; a random one repeats a single token)."""

import pytest

from playground.attention import taken_by
from playground.config import RunConfig
from playground.engine import run

BASE = dict(model="stdlib-llama-tiny", device="cpu", prompt="Once upon a time", new_tokens=24, repeats=1, warmup=0,
            profile_kernels=False)
RECORDED = [14, 264, 694, 292, 260, 1610, 298, 264, 694, 16, 201, 436, 694, 292, 260, 1610, 14, 309, 264, 694, 292,
            260, 1610, 298]
CPU_PATHS = ("eager", "sdpa", "sdpa:flash", "sdpa:math")
CACHES = {"dynamic": dict(), "static": dict(cache_impl="static"), "none": dict(use_cache=False)}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("attn", CPU_PATHS)
def test_transformers_gives_the_recorded_ids(attn, cache):
    record = run(RunConfig(backend="transformers", attn=attn, **CACHES[cache], **BASE))
    assert record.status == "ok", record.reason
    assert record.output_ids == RECORDED


@pytest.mark.parametrize("attn", [a for a in CPU_PATHS if a in taken_by("fast")])
def test_fast_gives_the_recorded_ids(attn):
    record = run(RunConfig(backend="fast", attn=attn, cache_impl="static", **BASE))
    assert record.status == "ok", record.reason
    assert record.output_ids == RECORDED and record.compiled == ""
