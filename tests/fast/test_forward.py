"""The fast decoder's token choice: the two-stage argmax must pick exactly what `torch.argmax` picks."""

from __future__ import annotations

import pytest
import torch

from playground.fast.forward import argmax_rows


@pytest.mark.parametrize("vocab", [128256, 151936, 32000, 1000, 97])
def test_two_stage_argmax_equals_argmax_including_ties(vocab):
    generator = torch.Generator().manual_seed(vocab)
    # few distinct values, so most rows have the maximum in several chunks and within a chunk
    x = torch.randint(0, 4, (3, vocab), generator=generator).float()
    x[1] = torch.randn(vocab, generator=generator)
    assert torch.equal(argmax_rows(x), torch.argmax(x, dim=-1))


def test_two_stage_argmax_finds_a_maximum_in_the_last_chunk():
    x = torch.zeros(2, 128256)
    x[0, -1] = 1.0
    x[1, 300] = -1.0
    assert argmax_rows(x).tolist() == [128255, 0]
