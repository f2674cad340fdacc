"""Out of memory on a real GPU: refused up front when the estimate says so, caught when it happens anyway.

Run on the GPU machine: `python -m pytest -m gpu tests/gpu/test_gpu_oom.py`.
"""

import pytest
import torch

from playground import memory
from playground.config import RunConfig
from playground.engine import run
from playground.loader import MODELS, load_config

pytestmark = pytest.mark.gpu
SMALL = dict(device="cuda", dtype="bf16", prompt_tokens=64, new_tokens=8, repeats=1, warmup=0, profile_kernels=False)


def test_a_request_that_cannot_fit_is_refused_with_numbers():
    record = run(RunConfig(model="llama-3.1-8b-shape", **{**SMALL, "prompt_tokens": 16384, "batch_size": 256}))
    assert record.status == "invalid" and "needs about" in record.reason and "GB is free" in record.reason
    assert run(RunConfig(model="tiny-random-llama", **SMALL)).status == "ok"


def test_a_real_cuda_oom_is_caught_and_memory_freed():
    """Leave just enough for the estimate (weights + KV cache), not for eager attention's B x H x L x L scores."""
    MODELS.clear()
    config = RunConfig(model="llama-3.2-1b-shape", attn="eager", **{**SMALL, "prompt_tokens": 4096, "batch_size": 8})
    est = memory.estimate(config, load_config(config.model), "cuda", "bf16", 4096, 0, reuse=False)
    free, _ = torch.cuda.mem_get_info()
    filler = torch.empty(free - est.needed_bytes - 2**29, dtype=torch.uint8, device="cuda")
    try:
        record = run(config)
    finally:
        del filler
    assert record.status == "error" and "ran out of memory while" in record.reason, record.reason
    assert torch.cuda.memory_allocated() < 2**30  # the model was unloaded
    assert run(RunConfig(model="tiny-random-llama", **SMALL)).status == "ok"
