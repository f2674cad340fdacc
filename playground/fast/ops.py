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
cache with one block per head group; and it applies the rotary and writes the new k/v into the
cache inside that kernel.

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


@torch.library.custom_op("playground_fast::fa2_decode", mutates_args=("keys", "values"))
def fa2_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               cache_seqlens: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, scale: float) -> torch.Tensor:
    """n new tokens per row, appended to the static cache and attended to in one kernel.

    q (batch, heads, n, d), k and v (batch, kv_heads, n, d), all before rotary; keys/values (batch,
    kv_heads, cache_len, d), whose first `cache_seqlens` (batch,) int32 positions are filled. flash-attn
    rotates q and k by cos/sin (cache_len, d / 2) at positions cache_seqlens onwards, writes k and v into
    the cache there and attends causally over the filled part. Returns (batch, n, heads, d).

    Done by the decoder's own ops, the rotary of q and k and the two cache writes were four small
    kernels per layer before this one (a quarter of a 1B-shape step's launches).
    """
    from flash_attn import flash_attn_with_kvcache

    out = flash_attn_with_kvcache(q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                  k=k.transpose(1, 2), v=v.transpose(1, 2), rotary_cos=cos, rotary_sin=sin,
                                  cache_seqlens=cache_seqlens, softmax_scale=scale, causal=True,
                                  rotary_interleaved=False)
    return out.contiguous()  # as for prefill: a copy only where q's strides made it non-contiguous


@fa2_decode.register_fake
def _(q, k, v, keys, values, cache_seqlens, cos, sin, scale):
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

