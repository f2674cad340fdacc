"""The bandwidth roofline of batch-1 decode: the bytes one decode step must read, and how fast that can go.

A decode step reads every weight once, except the input-embedding table, of which it reads one row
per sequence (a tied table is read whole by the output head, so it counts once, as a weight). It
also reads the KV cache, and how much of it depends on the attention path:
  filled     the keys and values written so far (a dynamic cache, or flash-decoding over a static
             one): on average prompt + new/2 tokens over the decode steps
  allocated  the whole static cache, masked (SDPA or eager over a static cache)
  none       no cache: keys and values are recomputed from the weights every step
  roofline_tok_s = bandwidth / bytes_per_step;  bandwidth_roofline_pct = decode_tok_s / roofline_tok_s
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.attention import REGISTRY
from playground.quantization import tensor_bytes

KV_READS = ("filled", "allocated", "none")


def decode_weight_bytes(model) -> int:
    """Bytes of weights one decode step reads: all parameters (quantized ones as the bytes they store), an
    untied input-embedding table as one row."""
    total = sum(tensor_bytes(p) for p in model.parameters())  # shared (tied) tensors count once
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if embed is None or getattr(embed, "weight", None) is None:
        return total
    table = embed.weight
    if output is not None and getattr(output, "weight", None) is not None and output.weight is table:
        return total  # tied: the head reads the whole table every step
    return total - tensor_bytes(table) + tensor_bytes(table) // table.shape[0]


def kv_read(use_cache: bool, cache_impl: str, backend: str, attn: str) -> str:
    """Which part of the KV cache a decode step's attention reads (see the module docstring); over a static
    cache, the attention's registry entry says which backends read only the filled part."""
    if not use_cache:
        return "none"
    if cache_impl == "dynamic" or backend in REGISTRY[attn].filled_static:
        return "filled"
    return "allocated"


@dataclass(frozen=True)
class StepBytes:
    weights: int
    kv: int
    kv_read: str

    @property
    def total(self) -> int:
        return self.weights + self.kv


def step_bytes(weights: int, kv_read_kind: str, kv_bytes_per_token: int, prompt_tokens: int, new_tokens: int,
               kv_allocated_bytes: int) -> StepBytes:
    """Mean bytes per decode step. Decode step i (1..n-1) attends over prompt + i positions: mean prompt + n/2."""
    if kv_read_kind == "none":
        kv = 0
    elif kv_read_kind == "filled":
        kv = round(kv_bytes_per_token * (prompt_tokens + new_tokens / 2))
    else:
        kv = kv_allocated_bytes
    return StepBytes(weights, kv, kv_read_kind)


def roofline_tok_s(bandwidth_gb_s: float, step: StepBytes) -> float:
    """Decode steps per second (tokens per sequence) if every step read its bytes at `bandwidth_gb_s`."""
    return bandwidth_gb_s * 1e9 / step.total
