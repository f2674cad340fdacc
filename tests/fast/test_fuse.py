"""Fusing q/k/v and gate/up in place changes how weights are stored, never what the model computes."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from playground.fast.fuse import fusable_reason, fused_layers
from playground.fast.state import allocate

SHAPE = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2)


def build(model_type: str):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **SHAPE), attn_implementation="sdpa")


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "mistral"])  # qwen2: q/k/v with biases
def test_fusing_keeps_every_value_and_output_and_adds_no_memory(model_type):
    model = build(model_type)
    ids = torch.randint(0, 128, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before_logits = model(ids).logits
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bytes_before = sum(p.numel() * p.element_size() for p in model.parameters())
    layers = fused_layers(model)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, before_logits)
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == bytes_before
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    qkv, gate_up = layers[0].qkv, layers[0].gate_up
    # the parameters are views into the fused tensors: no second copy of any weight
    assert attn.q_proj.weight.data_ptr() == qkv.weight.data_ptr()
    assert attn.v_proj.weight.data_ptr() == qkv.weight[qkv.splits[0] + qkv.splits[1]:].data_ptr()
    assert mlp.up_proj.weight.data_ptr() == gate_up.weight[gate_up.splits[0]:].data_ptr()
    assert (qkv.bias is not None) == (model_type == "qwen2")
    assert fused_layers(model) is layers  # once per model


def test_mixed_biases_are_refused_with_a_reason():
    model = build("llama")
    model.model.layers[1].self_attn.k_proj.bias = torch.nn.Parameter(torch.zeros(32))
    assert "only some have a bias" in fusable_reason(model)
    assert fusable_reason(build("qwen2")) is None


def test_fusing_under_inference_mode_still_gives_the_model_ordinary_tensors():
    """The engine calls the fast backend inside inference mode; the model must stay usable outside it."""
    model = build("llama")
    with torch.inference_mode():
        fused_layers(model)
    weight = model.model.layers[0].self_attn.q_proj.weight
    assert not weight.is_inference() and not fused_layers(model)[0].qkv.weight.is_inference()


def test_a_fused_matrix_quantizes_to_the_values_of_its_parts_quantized_alone():
    """Per-row weight-only scales do not mix rows: fusing before quantizing changes no quantized value."""
    pytest.importorskip("torchao")
    from playground import quantization
    from playground.fast.fuse import quantize_fused

    fused_model, plain_model = build("llama"), build("llama")
    quantize_fused(fused_model, lambda module: quantization.quantize(module, "int8"))
    quantization.quantize(fused_model, "int8")
    quantization.quantize(plain_model, "int8")
    qkv = fused_layers(fused_model)[0].qkv
    attn = fused_model.model.layers[0].self_attn
    assert quantization.is_quantized(qkv.weight) and attn.k_proj.weight.qdata.data_ptr() == qkv.weight.qdata[
        qkv.splits[0]:].data_ptr()  # a row view of the fused quantized matrix, not a copy
    for name in ("q_proj", "k_proj", "v_proj"):
        fused_w = getattr(attn, name).weight.dequantize()
        plain_w = getattr(plain_model.model.layers[0].self_attn, name).weight.dequantize()
        assert torch.equal(fused_w, plain_w), name
    ids = torch.randint(0, 128, (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(fused_model(ids).logits, plain_model(ids).logits)
