"""The bandwidth roofline counts the bytes a decode step reads, not every byte the model holds."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from playground import memory, roofline
from playground.config import RunConfig
from playground.engine import _fill_roofline, run
from playground.loader import MODELS
from playground.presets import PRESETS, preset_config


def meta_model(preset: str):
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(preset_config(PRESETS[preset]), dtype=torch.bfloat16)


def test_untied_input_embedding_counts_one_row():
    model = meta_model("llama-3.1-8b-shape")
    table = model.get_input_embeddings().weight
    every = sum(p.numel() * 2 for p in model.parameters())
    assert roofline.decode_weight_bytes(model) == every - table.numel() * 2 + table.shape[1] * 2


def test_tied_embedding_counts_once_as_the_head():
    model = meta_model("llama-3.2-1b-shape")
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert roofline.decode_weight_bytes(model) == sum(p.numel() * 2 for p in model.parameters())


def test_8b_fast_row_is_about_82_percent_not_88():
    """The fast backend's 8B row (230.2 tok/s, flash-decoding, prompt 512 + 256 new) at a measured 4.2 TB/s."""
    model = meta_model("llama-3.1-8b-shape")
    per_token = memory.kv_cache_bytes(model.config, 1, 1, "bf16")
    step = roofline.step_bytes(roofline.decode_weight_bytes(model), "filled", per_token, 512, 256, 0)
    pct = 100 * 230.2 / roofline.roofline_tok_s(4200, step)
    assert 81 < pct < 84
    everything = sum(p.numel() * 2 for p in model.parameters()) + per_token * (512 + 256)
    assert 100 * 230.2 * everything / 4200e9 > 87  # the old count, all bytes held


@pytest.mark.parametrize("use_cache, cache_impl, backend, attn, kind", [
    (False, "dynamic", "transformers", "sdpa", "none"),
    (True, "dynamic", "transformers", "eager", "filled"),
    (True, "static", "transformers", "sdpa", "allocated"),
    (True, "static", "fast", "sdpa", "allocated"),
    (True, "static", "fast", "flash_attention_2", "filled"),
])
def test_which_part_of_the_cache_a_step_reads(use_cache, cache_impl, backend, attn, kind):
    assert roofline.kv_read(use_cache, cache_impl, backend, attn) == kind


def test_filled_cache_is_read_at_its_mean_length_over_the_decode_steps():
    step = roofline.step_bytes(1000, "filled", 10, prompt_tokens=100, new_tokens=50, kv_allocated_bytes=99_999)
    assert step.kv == 10 * 125 and step.total == 1000 + 1250
    assert roofline.step_bytes(1000, "allocated", 10, 100, 50, 4096).kv == 4096
    assert roofline.step_bytes(1000, "none", 10, 100, 50, 4096).kv == 0


def test_engine_records_what_the_step_reads():
    config = RunConfig(model="tiny-random-llama", device="cpu", prompt_tokens=40, new_tokens=8, repeats=1,
                       warmup=0, profile_kernels=False, cache_impl="static")
    record = run(config)
    assert record.status == "ok" and record.roofline_tok_s is None  # no bandwidth figure on a CPU
    _fill_roofline(record, config, MODELS.latest, 1000.0, int(record.kv_cache_mb * 2**20))
    assert record.roofline_kv_read == "allocated"
    assert record.roofline_kv_mb == pytest.approx(record.kv_cache_mb)
    assert record.roofline_weight_mb * 2**20 == roofline.decode_weight_bytes(MODELS.latest.model)
    assert record.bandwidth_roofline_pct == pytest.approx(
        100 * record.decode_tok_s * (record.roofline_weight_mb + record.roofline_kv_mb) * 2**20 / 1e12)
