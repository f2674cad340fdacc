"""Hand-made run records for tests that need numbers but not a model."""

from __future__ import annotations

from playground.record import RunRecord


def make_record(run_id: int = 1, **changes) -> RunRecord:
    base = dict(
        model="tiny-random-llama", attn="sdpa", use_cache=True, cache_impl="dynamic", dtype="auto", compile="off",
        device="auto", batch_size=1, prompt_tokens=8, new_tokens=4, mode="benchmark", repeats=3, warmup=1,
        attn_effective="sdpa", dtype_effective="fp32", device_effective="cpu", random_weights=True,
        ttft_ms=10.0, ttft_ms_std=1.0, decode_tok_s=200.0, decode_tok_s_std=5.0, itl_ms_p50=5.0, itl_ms_p90=6.0,
        itl_ms_p99=7.0, e2e_ms=30.0, tokens_generated=4, peak_mem_mb=500.0, kv_cache_mb=0.1, load_s=1.0,
        attn_kernels={"prefill": ["aten::_scaled_dot_product_flash_attention_for_cpu"], "decode": ["x"]},
        attn_families={"prefill": ["sdpa-flash"], "decode": ["sdpa-flash"]},
        output_ids=[5, 6, 7, 8], output_text="a b c d", itl_ms=[5.0, 6.0, 7.0],
        config={"prompt": "hi", "prompt_tokens": None, "seed": 0, "temperature": 0.0}, env={"torch": "2.x"},
        run_id=run_id,
    )
    base.update(changes)
    return RunRecord(**base)
