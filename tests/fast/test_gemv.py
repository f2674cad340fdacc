from __future__ import annotations

import pytest
import torch

from playground.fast import gemv


@pytest.mark.parametrize("bits", gemv.BITS)
def test_packing_keeps_every_weight_within_half_a_step(bits):
    torch.manual_seed(0)
    weight = torch.randn(24, 512, dtype=torch.bfloat16)
    words, scales, offsets = gemv.pack(weight, bits)
    assert (words.dtype, words.shape, scales.shape, offsets.shape) == (torch.int32, (24, 512 * bits // 32), (24, 4), (24, 4))
    assert gemv.bits_of(words, scales) == bits
    step = scales.float().repeat_interleave(gemv.GROUP, dim=1)
    assert (step <= 2 * 4.5 / (2 ** bits - 1)).all()  # a group of normal values spans about 9 (bf16: a bit more)
    error = (gemv.dequantize(words, scales, offsets) - weight.float()).abs()
    assert (error <= step / 2 + 1e-6).all()
    assert gemv.packed_bytes(words, scales, offsets) == 24 * 512 * bits // 8 + 2 * 24 * 4 * 2


@pytest.mark.parametrize("bits", gemv.BITS)
def test_value_j_of_word_i_is_column_i_times_the_values_a_word_holds_plus_j(bits):
    """The kernel reads x in column order against the values in word order; the layout must match."""
    weight, per_word, top = torch.zeros(1, 128), 32 // bits, 2 ** bits - 1
    weight[0, per_word + 1] = 1.0  # word 1, value 1: the group's maximum, so q = top there and 0 elsewhere
    words, _, _ = gemv.pack(weight, bits)
    expected = torch.zeros_like(words)
    expected[0, 1] = top << bits
    assert torch.equal(words, expected)


def test_a_constant_group_is_exact_and_never_divides_by_zero():
    weight = torch.randn(3, 256)
    weight[1] = 0.0  # an all-zero padding row
    weight[2, :128] = 0.25
    restored = gemv.dequantize(*gemv.pack(weight))
    assert not restored.isnan().any()
    assert torch.equal(restored[1], weight[1]) and torch.equal(restored[2, :128], weight[2, :128])


def test_in_features_off_the_group_and_other_widths_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="int8 packing needs in_features divisible by the group"):
        gemv.pack(torch.randn(4, 200), 8)
    with pytest.raises(ValueError, match="4 or 8 bits a weight, not 3"):
        gemv.pack(torch.randn(4, 256), 3)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols, config", [(40, 256, (16, 256, 4)), (1000, 2048, (32, 512, 8)),
                                                (6144, 4096, (8, 1024, 4)), (300, 3584, (16, 1024, 4)), (7, 128, (8, 512, 4)),
                                                (300, 3584, None)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bits", gemv.BITS)
def test_the_kernel_multiplies_the_packed_weights(rows, cols, config, dtype, bits):
    """Against the same packed weights dequantized in float32: only the output's rounding differs, with blocks
    that leave rows and columns over (3584 is no multiple of 1024) and with the autotuner's choice (None)."""
    torch.manual_seed(0)
    packed = gemv.pack(torch.randn(rows, cols, device="cuda") * 0.02, bits)
    x = torch.randn(1, cols, device="cuda", dtype=dtype)
    reference = x.float() @ gemv.dequantize(*packed).T
    out = gemv.gemv(x, *packed, config)
    assert out.dtype == dtype and out.shape == (1, rows)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    assert (out.float() - reference).abs().max() <= tolerance * reference.abs().max()


@pytest.mark.parametrize("cols, config, reason", [(256, (16, 64, 4), "a multiple of the group"),
                                                 (512, (16, 384, 4), "powers of two"),
                                                 (128, None, "x has 128 values for a weight of 256 in_features")])
def test_shapes_the_kernel_cannot_take_are_refused_before_any_kernel_compiles(cols, config, reason):
    with pytest.raises(ValueError, match=reason):
        gemv.gemv(torch.zeros(1, cols), *gemv.pack(torch.zeros(4, max(cols, 256))), config)


@pytest.mark.parametrize("setting", ["int4-gemv", "int8-gemv"])
def test_the_setting_quantizes_the_fused_projections_and_the_head_and_decodes_what_the_dequantized_model_does(setting):
    """The model's q/k/v and gate/up are fused first, so their parts are row slices of one packed matrix; one
    row (decode) goes through the GEMV op, many rows through the dequantized weights: both give the logits of
    the same model with the packed weights written back as floats."""
    from playground import quantization
    from playground.fast.gemv_weights import GemvTensor
    from playground.loader import ModelCache

    model = ModelCache().get("tiny-random-llama", "cpu", "fp32", "sdpa", quant=setting)[0].model
    layer = model.model.layers[0]
    assert isinstance(layer.self_attn.k_proj.weight, GemvTensor) and isinstance(model.lm_head.weight, GemvTensor)
    # the down projections' 688 inputs are no multiple of the group of 128: they keep their floats, counted
    assert quantization.quantized_weights(model) == "GemvTensor: 25 of 29 linear weights"
    assert not quantization.is_quantized(layer.mlp.down_proj.weight)
    fused = model.__dict__["_playground_fused"][0].qkv.weight
    assert layer.self_attn.k_proj.weight.words.untyped_storage().data_ptr() == fused.words.untyped_storage().data_ptr()
    assert quantization.tensor_bytes(fused) == sum(quantization.tensor_bytes(getattr(layer.self_attn, f"{p}_proj").weight)
                                                   for p in "qkv")

    calls = []

    def counted(*args):
        calls.append(args[0].shape)
        return real(*args)

    real = gemv.mv
    floats = ModelCache().get("tiny-random-llama", "cpu", "fp32", "sdpa")[0].model
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(getattr(module, "weight", None), GemvTensor):
                floats.get_submodule(name).weight = torch.nn.Parameter(module.weight.dequantize())
        for ids, through_op in (([[5]], True), ([[5, 6, 7, 8]], False)):
            calls.clear()
            ids = torch.tensor(ids)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(gemv, "mv", counted)
                logits = model(ids).logits
            assert bool(calls) == through_op
            assert torch.allclose(logits, floats(ids).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("bits", gemv.BITS)
def test_only_decode_must_show_the_kernel_of_the_settings_width(bits):
    """One op runs both widths; its Triton kernel is named for the width, and that name is the proof."""
    from playground.kernels import PhaseKernels, matmul_families, quant_fallback

    family = f"int{bits}-mm"
    assert matmul_families(["packed_gemv::mv", f"int{bits}_gemv"])[1] == [family]
    packed = PhaseKernels(matmuls=[f"int{bits}_gemv"], quant_families=[family])
    other = PhaseKernels(matmuls=[f"int{12 - bits}_gemv"], quant_families=[f"int{12 - bits}-mm"])
    dequantized = PhaseKernels(matmuls=["aten::mm"], quant_families=[])
    setting = f"int{bits}-gemv"
    assert quant_fallback(setting, {"prefill": dequantized, "decode": packed}) is None
    assert f"no {family} kernel ran in decode" in quant_fallback(setting, {"prefill": dequantized, "decode": dequantized})
    assert f"no {family} kernel ran in decode" in quant_fallback(setting, {"prefill": dequantized, "decode": other})


@pytest.mark.gpu
@pytest.mark.parametrize("bits", gemv.BITS)
def test_a_compiled_fast_step_runs_the_gemv_in_decode(bits):
    """The setting end to end: the fast backend's compiled, captured step calls the op, and the proof sees it."""
    from playground.config import RunConfig
    from playground.engine import run

    record = run(RunConfig(model="qwen2.5-0.5b-shape", backend="fast", cache_impl="static", compile="reduce-overhead",
                           dtype="bf16", quant=f"int{bits}-gemv", prompt_tokens=16, new_tokens=8, repeats=1))
    assert record.status == "ok", record.reason
    assert record.quant_effective == f"int{bits}-gemv" and record.fallback is None, record.fallback
    assert any(f"int{bits}_gemv" in name for name in record.matmul_kernels["decode"]), record.matmul_kernels


def test_a_head_the_format_leaves_in_float_stays_tied():
    """A hidden size off the group keeps the head's floats, so a copy would only add memory: the tie stays."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from playground import quantization

    config = LlamaConfig(hidden_size=192, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=512, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    quantization.quantize(model, "int4-gemv")
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.config.tie_word_embeddings
    assert model.all_tied_weights_keys == {"lm_head.weight": "model.embed_tokens.weight"}
    assert quantization.is_quantized(model.model.layers[0].mlp.down_proj.weight)  # its 256 inputs fit the group


def test_a_compile_cache_keys_the_weight_by_its_metadata_alone():
    """torch's default key for a subclass pickles its inner tensors' metadata, which fails once a compiled prompt
    step makes their widths symbolic (that step was then never cached): the key is the metadata, as a string."""
    from playground.fast.gemv_weights import GemvTensor

    a, b = (GemvTensor.from_float(torch.randn(8, 256), 4) for _ in range(2))
    wider, int8 = GemvTensor.from_float(torch.randn(8, 384), 4), GemvTensor.from_float(torch.randn(8, 256), 8)
    assert a._stable_hash_for_caching() == b._stable_hash_for_caching()
    assert len({a._stable_hash_for_caching(), wider._stable_hash_for_caching(), int8._stable_hash_for_caching()}) == 3
