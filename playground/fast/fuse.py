"""Fused projections: q/k/v as one matrix and gate/up as one, without a second copy of any weight.

At batch 1 every projection is a matrix-vector product whose cost is reading its weights, and a
small one is dominated by launch and tail effects: one launch over q, k and v together (and one
over gate and up) reads the same bytes in fewer, larger kernels, as gpt-fast's `wqkv` does.

The fused matrices are new tensors, and the model's own `q_proj.weight` (and the others) become
row views into them, so memory does not grow, and `model.generate`, the transformers backend and
`state_dict()` see the same values as before, only stored side by side.

Quantized weights are fused the same way, before quantizing (`quantize_fused`): each fused matrix
is quantized as one and the parts become row views of it again, so a quantized model keeps one
matmul per fused projection too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass
class FusedLinear:
    weight: torch.Tensor  # (sum of out_features, in_features): the parts' rows, stacked
    bias: torch.Tensor | None
    splits: tuple[int, ...]  # out_features of each part, in order
    parts: tuple[nn.Linear, ...]  # the model's own modules, whose parameters are row views of `weight`

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.nn.functional.linear(x, self.weight, self.bias).split(self.splits, dim=-1)


@dataclass
class FusedLayer:
    qkv: FusedLinear
    gate_up: FusedLinear


def _fuse(parts: list[nn.Linear]) -> FusedLinear:
    """Stack the parts' weights (and biases) into one tensor and make each part's parameters views of it."""
    has_bias = [p.bias is not None for p in parts]
    fused = FusedLinear(torch.cat([p.weight for p in parts]),
                        torch.cat([p.bias for p in parts]) if all(has_bias) else None,
                        tuple(p.weight.shape[0] for p in parts), tuple(parts))
    _view_parts(fused)
    return fused


def _view_parts(fused: FusedLinear) -> None:
    """Make each part's weight (and bias) the rows of the fused tensors that belong to it."""
    start = 0
    for part, rows in zip(fused.parts, fused.splits):
        part.weight = nn.Parameter(fused.weight[start:start + rows], requires_grad=False)
        if fused.bias is not None:
            part.bias = nn.Parameter(fused.bias[start:start + rows], requires_grad=False)
        start += rows


def fusable_reason(model) -> str | None:
    """Why the projections of `model` cannot be fused in place, or None."""
    devices = {p.device for p in model.parameters()} | set((getattr(model, "hf_device_map", None) or {}).values())
    if len(devices) > 1:
        return "the fast backend needs the whole model on one device (this one is split or offloaded)"
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        if len({attn.q_proj.bias is None, attn.k_proj.bias is None, attn.v_proj.bias is None}) > 1:
            return "q/k/v projections where only some have a bias are not supported by the fast backend"
        if len({mlp.gate_proj.bias is None, mlp.up_proj.bias is None}) > 1:
            return "gate/up projections where only one has a bias are not supported by the fast backend"
    return None


def fused_layers(model) -> list[FusedLayer]:
    """The fused projections of each decoder layer, made once per model and kept on it."""
    fused = model.__dict__.get("_playground_fused")
    if fused is None:
        # ordinary tensors even when called under inference mode (as the engine does): inference tensors as
        # parameters would change compiled graphs' guards and break any later autograd use of the model
        with torch.inference_mode(False), torch.no_grad():
            fused = [FusedLayer(_fuse([layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj]),
                                _fuse([layer.mlp.gate_proj, layer.mlp.up_proj]))
                     for layer in model.model.layers]
        model.__dict__["_playground_fused"] = fused
        if fused and fused[0].qkv.weight.is_cuda:
            torch.cuda.empty_cache()  # hand the replaced blocks back rather than leave them cached in fragments
    return fused


def quantize_fused(model, quantize: Callable[[nn.Module], None]) -> None:
    """Fuse, then quantize each fused matrix as one (`quantize` converts a module's nn.Linear layers in place).

    The parts keep the values quantizing each alone would give, since the weight-only schemes in
    playground.quantization scale each output row (or groups within a row) on its own; the fast
    backend then reads one quantized matrix per fused projection, and the bf16 fused copy is freed.
    """
    with torch.inference_mode(False), torch.no_grad():
        for layer in fused_layers(model):
            for fused in (layer.qkv, layer.gate_up):
                holder = nn.Linear(fused.weight.shape[1], fused.weight.shape[0], bias=False,
                                   device="meta", dtype=fused.weight.dtype)
                holder.weight = nn.Parameter(fused.weight, requires_grad=False)
                quantize(holder)
                fused.weight = holder.weight
                _view_parts(fused)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

