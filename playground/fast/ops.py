"""Custom ops of the fast decoder: nodes the compiled step calls but inductor does not see into.

`materialize` writes a value to memory once, where inductor would otherwise recompute it inside
every thread block of the kernel that reads it (see its docstring).

flash-attn's kernels are ops so that the compiled decode step can call them inside its CUDA graph:
`flash_attn_with_kvcache` calls the extension directly, which torch.compile cannot trace
(`fullgraph=True` would fail); a custom op with a shape-only fake implementation is one opaque
node in the graph instead. (`flash_attn_func` is already a custom op from flash-attn 2.7 on; the
prefill op wraps it only to take and give the same layouts as the decode op.) The decode op is
what makes flash-attn worth choosing at batch 1:
`flash_attn_with_kvcache` reads only the filled part of the cache (`cache_seqlens`) and splits it
across thread blocks (flash-decoding), where an SDPA kernel with a mask reads the whole static
cache with one block per head group.

The ops take the decoder's layout, (batch, heads, seq, head_dim), whose transpose is flash-attn's
(batch, seq, heads, head_dim) as strides, and return flash-attn's: the output projection wants
exactly that order, so with the decoder's own layouts no copy is made either way.
The op names avoid flash-attn's own names so that the profiler proof sees only the real kernels.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("playground_fast::fa2_prefill", mutates_args=())
def fa2_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention within the prompt: q (batch, heads, seq, d), k/v (batch, kv_heads, seq, d).

    Returns (batch, seq, heads, d).
    """
    from flash_attn import flash_attn_func

    out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=True)
    return out.contiguous()  # flash-attn's output follows q's strides; the fake kernel promises contiguous


@fa2_prefill.register_fake
def _(q, k, v, scale):
    return q.new_empty(q.shape[0], q.shape[2], q.shape[1], q.shape[3])


@torch.library.custom_op("playground_fast::fa2_decode", mutates_args=())
def fa2_decode(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, cache_seqlens: torch.Tensor,
               scale: float) -> torch.Tensor:
    """One query token per row against the first `cache_seqlens` (batch,) int32 positions of the static cache.

    q (batch, heads, 1, d); keys/values (batch, kv_heads, cache_len, d), already holding this
    token's k/v. Returns (batch, 1, heads, d). Grouped-query heads are native to the kernel.
    """
    from flash_attn import flash_attn_with_kvcache

    out = flash_attn_with_kvcache(q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                  cache_seqlens=cache_seqlens, softmax_scale=scale, causal=True)
    return out.contiguous()  # as for prefill: a copy only where q's strides made it non-contiguous


@fa2_decode.register_fake
def _(q, keys, values, cache_seqlens, scale):
    return q.new_empty(q.shape[0], q.shape[2], q.shape[1], q.shape[3])


@torch.library.custom_op("playground_fast::materialize", mutates_args=())
def materialize(x: torch.Tensor) -> torch.Tensor:
    """A copy of `x`, which inductor must compute into memory before the op, and cannot fuse into its readers.

    At batch 1 inductor turns each projection into a reduction kernel and inlines the pointwise
    producer of its input into that kernel's loads; for the down projection that producer is
    act(gate) * up, so every thread block recomputes the activation over the whole
    intermediate width (an exp and a division per element). Measured on the H200 (8B shape),
    the down projection then ran at about half the bandwidth of the others. Writing the
    activation out once costs one small copy per layer.
    """
    return x.clone()


@materialize.register_fake
def _(x):
    return torch.empty_like(x)

