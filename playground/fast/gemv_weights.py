"""int4 and int8 weights for the playground's own GEMV (gemv.py), as a torchao config and tensor subclass.

Built on torchao's workflow API (a config, its module handler, a `TorchAOBaseTensor`), so `quantize_`
applies it and the registry, the fused projections (a row slice per part) and the byte counts (the
inner tensors) treat it as they treat torchao's own formats. A single row (decode) runs the GEMV as
one custom op, which torch.compile keeps and a CUDA graph replays; many rows (a prompt, a batch, a
speculative verify step) dequantize to the activations' dtype for a tensor-core matmul, since a GEMV per
row would read the weights once per token. The registry has the kernel proof require the GEMV in decode
only, so a batch's decode, which dequantizes too, is flagged as a fallback and a prompt's is not.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torchao.core.config import AOBaseConfig
from torchao.quantization.transform_module import register_quantize_module_handler
from torchao.utils import TorchAOBaseTensor, fill_defaults

from playground.fast import gemv

aten = torch.ops.aten


class GemvTensor(TorchAOBaseTensor):
    """An (out_features, in_features) weight stored as `gemv.pack` writes it."""

    tensor_data_names = ["words", "scales", "offsets"]
    tensor_attribute_names = ["shape", "dtype"]

    def __new__(cls, words, scales, offsets, shape, dtype):
        return torch.Tensor._make_wrapper_subclass(cls, shape, device=words.device, dtype=dtype, requires_grad=False)

    def __init__(self, words, scales, offsets, shape, dtype):
        self.words, self.scales, self.offsets = words, scales, offsets

    @classmethod
    def from_float(cls, weight: torch.Tensor, bits: int) -> GemvTensor:
        return cls(*gemv.pack(weight, bits), weight.shape, weight.dtype)

    def _stable_hash_for_caching(self) -> str:
        """What a compile cache keys this weight by, as torch asks of tensor subclasses: its metadata, the same
        in every process (the default walk pickles the inner tensors' metadata, which fails once a compiled
        prompt step makes their widths symbolic, and then that step is never cached)."""
        parts = [type(self).__name__, str(self.dtype), str(tuple(self.shape))]
        parts += [f"{t.dtype}{tuple(t.shape)}" for t in (self.words, self.scales, self.offsets)]
        return hashlib.blake2b("|".join(parts).encode(), digest_size=16).hexdigest()

    def dequantize(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        return gemv.dequantize(self.words, self.scales, self.offsets).to(dtype or self.dtype)


implements = GemvTensor.implements
implements_torch_function = GemvTensor.implements_torch_function


@implements(aten.linear.default)
@implements_torch_function(torch.nn.functional.linear)
def _linear(func, types, args, kwargs):
    x, weight, bias = fill_defaults(args, 3, [None])
    if x.numel() == x.shape[-1]:  # one row: decode at batch 1
        out = gemv.mv(x.reshape(1, -1), weight.words, weight.scales, weight.offsets)
        out = out.reshape(*x.shape[:-1], weight.shape[0])
    else:
        out = torch.nn.functional.linear(x, weight.dequantize(x.dtype))
    return out if bias is None else out + bias


@implements(aten.slice.Tensor)
def _slice(func, types, args, kwargs):
    """Rows only, as the fused projections' parts are taken (playground.fast.fuse)."""
    weight, dim, start, end, step = fill_defaults(args, 5, [0, None, None, 1])
    if dim != 0 or step != 1:
        raise NotImplementedError(f"GemvTensor slices rows only (dim 0, step 1), not dim={dim} step={step}")
    rows = slice(start, end)
    words = weight.words[rows]
    return GemvTensor(words, weight.scales[rows], weight.offsets[rows], (words.shape[0], weight.shape[1]),
                          weight.dtype)


@dataclass
class GemvConfig(AOBaseConfig):
    """`bits` (gemv.BITS) a weight in groups of gemv.GROUP (128) input columns: the kernel's block shapes
    are built on the group."""

    bits: int = 4


@register_quantize_module_handler(GemvConfig)
def _quantize_linear(module: torch.nn.Module, config: GemvConfig, *, parameter_name: str = "weight"):
    """A weight whose in_features are no multiple of the group keeps its floats; the record's count of
    quantized linear weights ("25 of 29") shows which did."""
    weight = getattr(module, parameter_name)
    if weight.shape[-1] % gemv.GROUP:
        return module
    setattr(module, parameter_name, torch.nn.Parameter(GemvTensor.from_float(weight, config.bits), requires_grad=False))
    return module
