"""The fast decoder's pieces: the two-stage argmax picks exactly what `torch.argmax` picks, and masked attention
with folded grouped-query heads computes what attention over repeated k/v computes."""

from __future__ import annotations

import pytest
import torch

from playground.fast.forward import argmax_rows, masked_attention, written_attention


def rows_with_ties_and_specials(vocab: int, generator: torch.Generator) -> torch.Tensor:
    """Rows that tell a first-maximum argmax from any other: many ties, random values, NaN, all -inf."""
    x = torch.randint(0, 4, (5, vocab), generator=generator).float()  # the maximum in many chunks and within one
    x[1] = torch.randn(vocab, generator=generator)
    x[2, vocab // 3] = float("nan")  # argmax treats NaN as the maximum
    x[3] = float("-inf")  # no finite logit: the first index
    x[4, -1] = 4.0  # the only maximum in the last chunk
    return x


# 128256 (Llama 3) and 151936 (Qwen2) take chunks of 256 and 128; 32 * 4001 the smallest chunk; 97 one stage
@pytest.mark.parametrize("vocab", [128256, 151936, 32 * 4001, 97])
def test_two_stage_argmax_equals_argmax(vocab):
    x = rows_with_ties_and_specials(vocab, torch.Generator().manual_seed(vocab))
    assert torch.equal(argmax_rows(x), torch.argmax(x, dim=-1))
    assert torch.equal(argmax_rows(x.bfloat16()), torch.argmax(x.bfloat16(), dim=-1))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the GPU machine)")
def test_compiled_two_stage_argmax_equals_argmax_on_cuda():
    """The decode step runs it compiled: inductor's reductions must keep the first maximum too."""
    x = rows_with_ties_and_specials(128256, torch.Generator().manual_seed(0)).cuda()
    compiled = torch.compile(argmax_rows, fullgraph=True)
    assert torch.equal(compiled(x), torch.argmax(x, dim=-1))


@pytest.mark.parametrize("batch, mask_rows, n", [(3, 3, 5), (2, 1, 4), (2, 2, 1)])
def test_folded_and_written_attention_equal_sdpa_over_repeated_keys(batch, mask_rows, n):
    g = torch.Generator().manual_seed(n)
    heads, kv_heads, length, d = 8, 2, 11, 16
    q = torch.randn(batch, heads, n, d, generator=g)
    keys, values = (torch.randn(batch, kv_heads, length, d, generator=g) for _ in range(2))
    visible = torch.rand(mask_rows, 1, n, length, generator=g) > 0.4
    visible[..., 0] = True  # every query row sees something
    repeated = [t.repeat_interleave(heads // kv_heads, dim=1) for t in (keys, values)]
    expected = torch.nn.functional.scaled_dot_product_attention(q, *repeated, attn_mask=visible, scale=0.25)
    torch.testing.assert_close(masked_attention(q, keys, values, visible, 0.25), expected)
    torch.testing.assert_close(written_attention(q, keys, values, visible, 0.25), expected)
