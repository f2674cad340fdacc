"""Every attention path on a real GPU, with the kernels that ran named by the profiler.

Run on the GPU machine: `python -m pytest -m gpu tests/gpu`. Skipped where there is no CUDA.
"""

import pytest

from playground import capabilities
from playground.attention import REGISTRY
from playground.config import ConfigError, RunConfig
from playground.engine import run
from playground.kernels import classify, fallback

pytestmark = pytest.mark.gpu
BASE = dict(model="tiny-random-llama", device="cuda", prompt_tokens=256, new_tokens=16, repeats=1, warmup=1)
PATHS = ["eager", "sdpa", "sdpa:flash", "sdpa:efficient", "sdpa:cudnn", "sdpa:math", "flash_attention_2",
         "flex_attention"]


def runnable(attn, dtype):
    reason = capabilities.attention_unavailable(attn, "cuda", dtype, capabilities.host())
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("attn", PATHS)
def test_path_runs_and_prefill_kernels_match_the_request(attn, dtype, use_cache):
    runnable(attn, dtype)
    record = run(RunConfig(attn=attn, dtype=dtype, use_cache=use_cache, **BASE))
    if attn == "sdpa:efficient" and record.status == "error":
        # torch's efficient kernel takes no grouped-query heads; transformers hands it GQA without a mask
        assert "no efficient SDPA kernel for these inputs" in record.reason
        return
    assert record.status == "ok", record.reason
    assert record.tokens_generated == 16
    assert set(record.attn_families["prefill"]) <= REGISTRY[attn].families, record.attn_kernels
    # where a decode step's GPU time went: real kernels, largest first
    per_step = [us for _, us in record.decode_top_kernels]
    assert per_step and per_step == sorted(per_step, reverse=True) and per_step[-1] > 0
    # decode may legitimately fall back (a mask rules a backend out); then the record must say so
    if not set(record.attn_families["decode"]) <= REGISTRY[attn].families:
        assert record.fallback and "decode" in record.fallback


@pytest.mark.parametrize("attn", ["eager", "sdpa", "sdpa:math", "flash_attention_2", "flex_attention"])
def test_static_cache_with_compile(attn):
    runnable(attn, "bf16")
    config = RunConfig(attn=attn, dtype="bf16", cache_impl="static", compile="reduce-overhead", **BASE)
    record = run(config)
    assert record.status == "ok", record.reason
    assert "torch.compile" in record.compiled and record.compile_s is not None
    plain = run(config.replace(compile="off"))
    assert plain.status == "ok" and plain.compiled == ""


@pytest.mark.parametrize("attn", ["sdpa:flash", "sdpa:cudnn"])
def test_fp32_with_a_flash_sdpa_backend_is_a_clear_refusal(attn):
    record = run(RunConfig(attn=attn, dtype="fp32", **BASE))
    assert record.status == "invalid" and "fp16 or bf16" in record.reason


def test_fp32_with_flash_attention_2_is_refused_before_anything_loads():
    with pytest.raises(ConfigError, match="fp16 or bf16"):
        RunConfig(attn="flash_attention_2", dtype="fp32", **BASE)


def test_a_mismatch_between_request_and_kernels_is_flagged():
    """Real kernel names from an `sdpa:math` run do not satisfy a `flash_attention_2` request."""
    record = run(RunConfig(attn="sdpa:math", dtype="bf16", **BASE))
    assert record.attn_families["prefill"] == ["sdpa-math"]
    phases = {phase: classify(names) for phase, names in record.attn_kernels.items()}
    assert "requested flash_attention_2 but sdpa-math ran" in fallback("flash_attention_2", phases)
