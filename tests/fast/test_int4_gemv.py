from __future__ import annotations

import pytest
import torch

from playground.fast import int4_gemv


def test_packing_keeps_every_weight_within_half_a_step():
    torch.manual_seed(0)
    weight = torch.randn(24, 512, dtype=torch.bfloat16)
    words, scales, offsets = int4_gemv.pack(weight)
    assert (words.dtype, words.shape, scales.shape, offsets.shape) == (torch.int32, (24, 64), (24, 4), (24, 4))
    step = scales.float().repeat_interleave(int4_gemv.GROUP, dim=1)
    error = (int4_gemv.dequantize(words, scales, offsets) - weight.float()).abs()
    assert (error <= step / 2 + 1e-6).all()
    assert int4_gemv.packed_bytes(words, scales, offsets) == 24 * 512 // 2 + 2 * 24 * 4 * 2


def test_nibble_j_of_word_i_is_column_8i_plus_j():
    """The kernel reads x in column order against the nibbles in word order; the layout must match."""
    weight = torch.zeros(1, 128)
    weight[0, 9] = 15.0  # word 1, nibble 1: the group's maximum, so q = 15 there and 0 elsewhere
    words, _, _ = int4_gemv.pack(weight)
    assert words[0, 1].item() == 15 << 4 and (words[0, [0, *range(2, 16)]] == 0).all()


def test_a_constant_group_is_exact_and_never_divides_by_zero():
    weight = torch.randn(3, 256)
    weight[1] = 0.0  # an all-zero padding row
    weight[2, :128] = 0.25
    restored = int4_gemv.dequantize(*int4_gemv.pack(weight))
    assert not restored.isnan().any()
    assert torch.equal(restored[1], weight[1]) and torch.equal(restored[2, :128], weight[2, :128])


def test_in_features_off_the_group_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="divisible by the group"):
        int4_gemv.pack(torch.randn(4, 200))


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols, block_n, block_k", [(40, 256, 16, 256), (1000, 2048, 32, 512), (6144, 4096, 8, 1024)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_kernel_multiplies_the_packed_weights(rows, cols, block_n, block_k, dtype):
    """Against the same int4 weights dequantized in float32: only the output's rounding differs."""
    torch.manual_seed(0)
    packed = int4_gemv.pack(torch.randn(rows, cols, device="cuda") * 0.02)
    x = torch.randn(1, cols, device="cuda", dtype=dtype)
    reference = x.float() @ int4_gemv.dequantize(*packed).T
    out = int4_gemv.gemv(x, *packed, block_n=block_n, block_k=block_k)
    assert out.dtype == dtype and out.shape == (1, rows)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    assert (out.float() - reference).abs().max() <= tolerance * reference.abs().max()


def test_the_benchmark_tries_only_block_shapes_the_kernel_takes():
    from benchmarks import int4_gemv as benchmark

    assert all(block_k % int4_gemv.GROUP == 0 for block_k in benchmark.BLOCK_K)
    with pytest.raises(ValueError, match="multiple of the group"):
        int4_gemv.gemv(torch.zeros(1, 256), *int4_gemv.pack(torch.zeros(4, 256)), block_k=64)
