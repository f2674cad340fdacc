"""The fast decoder's custom ops where it uses them, checked on CPU by tracing with fake tensors.

flash-attn's kernels need a GPU (tests/fast/test_fast_gpu.py compares them with SDPA there and
checks their fake kernels against the real ones); here, without running them: a model loaded with
flash_attention_2 has its prefill and decode step call them, not SDPA, and the MLP activation is
materialized before the down projection in every layer.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.library import _scoped_library
from transformers import AutoConfig, AutoModelForCausalLM

from playground.fast.ops import materialize
from playground.fast.forward import decode_one_token, forward_chunk, prefill
from playground.fast.fuse import fused_layers
from playground.fast.state import allocate


def traced(fn) -> torch.fx.Graph:
    """The ops a call of `fn` would run, traced with fake tensors (nothing executes)."""
    with torch.inference_mode():
        return make_fx(fn, tracing_mode="fake", _allow_non_fake_inputs=True)().graph


def attention_ops(fn) -> set[str]:
    return {str(n.target) for n in traced(fn).nodes
            if n.op == "call_function" and ("fa2" in str(n.target) or "attention" in str(n.target))}


def small_llama():
    config = AutoConfig.for_model("llama", vocab_size=128, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    fused_layers(model)
    return model


@pytest.mark.parametrize("loaded_with, expected", [
    ("flash_attention_2", {"playground_fast.fa2_prefill.default", "playground_fast.fa2_decode.default"}),
    ("sdpa", {"aten._scaled_dot_product_flash_attention_for_cpu.default"}),
])
def test_the_decoder_calls_the_attention_the_model_was_loaded_with(loaded_with, expected):
    model = small_llama()
    # flash-attn cannot be loaded on CPU; the attribute is what loading with it sets
    model.config._attn_implementation_internal = loaded_with
    state = allocate(model, 1, 64)
    ids = torch.tensor([[5, 6, 7]])
    seen = attention_ops(lambda: prefill(model, state, ids, False))
    seen |= attention_ops(lambda: decode_one_token(model, state, False))
    assert seen == expected


def test_every_down_projection_reads_a_materialized_activation():
    model = small_llama()
    state = allocate(model, 1, 64)
    graph = traced(lambda: decode_one_token(model, state, False))
    copies = [n for n in graph.nodes if n.target is torch.ops.playground_fast.materialize.default]
    assert len(copies) == model.config.num_hidden_layers
    assert all(copy.args[0].target is torch.ops.aten.mul.Tensor for copy in copies)  # act(gate) * up


def test_materialize_is_an_exact_copy():
    x = torch.randn(3, 5)
    y = materialize(x)
    assert torch.equal(x, y) and y.data_ptr() != x.data_ptr()


def prefill_as_documented(q, k, v, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True).transpose(1, 2)


def decode_as_documented(q, keys, values, cache_seqlens, scale):
    """flash_attn_with_kvcache as its docstring puts it: the first `cache_seqlens` positions of the cache are filled,
    and a causal mask is aligned to their end, so the n queries sit at its last n positions."""
    filled, n = int(cache_seqlens[0]), q.shape[2]
    positions = filled - n + torch.arange(n)
    visible = torch.arange(filled)[None, :] <= positions[:, None]
    return F.scaled_dot_product_attention(q, keys[:, :, :filled], values[:, :, :filled], attn_mask=visible,
                                          scale=scale, enable_gqa=True).transpose(1, 2).contiguous()


def test_the_flash_path_hands_the_kernels_what_makes_them_compute_what_sdpa_computes():
    """With flash-attn's kernels replaced by their documented semantics, the flash path's prefill, decode steps and
    a verify chunk give the SDPA path's logits and cache: the fill counts and layouts it passes are right. (The
    kernels themselves: tests/fast/test_fast_gpu.py.)"""
    model, ids, runs = small_llama(), torch.tensor([[5, 6, 7, 9, 11]]), {}
    with _scoped_library("playground_fast", "IMPL") as lib, torch.inference_mode():
        lib.impl("fa2_prefill", prefill_as_documented, "CPU")
        lib.impl("fa2_decode", decode_as_documented, "CPU")
        for attn in ("sdpa", "flash_attention_2"):
            model.config._attn_implementation_internal = attn
            state = allocate(model, 1, 64)
            logits = [prefill(model, state, ids, False)[1]] + [decode_one_token(model, state, False)[1]
                                                               for _ in range(4)]
            runs[attn] = (logits + [forward_chunk(model, state, 3)], state)
    (sdpa, sdpa_state), (flash, flash_state) = runs["sdpa"], runs["flash_attention_2"]
    for expected, got in zip(sdpa, flash):
        torch.testing.assert_close(got, expected)
    assert torch.equal(flash_state.tokens, sdpa_state.tokens)
    for expected, got in zip(sdpa_state.layers, flash_state.layers):
        torch.testing.assert_close(got.keys, expected.keys)
        torch.testing.assert_close(got.values, expected.values)
