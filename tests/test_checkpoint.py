"""A random-weight preset written as a checkpoint: complete, loadable, and the same files every time."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from playground.checkpoint import INDEX, random_checkpoint


def test_a_preset_written_twice_gives_the_same_weights_and_loads_with_every_tensor(monkeypatch, tmp_path):
    written = []
    for where in ("a", "b"):
        monkeypatch.setenv("PLAYGROUND_CHECKPOINTS", str(tmp_path / where))
        written.append(random_checkpoint("tiny-random-llama", torch.bfloat16))
    shards = [sorted(p.glob("*.safetensors")) for p in written]
    assert shards[0] and [f.read_bytes() for f in shards[0]] == [f.read_bytes() for f in shards[1]]
    model, info = AutoModelForCausalLM.from_pretrained(written[0], output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.dtype == torch.bfloat16 and (written[0] / INDEX).is_file()
    weight = model.model.layers[0].mlp.up_proj.weight.float()
    assert 0.015 < weight.std() < 0.025 and bool((model.model.norm.weight == 1).all())  # initializer_range 0.02
    assert AutoTokenizer.from_pretrained(written[0]).vocab_size > 0
