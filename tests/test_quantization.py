"""Weight quantization as a lever: the registry, the refusals with reasons, the real bytes, and int8 on CPU for real."""

import dataclasses
import importlib
import re
import types

import pytest
import torch

from playground import backends, capabilities, engine, kernels, quantization, roofline
from playground.config import SETTINGS, ConfigError, RunConfig
from playground.kernels import PhaseKernels, matmul_families, quant_fallback

torchao = pytest.importorskip("torchao")
PROMPT = "If the file does not exist, the function"
H200 = capabilities.Host(cuda=True, device_name="H200", capability=(9, 0), bf16=True, packages={"torchao": "0.18.0"})
A100 = dataclasses.replace(H200, device_name="A100", capability=(8, 0))


def test_registry_and_setting_agree():
    assert SETTINGS["quant"].choices == quantization.NAMES
    assert SETTINGS["quant"].load and SETTINGS["quant"].side and SETTINGS["quant"].sweep
    families = {family for family, _ in kernels.QUANT_PATTERNS}
    for q in quantization.REGISTRY.values():
        assert set(q.backends) <= set(backends.NAMES)
        assert q.families <= families
        assert bool(q.torchao) == bool(q.families) == (q.bits is not None)
        assert q.torchao == "" or hasattr(importlib.import_module(q.module), q.torchao)


@pytest.mark.parametrize("quant, dtype, takes", [("int4", "fp32", "bf16"), ("int4-gemlite", "bf16", "fp16")])
def test_an_int4_kernel_refuses_other_activations_before_anything_loads(quant, dtype, takes):
    with pytest.raises(ConfigError, match=f"quant={quant} kernels take only {takes}"):
        RunConfig(prompt_tokens=8, quant=quant, dtype=dtype)


@pytest.mark.parametrize("quant, host, reason", [
    ("int4", None, "int4 needs a CUDA GPU"),
    ("int4", dataclasses.replace(H200, packages={"torchao": None}), "torchao not installed: pip install torchao"),
    ("fp8", A100, "fp8 needs compute capability 8.9+, A100 has 8.0"),
    ("int8", dataclasses.replace(H200, packages={"torchao": None}), "torchao not installed: pip install torchao"),
    ("int8-gemlite", None, "int8-gemlite needs a CUDA GPU"),
    ("int8-gemlite", H200, "gemlite not installed: pip install gemlite==0.5.1.post1"),
    ("int8-gemlite", dataclasses.replace(H200, packages={"torchao": "0.18.0", "gemlite": "0.6.0.post2"}),
     "gemlite 0.6.0.post2 is installed, torchao 0.18's gemlite layout takes gemlite 0.5"),
])
def test_host_refusals_name_the_reason(quant, host, reason):
    host = host or capabilities.host()
    device = "cuda" if host.cuda else "cpu"
    with pytest.raises(ConfigError, match=re.escape(f"quant={quant} cannot run here: {reason}")):
        capabilities.check(RunConfig(prompt_tokens=8, quant=quant, device=device, dtype="bf16"), host)


def test_int4_on_the_transformers_backend_is_refused_before_run_with_the_reason():
    """Its row views of the fused int4 matrices stopped on torchao's assertion on an H100; the fast backend, which
    reads the fused matrices whole, runs it (results/h200/2026-12-03-quantization-fast/)."""
    assert quantization.refusal("int4", "transformers") and quantization.refusal("int4", "fast") is None
    assert all(quantization.refusal(q, b) is None for q in quantization.NAMES if q != "int4" for b in backends.NAMES)
    with pytest.raises(ConfigError) as error:
        capabilities.check(RunConfig(prompt_tokens=8, quant="int4", dtype="bf16"), H200)
    assert str(error.value).startswith("quant=int4 does not run on backend=transformers yet: ")
    for words in ("torchao 0.18's tile-packed int4", "tinygemm", "in_features", "hidden size 384", "backend fast"):
        assert words in str(error.value)
    fast = RunConfig(prompt_tokens=8, quant="int4", dtype="bf16", backend="fast", cache_impl="static")
    assert capabilities.check(fast, H200) == ("cuda", "bf16")


def test_int4_refusal_on_cpu_comes_from_the_engine_before_loading():
    record = engine.run(RunConfig(prompt_tokens=8, quant="int4", device="cpu", dtype="bf16", new_tokens=2))
    assert record.status == "invalid" and "int4 needs a CUDA GPU" in record.reason


def test_quantized_bytes_are_the_inner_tensors():
    layer = torch.nn.Sequential(torch.nn.Linear(256, 128, bias=False))
    quantization.quantize(layer, "int8")
    weight = layer[0].weight
    assert quantization.is_quantized(weight)
    assert weight.numel() * weight.element_size() == 256 * 128 * 4  # what the old count would say
    assert quantization.tensor_bytes(weight) == 256 * 128 + 128 * 4 + 128  # int8 data, fp32 scale, int8 zero point


@pytest.mark.parametrize("name, family", [
    ("aten::_weight_int8pack_mm", "int8-mm"),
    ("aten::_weight_int4pack_mm", "int4-mm"),
    ("aten::_scaled_mm", "fp8-mm"),
    ("gemlite::forward_functional", "gemlite-mm"),
    ("gemv_INT_revsplitK_kernel", "gemlite-mm"),
    ("gemm_splitK_INT_kernel", "gemlite-mm"),
    ("aten::mm", None),
])
def test_quantized_matmul_families(name, family):
    assert matmul_families([name, "aten::_to_copy", "aten::add"]) == ([name], [family] if family else [])


def test_attention_kernels_are_not_counted_as_matmuls():
    """flash-attn's kernels are cutlass templates; on the H200 they were listed as the decode step's matmuls."""
    flash = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
             "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >>(flash::Flash_fwd_params)")
    assert matmul_families([flash, "aten::mm"]) == (["aten::mm"], [])


def test_dequantize_path_is_a_fallback_and_none_never_is():
    phases = {"decode": PhaseKernels(matmuls=["aten::mm"])}
    assert "no int8-mm kernel ran in decode (matmuls: aten::mm)" in quant_fallback("int8", phases)
    assert quant_fallback("none", phases) is None
    assert quant_fallback("int8", {"decode": PhaseKernels(matmuls=["x"], quant_families=["int8-mm"])}) is None


@pytest.fixture(scope="module")
def fp32_and_int8():
    base = RunConfig(model="stdlib-llama-tiny", prompt=PROMPT, new_tokens=16, repeats=1, device="cpu")
    return engine.run(base), engine.run(base.replace(quant="int8"))


def test_int8_runs_on_cpu_with_smaller_weights_and_the_same_first_tokens(fp32_and_int8):
    fp32, int8 = fp32_and_int8
    assert (fp32.status, int8.status) == ("ok", "ok"), int8.reason
    assert (int8.quant, int8.quant_effective, fp32.quant_effective) == ("int8", "int8", "none")
    assert int8.quant_weights.startswith("Int8Tensor: ")
    assert int8.weights_mb < 0.5 * fp32.weights_mb  # the embedding table stays fp32
    assert int8.output_ids[:4] == fp32.output_ids[:4]
    assert "int8" in int8.name


def test_int8_on_cpu_is_flagged_as_dequantized(fp32_and_int8):
    fp32, int8 = fp32_and_int8
    assert fp32.fallback is None
    assert "no int8-mm kernel ran in prefill, decode" in int8.fallback
    assert "aten::mm" in int8.matmul_kernels["decode"]


@pytest.mark.parametrize("quant", ["int8", "fp8"])
def test_both_backends_run_the_same_quantized_weights(quant):
    """The fast backend reads q/k/v and gate/up as one quantized matrix each: same values, same greedy ids."""
    base = RunConfig(model="stdlib-llama-tiny", prompt=PROMPT, new_tokens=12, repeats=1, device="cpu",
                     cache_impl="static", quant=quant)
    hf, fast = engine.run(base), engine.run(base.replace(backend="fast"))
    assert (hf.status, fast.status) == ("ok", "ok"), (hf.reason, fast.reason)
    head = "29 of 29" if quantization.REGISTRY[quant].tied_head else "28 of 29"  # its tied head quantized too
    assert fast.quant_weights == hf.quant_weights and fast.quant_weights.endswith(f"{head} linear weights")
    assert fast.output_ids == hf.output_ids


def test_int8_keeps_the_shipped_models_perplexity_and_logits():
    """Measured on CPU: fp32 68.53, int8 68.52; a broken quantization would move it far past 5%."""
    from pathlib import Path

    from playground import quality
    from playground.loader import ModelCache

    texts = quality.heldout_texts(Path(__file__).parent / "models" / "data" / "heldout_sample.jsonl")[:8]
    fp32 = ModelCache().get("stdlib-llama-tiny", "cpu", "fp32", "sdpa")[0]
    int8 = ModelCache().get("stdlib-llama-tiny", "cpu", "fp32", "sdpa", quant="int8")[0]
    assert quality.perplexity(int8.model, int8.tokenizer, texts) < 1.05 * quality.perplexity(
        fp32.model, fp32.tokenizer, texts)
    ids = fp32.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    error = quality.logit_error(quality.logits(int8.model, ids), quality.logits(fp32.model, ids))
    assert 0 < error.relative < 0.05


def test_a_compiled_steps_triton_matmul_is_listed_but_its_name_proves_no_quantization():
    """Seen on the H200: inductor names an int8 projection's kernel as it names the bf16 one."""
    name = "triton_red_fused__to_copy_add_mean_mm_mul_pow_rsqrt_t_view_8"
    assert matmul_families([name, "triton_poi_fused_add_0"]) == ([name], [])
    assert quant_fallback("int8", {"decode": PhaseKernels(matmuls=[name])})


def _triton_kernel(name: str, signature: str) -> str:
    """A kernel as inductor writes it into its output code (torch 2.11), cut to the parts that matter here."""
    return (f"{name} = async_compile.triton('{name}', '''\nimport triton\n\n@triton_heuristics.reduction(\n"
            f"    size_hints={{'x': 4096, 'r0_': 4096}},\n    filename=__file__,\n"
            f"    triton_meta={{'signature': {{{signature}, 'xnumel': 'i32', 'r0_numel': 'i32', "
            f"'XBLOCK': 'constexpr'}}, "
            f"'device': DeviceProperties(type='cuda', index=0, cc=90), 'constants': {{}}}},\n"
            f"    inductor_meta={{'kernel_name': '{name}'}}\n)\n@triton.jit\n"
            f"def {name}(in_ptr0, in_ptr1, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):\n"
            f"    tmp0 = tl.load(in_ptr0 + (r0_1), None)\n''', device_str='cuda')\n")


INT8_MM = "triton_red_fused__to_copy_mm_mul_t_view_3"
DEQUANTIZE = "triton_poi_fused__to_copy_mul_1"
BF16_MM = "triton_red_fused_mm_t_view_2"
OUTPUT_CODE = (_triton_kernel(DEQUANTIZE, "'in_ptr0': '*i8', 'in_ptr1': '*bf16', 'out_ptr0': '*bf16'")
               + _triton_kernel(BF16_MM, "'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'out_ptr0': '*bf16'")
               + _triton_kernel(INT8_MM, "'in_ptr0': '*bf16', 'in_ptr1': '*i8', 'out_ptr0': '*bf16'"))


def test_a_compiled_matmul_that_reads_int8_weights_is_the_quantized_kernel():
    reads = kernels.triton_reads(OUTPUT_CODE)
    assert reads == {DEQUANTIZE: {"*i8", "*bf16"}, BF16_MM: {"*bf16"}, INT8_MM: {"*bf16", "*i8"}}
    assert matmul_families([INT8_MM, "triton_poi_fused_add_0"], reads) == ([INT8_MM], ["int8-mm"])
    # a dequantize kernel feeding a float matmul reads the int8 weights too, but proves nothing
    matmuls, families = matmul_families([DEQUANTIZE, BF16_MM], reads)
    assert (matmuls, families) == ([BF16_MM], [])
    assert quant_fallback("int8", {"decode": PhaseKernels(matmuls=matmuls, quant_families=families)})


def test_the_proof_reads_the_code_inductor_loaded_in_this_process(monkeypatch, tmp_path):
    from torch._inductor.codecache import PyCodeCache

    code = tmp_path / "output_code.py"
    code.write_text(OUTPUT_CODE)
    module = types.ModuleType("output_code")
    module.__file__ = str(code)
    monkeypatch.setattr(PyCodeCache, "modules", [module, types.ModuleType("no_file")])
    assert kernels.compiled_kernel_reads()[INT8_MM] == {"*bf16", "*i8"}


def test_a_head_tied_to_the_embeddings_is_left_as_it_is():
    """Quantizing it would add a copy beside the float table, and fp8 turns its zero padding row into NaN."""
    from playground.loader import ModelCache

    lm = ModelCache().get("tiny-random-llama", "cpu", "fp32", "sdpa", quant="fp8")[0]
    model = lm.model
    assert model.lm_head.weight is model.model.embed_tokens.weight and not quantization.is_quantized(
        model.lm_head.weight)
    assert quantization.is_quantized(model.model.layers[0].mlp.down_proj.weight)
    assert not torch.isnan(model(torch.tensor([[5, 6, 7]])).logits).any()


def test_int8_gives_a_tied_head_a_quantized_copy_so_a_step_reads_fewer_bytes():
    """The step reads the head whole every token; the float table stays for the lookups (one row a token)."""
    from playground.loader import ModelCache

    cache = ModelCache()
    plain = cache.get("tiny-random-llama", "cpu", "fp32", "sdpa")[0].model
    model = ModelCache().get("tiny-random-llama", "cpu", "fp32", "sdpa", quant="int8")[0].model
    table = model.model.embed_tokens.weight
    assert model.lm_head.weight is not table and not model.config.tie_word_embeddings
    assert "lm_head.weight" not in model.all_tied_weights_keys  # so transformers' tie_weights() keeps the copy
    model.tie_weights()
    assert quantization.is_quantized(model.lm_head.weight)
    assert quantization.is_quantized(model.lm_head.weight) and not quantization.is_quantized(table)
    assert torch.equal(table, plain.model.embed_tokens.weight)
    ids = torch.tensor([[5, 6, 7, 8]])
    logits, reference = model(ids).logits, plain(ids).logits
    assert not torch.isnan(logits).any()
    assert (logits - reference).abs().max() < 0.05 * reference.abs().max()
    assert roofline.decode_weight_bytes(model) < roofline.decode_weight_bytes(plain) / 3


def test_a_head_the_format_leaves_in_float_stays_tied(monkeypatch):
    """A format that skips a shape it does not take leaves the head's copy in float, which would only add memory:
    the head shares the table again, and transformers' record of the tie is back."""
    import torchao.quantization
    from transformers import LlamaConfig, LlamaForCausalLM

    real = torchao.quantization.quantize_

    def skipping_the_head(model, config, filter_fn):
        real(model, config, filter_fn=lambda m, fqn: fqn != "lm_head" and filter_fn(m, fqn))

    monkeypatch.setattr(torchao.quantization, "quantize_", skipping_the_head)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    quantization.quantize(model, "int8")
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.config.tie_word_embeddings
    assert model.all_tied_weights_keys == {"lm_head.weight": "model.embed_tokens.weight"}
    assert quantization.is_quantized(model.model.layers[0].mlp.down_proj.weight)


def _tinygemm_stand_ins(monkeypatch):
    """torch's tinygemm pack and matmul are CUDA kernels: on CPU, stand-ins of their shapes run torchao's own int4
    code around them (its quantize, its row slice, its matmul's checks). The matmul checks that the scales it is
    handed are contiguous and cover the rows of the weight it multiplies, as the CUDA kernel reads them."""
    import torchao.quantization.quantize_.workflows.int4.int4_tile_packed_to_4d_tensor  # noqa: F401 (before the patch)
    import transformers.models.llama.modeling_llama  # noqa: F401 (imported before the capability is faked)

    def pack(weight, inner_k_tiles):
        rows, half_k = weight.shape
        return torch.zeros(rows // 8, half_k * 2 // (inner_k_tiles * 16), 32, inner_k_tiles // 2, dtype=torch.int32)

    def matmul(x, packed, group_size, scale_and_zero):
        assert scale_and_zero.is_contiguous() and scale_and_zero.shape == (x.shape[-1] // group_size,
                                                                           packed.shape[0] * 8, 2)
        return torch.zeros(x.shape[0], packed.shape[0] * 8, dtype=x.dtype)

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.ops.aten, "_convert_weight_to_int4pack", pack)
    monkeypatch.setattr(torch.ops.aten, "_weight_int4pack_mm", matmul)


@pytest.fixture
def tiny_bf16():
    from playground.loader import ModelCache

    return ModelCache().get("stdlib-llama-tiny", "cpu", "bf16", "sdpa")[0].model


def test_int4_parts_of_a_fused_projection_hold_contiguous_scales(tiny_bf16, monkeypatch):
    """On the H100, quant=int4 on the transformers backend failed with torchao's "Expected scale_and_zero to be
    contiguous": q_proj is a row view of the fused q/k/v, and torchao's row slice of its (groups, rows, 2) scales
    is strided. Each part now holds a contiguous copy of its scales, and shares the packed weights."""
    from playground import loader
    from playground.fast import fuse

    _tinygemm_stand_ins(monkeypatch)
    loader._quantize(tiny_bf16, "int4", "stdlib-llama-tiny")
    assert quantization.quantized_weights(tiny_bf16) == "Int4TilePackedTo4dTensor: 29 of 29 linear weights"
    fused = fuse.fused_layers(tiny_bf16)[0].qkv.weight
    q, k = tiny_bf16.model.layers[0].self_attn.q_proj.weight, tiny_bf16.model.layers[0].self_attn.k_proj.weight
    assert q.scale_and_zero.is_contiguous() and k.scale_and_zero.is_contiguous()
    assert torch.equal(k.scale_and_zero, fused.scale_and_zero[:, 384:768])
    assert k.qdata.data_ptr() == fused.qdata[48:96].data_ptr()  # the packed weights stay one copy
    assert tiny_bf16(torch.tensor([[5, 6, 7]])).logits.shape == (1, 3, 4096)  # the transformers backend's forward


def test_torchaos_assertion_on_a_first_matmul_is_a_load_error_naming_the_setting(tiny_bf16, monkeypatch):
    from playground import loader

    _tinygemm_stand_ins(monkeypatch)
    monkeypatch.setitem(quantization.REGISTRY, "int4", dataclasses.replace(quantization.REGISTRY["int4"], contiguous=()))
    with pytest.raises(loader.LoadError) as error:
        loader._quantize(tiny_bf16, "int4", "stdlib-llama-tiny")
    assert str(error.value) == (
        f"quant=int4 failed in torchao {torchao.__version__} while running the first matmul of q_proj of layer 0 "
        "(384x384); choose another quant (int8, fp8, int8-gemlite, int4-gemlite) or quant=none. "
        "AssertionError: Expected scale_and_zero to be contiguous")
    assert isinstance(error.value.__cause__.__cause__, AssertionError)


def test_a_failure_while_quantizing_reaches_the_record_naming_the_setting(monkeypatch):
    import torchao.quantization

    def failing(*_args, **_kwargs):
        raise AssertionError("Expected the weight to be something else")

    monkeypatch.setattr(torchao.quantization, "quantize_", failing)
    record = engine.run(RunConfig(model="tiny-random-llama", prompt_tokens=8, new_tokens=2, repeats=1, device="cpu",
                                  quant="int8"))
    assert record.status == "error"
    assert record.reason.startswith(f"quant=int8 failed in torchao {torchao.__version__} while quantizing "
                                    "tiny-random-llama's weights; choose another quant")
    assert record.reason.endswith("AssertionError: Expected the weight to be something else")


def test_the_fused_matrices_multiply_once_at_load_beside_the_parts(monkeypatch):
    """What the transformers backend reads (the parts, the model's own layers) and what the fast backend reads
    (the fused matrices) both run their first matmul at load."""
    from playground.loader import ModelCache

    seen = []
    real = quantization.first_matmuls
    monkeypatch.setattr(quantization, "first_matmuls", lambda module, extra=(): seen.append(extra) or real(module, extra))
    model = ModelCache().get("tiny-random-llama", "cpu", "fp32", "sdpa", quant="int8")[0].model
    (extra,) = seen
    assert len(extra) == 2 * model.config.num_hidden_layers
    assert [quantization.layer_words(name) for name, _ in extra[:2]] == ["fused q/k/v of layer 0",
                                                                         "fused gate/up of layer 0"]
    assert all(quantization.is_quantized(layer.weight) for _, layer in extra)


# A code name in a message: module.attribute (kernels.QUANT_PATTERNS), or a name this code defines that no user
# sets (first_matmuls, QuantizedMatmulError); setting names and their choices are the user's words, as are
# torch.compile and file names.
DOTTED = re.compile(r"(?<![\w.])[a-z_][a-z0-9_]*\.[A-Za-z_]\w*")
USERS_DOTTED = {"torch.compile"}
FILE_NAME = re.compile(r"\.(json|jsonl|safetensors|txt)$")


def code_names(text: str) -> set[str]:
    from playground import attention, loader

    settings = set(SETTINGS) | {c for s in SETTINGS.values() for c in (s.choices or ()) if isinstance(c, str)}
    defined = {name for module in (quantization, kernels, capabilities, loader) for name in vars(module)
               if ("_" in name.strip("_") or re.search(r"[a-z][A-Z]", name)) and name not in settings}
    dotted = {m for m in DOTTED.findall(text) if m not in USERS_DOTTED and not FILE_NAME.search(m)}
    return dotted | {word for word in re.findall(r"\w+", text) if word in defined} - set(attention.NAMES)


def every_message() -> list[str]:
    """Every refusal and fallback text the host checks, the kernel proof, the quantization and the loader give
    that a CPU can build (each cause an exception of the user's words)."""
    from playground import attention, loader

    messages = []
    cpu = capabilities.Host(cuda=False, device_name="cpu", capability=None, bf16=True, packages={})
    hosts = [cpu, dataclasses.replace(H200, bf16=False), A100, dataclasses.replace(H200, packages={}),
             dataclasses.replace(H200, packages={"torchao": "0.18.0", "gemlite": "0.6.0"}),
             dataclasses.replace(H200, device_name="B300", capability=(10, 3))]
    for host in hosts:
        for quant in quantization.NAMES:
            for attn in attention.NAMES:
                for device, dtype in (("cuda", "bf16"), ("cuda", "fp16"), ("cpu", "fp32"), ("cuda", "fp32")):
                    try:
                        config = RunConfig(prompt_tokens=8, quant=quant, attn=attn, device=device, dtype=dtype)
                    except ConfigError:  # refused by the config's own rules, before any host check
                        continue
                    try:
                        capabilities.check(config, host)
                    except ConfigError as exc:
                        messages.append(str(exc))
    families = {"prefill": PhaseKernels(["x"], ["sdpa-math"], matmuls=["aten::mm"]),
                "decode": PhaseKernels([], ["eager"], matmuls=["aten::mm"])}
    messages += [m for m in (kernels.fallback(a, families) for a in attention.NAMES) if m]
    messages += [m for m in (quant_fallback(q, families) for q in quantization.NAMES) if m]
    cause = AssertionError("Expected the weights to be in another shape")
    for quant in quantization.NAMES[1:]:
        wrapped = quantization.QuantizedMatmulError("running the first matmul of "
                                                    f"{quantization.layer_words('model.layers.3.mlp.down_proj')}")
        wrapped.__cause__ = cause
        messages += [quantization.failure(quant, "quantizing my-model's weights", cause),
                     quantization.failure(quant, str(wrapped), wrapped)]
    for text in ("Expecting value: line 1 column 1 (char 0) valid JSON", "Unrecognized configuration class",
                 "offline mode is enabled", "404 not found", "trust_remote_code=True is needed", "something else"):
        messages.append(loader.explain_load_error("owner/model", "hub", OSError(text)))
    for name in ("no such thing!", "./missing-dir"):
        try:
            loader.model_source(name)
            loader.load_config(name)
        except loader.LoadError as exc:
            messages.append(str(exc))
    return messages


def test_no_refusal_or_fallback_names_code():
    assert code_names("... (or a kernel kernels.QUANT_PATTERNS does not name yet ran)") == {"kernels.QUANT_PATTERNS",
                                                                                       "QUANT_PATTERNS"}
    assert code_names("failed (QuantizedMatmulError) in first_matmuls") == {"QuantizedMatmulError", "first_matmuls"}
    assert code_names("compiled by torch.compile; trust_remote_code; flash_attention_2; config.json") == set()
    messages = every_message()
    assert len(messages) > 100 and any("quant=int4 failed in torchao" in m for m in messages)
    assert {m: code_names(m) for m in messages if code_names(m)} == {}
