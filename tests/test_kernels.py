"""Kernel names seen on real hardware map to the right family, and mismatches are flagged."""

import pytest

from playground.kernels import PhaseKernels, classify, fallback, family_of, top_kernels


@pytest.mark.parametrize(
    "name, family",
    [
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>", "sdpa-flash"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "sdpa-flash"),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "sdpa-efficient"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64", "sdpa-cudnn"),
        ("aten::_scaled_dot_product_attention_math", "sdpa-math"),
        ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>", "flash-attn"),
        ("flash_attn::_flash_attn_forward", "flash-attn"),
        ("triton_tem_fused_flex_attention_0", "flex"),
        ("ampere_bf16_s16816gemm_bf16_128x64", None),
    ],
)
def test_family_of_known_names(name, family):
    assert family_of(name) == family


def test_eager_is_recognised_by_softmax_without_sdpa():
    seen = classify(["aten::matmul", "aten::softmax", "aten::_softmax", "aten::linear"])
    assert seen.families == ["eager"]
    compiled = classify(["triton_red_fused_mm_t_view_6", "triton_per_fused__softmax__to_copy_bmm_masked_fill_4"])
    assert compiled.families == ["eager"]  # written out and compiled: inductor's kernel is named after the softmax
    assert classify(["triton_red_fused_mm_t_view_6", "triton_poi_fused_add_1"]).families == []


def test_forced_backend_mismatch_is_a_fallback():
    phases = {"prefill": PhaseKernels(["a"], ["sdpa-flash"]), "decode": PhaseKernels(["b"], ["sdpa-math"])}
    assert fallback("sdpa:flash", phases) == "decode: requested sdpa:flash but sdpa-math ran"
    assert fallback("sdpa", phases) is None


def test_flash_attention_2_without_flash_kernels_is_a_fallback():
    phases = {"prefill": PhaseKernels(["x"], ["sdpa-cudnn"]), "decode": PhaseKernels([], [])}
    text = fallback("flash_attention_2", phases)
    assert "prefill: requested flash_attention_2 but sdpa-cudnn ran" in text
    assert "decode: no attention kernel was recognised" in text


def test_top_kernels_sums_repeated_launches_and_ranks_by_time():
    timed = [("gemv", 30.0), ("attn", 12.0), ("gemv", 30.0), ("norm", 2.0), ("attn", 12.0), ("copy", 1.0)]
    assert top_kernels(timed, n=3) == [("gemv", 60.0), ("attn", 24.0), ("norm", 2.0)]
    assert top_kernels([]) == []


def test_flex_attention_running_unfused_is_explained():
    phases = {"prefill": classify(["aten::softmax", "aten::bmm"]), "decode": PhaseKernels(["f"], ["flex"])}
    text = fallback("flex_attention", phases)
    assert text.startswith("prefill: requested flex_attention but eager ran") and "recompile limit" in text
    assert fallback("flex_attention", {"decode": PhaseKernels(["f"], ["flex"])}) is None
