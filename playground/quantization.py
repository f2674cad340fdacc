"""Every weight quantization a run can ask for, as data: the one place that knows their names.

Weight-only quantization stores the linear layers' weights in fewer bits (torchao tensor subclasses);
decode, which reads every weight once per token, can only get faster if a kernel multiplies the
narrow weights directly. A kernel that first dequantizes them to float and runs a plain matmul reads
more bytes, not fewer, so the kernel proof (`families`) is as much a part of an entry as its needs.

An entry says which torchao config makes it, bits per weight, where and in which dtypes it runs, what
it needs installed, which kernel families prove a quantized matmul ran and which backends take it.
The config's choices and refusals, the host checks, the loader, the kernel proof and the UI read it.

No torch at import: the config and the UI read this module too; torchao is imported only to quantize.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from playground.attention import DTYPES, Package

TORCHAO = Package("torchao", "torchao", "pip install torchao==0.18.0")
GEMLITE = Package("gemlite", "gemlite", "pip install gemlite==0.5.1.post1", fits=("0.5.",),
                  misfit="torchao 0.18's gemlite layout takes gemlite 0.5 (0.6 packs a layer into four tensors, "
                         "torchao unpacks three)")
GEMLITE_CONFIG = "torchao.prototype.quantization.quant_api"  # where torchao 0.18 keeps UIntxWeightOnlyConfig
BACKENDS = ("transformers", "fast")  # every generation backend: the fast one quantizes its fused projections too


@dataclass(frozen=True)
class Quantization:
    name: str  # what a run asks for
    label: str  # UI wording
    bits: int | None  # bits per quantized weight, scales aside (None: the dtype's own width)
    torchao: str = ""  # the torchao config class that makes it; "": nothing to do
    options: tuple[tuple[str, object], ...] = ()  # keyword arguments of that class
    module: str = "torchao.quantization"  # where that class lives
    devices: tuple[str, ...] = ("cpu", "cuda")
    dtypes: tuple[str, ...] = DTYPES  # the activation dtypes its kernels take
    min_capability: tuple[int, int] | None = None  # lowest CUDA compute capability
    packages: tuple[Package, ...] = ()
    families: frozenset[str] = frozenset()  # kernel families (playground.kernels.QUANT_PATTERNS) proving it ran
    backends: tuple[str, ...] = BACKENDS  # the generation backends (playground.backends) that take it
    tied_head: bool = True  # an output head tied to the input embeddings gets a quantized copy of its own
    # inner tensors its matmul asserts contiguous but its row slice leaves strided: the parts of a fused
    # projection (row views, playground.fast.fuse) each get a contiguous copy of these
    contiguous: tuple[str, ...] = ()
    # (backend, why it refuses this format there): a backend the format loads for (its fused matrices are
    # quantized on every load) but whose reading of it is not shown to work yet; refused before Run
    refused: tuple[tuple[str, str], ...] = ()


# int4 uses torchao's tile-packed layout, whose matmul is torch's own tinygemm kernel (`_weight_int4pack_mm`,
# CUDA, bf16). Its scales and zero points are one (groups, out_features, 2) tensor, so a row view (the parts of
# a fused projection, which the transformers backend reads) slices its middle dimension: strided wherever
# in_features (padded to 1024) holds more than one group of 128, and torchao's matmul asserts "Expected
# scale_and_zero to be contiguous". Each part holds a contiguous copy of its scales (1/16 of its int4 bytes), so
# the model's own forward (perplexity, the load-time first matmuls) runs; run through tinygemm on CPU stand-ins
# only, so the transformers backend, which decodes through those parts, stays refused until a GPU shows it. torchao's default int4 layouts need the mslk-cuda package's CUTLASS kernels instead, and neither
# is offered: on the H200 its plain int4 matmul read 0.5-1.1 TB/s at batch 1, slower than bf16 on every 8B
# projection, and its preshuffled one has no fake-tensor kernel (torch.compile cannot trace it) and no row slice
# (the fused projections' parts are row views) (results/h200/2026-12-06-int4-kernels-and-tied-head/).
# The gemlite entries are torchao's bit-packed layout, multiplied by gemlite's Triton GEMV/GEMM kernels (one
# custom op, so a compiled step keeps them). Timed alone on the H200 at batch 1 (benchmarks/quant_matmul.py):
# int8 through gemlite reads its bytes at 2.6-4.2 TB/s against 2.3-3.4 for inductor's int8 matmul; neither int4
# kernel passes about 2 TB/s. torchao's options keep inductor's global settings as the fast backend set them.
# int4 through gemlite takes fp16 only: with bf16 activations its Triton GEMV failed to compile on the H200
# ("Both operands must be same dtype. Got bf16 and fp16": HQQ's fp16 scales dequantize the weights to fp16).
# A hand-written Triton GEMV (int4 and int8 from the weight's bits, no int-to-float conversion) was offered and
# taken out: slower than bf16 on every projection, 0.4-0.8 TB/s (results/h100/2026-12-07-hand-written-gemv/).
INT4_ROW_VIEWS = ("that backend reads q/k/v and gate/up as row views of one fused int4 matrix each, and torchao "
                  "0.18's tile-packed int4 (torch's tinygemm kernel) leaves a view's scales strided wherever "
                  "in_features, padded to 1024, holds more than one group of 128, as every hidden size does (on an "
                  "H100 the shipped tiny model, hidden size 384, stopped on torchao's \"Expected scale_and_zero to "
                  "be contiguous\"); the contiguous copies each view now holds have not run on a GPU yet. Choose "
                  "backend fast, or quant int8 or int4-gemlite")
REGISTRY: dict[str, Quantization] = {q.name: q for q in (
    Quantization("none", "none (the dtype's weights)", None),
    Quantization("int8", "int8 weight-only (torchao)", 8, "Int8WeightOnlyConfig", packages=(TORCHAO,),
                 families=frozenset({"int8-mm"})),
    Quantization("int4", "int4 weight-only, group 128 (torchao, tinygemm)", 4, "Int4WeightOnlyConfig",
                 (("group_size", 128), ("int4_packing_format", "tile_packed_to_4d")), devices=("cuda",),
                 dtypes=("bf16",), packages=(TORCHAO,), families=frozenset({"int4-mm"}), contiguous=("scale_and_zero",),
                 refused=(("transformers", INT4_ROW_VIEWS),)),
    Quantization("fp8", "fp8 e4m3 weight-only (torchao)", 8, "Float8WeightOnlyConfig", min_capability=(8, 9),
                 packages=(TORCHAO,), families=frozenset({"fp8-mm"}), tied_head=False),
    Quantization("int8-gemlite", "int8 weight-only (torchao, gemlite kernels)", 8, "UIntxWeightOnlyConfig",
                 (("bit_width", 8), ("group_size", None), ("set_inductor_config", False)), GEMLITE_CONFIG,
                 devices=("cuda",), dtypes=("fp16", "bf16"), packages=(TORCHAO, GEMLITE),
                 families=frozenset({"gemlite-mm"})),
    Quantization("int4-gemlite", "int4 weight-only, group 128 (torchao, HQQ, gemlite kernels)", 4,
                 "UIntxWeightOnlyConfig", (("bit_width", 4), ("group_size", 128), ("set_inductor_config", False)),
                 GEMLITE_CONFIG, devices=("cuda",), dtypes=("fp16",), packages=(TORCHAO, GEMLITE),
                 families=frozenset({"gemlite-mm"})),
)}
NAMES = tuple(REGISTRY)


def refusal(name: str, backend: str) -> str | None:
    """Why backend `backend` refuses quantization `name` (its registry entry's `refused`), or None."""
    return dict(REGISTRY[name].refused).get(backend)


def quantize(module, name: str) -> None:
    """Quantize `module`'s linear layers in place as `name` asks: every nn.Linear whose weight is not
    quantized yet (so fused projections quantized first, playground.fast.fuse, are left as they are).

    An output head tied to the input embeddings is first given a copy of the table of its own
    (`untie_head`), where the entry allows it, as transformers' TorchAoConfig does with
    `untie_embedding_weights`: a decode step reads the head whole but only one row of the table, so
    the quantized copy cuts the bytes each step reads (on the Llama-3.2-1B shape the bf16 table is
    a fifth of them) for a quantized copy of the table in memory. fp8 leaves a tied head as it is:
    its per-row scale turns the table's all-zero padding row into NaN (seen on the H200's 1B shape).
    """
    entry = REGISTRY[name]
    if not entry.torchao:
        return
    import torchao.quantization

    untied = untie_head(module) if entry.tied_head else None
    embeddings = module.get_input_embeddings() if hasattr(module, "get_input_embeddings") else None
    table = embeddings.weight if embeddings is not None else None

    def plain_linear(m, _fqn: str) -> bool:
        return type(m).__name__ == "Linear" and not is_quantized(m.weight) and m.weight is not table

    config = getattr(importlib.import_module(entry.module), entry.torchao)(**dict(entry.options))
    torchao.quantization.quantize_(module, config, filter_fn=plain_linear)
    if untied is not None and not is_quantized(module.get_output_embeddings().weight):
        # the format left the copy in float (torchao's int4 skips in_features off its group of 128): no copy then
        tie_head(module, untied)
    hold_contiguous(module, entry)


def hold_contiguous(module, entry: Quantization) -> None:
    """Give each quantized linear weight of `module` a contiguous copy of the inner tensors `entry.contiguous`
    names where they are strided (a fused projection's row views); the weight's other data stays shared."""
    if not entry.contiguous:
        return
    import torch

    with torch.inference_mode(False), torch.no_grad():
        for m in module.modules():
            weight = getattr(m, "weight", None)
            if type(m).__name__ != "Linear" or not is_quantized(weight):
                continue
            for name in entry.contiguous:
                inner = getattr(weight, name, None)
                if inner is not None and not inner.is_contiguous():
                    setattr(weight, name, inner.contiguous())


def first_matmuls(module, extra=()) -> None:
    """Multiply one row of zeros by every quantized linear weight of `module` (and each (name, layer) in
    `extra`, a layer having `weight` and `bias`), as a decode step would: what torchao or its kernels refuse
    about a format or a shape is raised here, at load, rather than in the middle of a run.

    Raises `QuantizedMatmulError` naming the layer, with what was raised as its cause."""
    import torch

    layers = [(name, m) for name, m in module.named_modules()
              if type(m).__name__ == "Linear" and is_quantized(getattr(m, "weight", None))]
    seen: set[int] = set()
    with torch.inference_mode():
        for name, layer in [*layers, *extra]:
            weight = layer.weight
            if id(weight) in seen or not is_quantized(weight) or is_shard(weight):
                continue
            seen.add(id(weight))
            x = torch.zeros(1, weight.shape[-1], dtype=weight.dtype, device=weight.device)
            try:
                torch.nn.functional.linear(x, weight, getattr(layer, "bias", None))
                if weight.device.type == "cuda":
                    torch.cuda.synchronize(weight.device)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as exc:
                raise QuantizedMatmulError(f"running the first matmul of {layer_words(name)} "
                                           f"({weight.shape[0]}x{weight.shape[1]})") from exc


def layer_words(name: str) -> str:
    """A layer's path in the model in words: "model.layers.3.self_attn.q_proj" -> "q_proj of layer 3"."""
    parts = name.split(".")
    numbers = [p for p in parts if p.isdigit()]
    return f"{parts[-1]} of layer {numbers[-1]}" if numbers else parts[-1]


class QuantizedMatmulError(RuntimeError):
    """A quantized weight's first matmul failed; the message names the layer, the cause is what was raised."""


def packages_installed(name: str) -> str:
    """The packages `name` quantizes with and their installed versions, e.g. "torchao 0.18.0 with gemlite 0.5.1"."""
    import importlib.metadata

    def installed(package: Package) -> str:
        try:
            return f"{package.distribution} {importlib.metadata.version(package.distribution)}"
        except importlib.metadata.PackageNotFoundError:
            return package.distribution

    return " with ".join(installed(p) for p in REGISTRY[name].packages) or "no package"


def failure(name: str, doing: str, exc: BaseException) -> str:
    """What a user reads when quantizing as `name` asks, or a quantized matmul, raised `exc` while `doing`:
    the setting, the packages and what to change, then the original error."""
    others = [q for q in NAMES if q not in ("none", name)]
    cause = exc.__cause__ if isinstance(exc, QuantizedMatmulError) and exc.__cause__ is not None else exc
    text = " ".join(str(cause).split())
    if len(text) > 400:
        text = text[:399] + "…"
    return (f"quant={name} failed in {packages_installed(name)} while {doing}; choose another quant "
            f"({', '.join(others)}) or quant=none. {type(cause).__name__}: {text or 'no message'}")


def untie_head(model) -> tuple[str, str] | None:
    """Give an output head that shares the input-embedding table a copy of its own. Returns the tie it
    undid (head parameter name, table parameter name), for `tie_head`, or None where there was none."""
    import torch

    if not (hasattr(model, "get_input_embeddings") and hasattr(model, "get_output_embeddings")):
        return None
    embeddings, head = model.get_input_embeddings(), model.get_output_embeddings()
    if embeddings is None or head is None or head.weight is not embeddings.weight:
        return None
    names = {id(module): name for name, module in model.named_modules()}
    tie = (f"{names[id(head)]}.weight", f"{names[id(embeddings)]}.weight")
    # an ordinary tensor even under inference mode, as playground.fast.fuse makes its fused weights
    with torch.inference_mode(False), torch.no_grad():
        head.weight = torch.nn.Parameter(embeddings.weight.detach().clone(), requires_grad=False)
    model.config.tie_word_embeddings = False  # transformers would otherwise tie them again on a re-tie
    tied = getattr(model, "all_tied_weights_keys", None)
    if isinstance(tied, dict):  # transformers' own record of the tie, which tie_weights() may replay
        tied.pop(tie[0], None)
    return tie


def tie_head(model, tie: tuple[str, str]) -> None:
    """Undo `untie_head`: the head shares the table again."""
    model.get_output_embeddings().weight = model.get_input_embeddings().weight
    model.config.tie_word_embeddings = True
    tied = getattr(model, "all_tied_weights_keys", None)
    if isinstance(tied, dict):
        tied[tie[0]] = tie[1]


def is_quantized(tensor) -> bool:
    """A torchao tensor subclass: its data lives in inner tensors (`__tensor_flatten__`)."""
    return hasattr(tensor, "__tensor_flatten__")


def is_shard(tensor) -> bool:
    """A tensor-parallel shard (torch's DTensor), which flattens too but is no quantized tensor."""
    return type(tensor).__name__ == "DTensor"


def tensor_bytes(tensor) -> int:
    """Bytes `tensor` really holds: a quantized one's inner tensors (int8 data, scales, zero points), not
    its logical shape at its nominal dtype, which is what `numel() * element_size()` would count; for a
    tensor-parallel shard, this process's part."""
    if is_shard(tensor):
        return tensor_bytes(tensor.to_local())
    if is_quantized(tensor):
        inner, _ = tensor.__tensor_flatten__()
        return sum(tensor_bytes(getattr(tensor, name)) for name in inner)
    return tensor.numel() * tensor.element_size()


def quantized_weights(model) -> str:
    """What the loaded weights carry, e.g. "Int8Tensor: 29 of 29 linear weights"; "" when none is quantized."""
    linear = [m.weight for m in model.modules() if type(m).__name__ == "Linear"]
    linear = [w.to_local() if is_shard(w) else w for w in linear]
    kinds = sorted({type(w).__name__ for w in linear if is_quantized(w)})
    count = sum(is_quantized(w) for w in linear)
    return f"{', '.join(kinds)}: {count} of {len(linear)} linear weights" if count else ""
