"""The static state's rotary tables: flash-attn's decode kernel is given only their first half."""

from types import SimpleNamespace

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from playground.fast.state import first_half, rotary_table
from playground.fast.support import ROPE_TYPES
from playground.presets import PRESETS, preset_config


@pytest.mark.parametrize("preset", ["tiny-random-llama", "llama-3.2-1b-shape"])
def test_every_rope_type_the_fast_backend_runs_builds_a_table_of_two_equal_halves(preset):
    """The half is all the kernel reads, so the whole table must be it twice (llama3's scaling included)."""
    config = preset_config(PRESETS[preset])
    assert config.rope_parameters["rope_type"] in ROPE_TYPES
    model = SimpleNamespace(model=SimpleNamespace(rotary_emb=LlamaRotaryEmbedding(config)))
    cos, sin = rotary_table(model, 300, torch.float32, torch.device("cpu"))
    for table in (cos, sin):
        assert torch.equal(torch.cat([first_half(table)] * 2, dim=-1), table)
        assert first_half(table).is_contiguous()


def test_the_presets_above_cover_every_rope_type_the_fast_backend_runs():
    assert {preset_config(PRESETS[p]).rope_parameters["rope_type"] for p in ("tiny-random-llama",
                                                                            "llama-3.2-1b-shape")} == set(ROPE_TYPES)
