"""The forward pass of a Llama-family decoder over a static KV cache, as plain functions of tensors.

These functions call the model's own modules (norms, output and down projections, activation,
embeddings, head) and its q/k/v and gate/up weights fused in place (fuse.py), so the weights are
the loaded ones and numerics follow transformers op for op. What differs is the plumbing: the
cache is a fixed-size buffer written in place, positions are a tensor, and the decode step has no
Python branch that depends on data, so `torch.compile(fullgraph=True)` traces it as one graph and
"reduce-overhead" replays it as one CUDA graph per token.

Attention goes through `scaled_dot_product_attention`, so an `sdpa_kernel` context chooses the
kernel, unless the model was loaded with flash_attention_2: then flash-attn's kernels run (ops.py),
and a decode step reads only the filled part of the cache; or with eager: then it is written out as
transformers' eager attention computes it (`written_attention`), and a compiled step's attention is
inductor's own kernels, fused with what surrounds them. With SDPA, prefill starts at position 0
of an empty cache and attends only to the prompt with `is_causal=True` (every SDPA backend takes
that; a left-padded batch uses a mask, below). A decode step attends to the whole cache with a
boolean mask of the filled positions. Under a mask, grouped-query heads are handled by folding
the query heads of a group into the query axis (`masked_attention`), so the cache is never repeated
per head and any mask-capable kernel runs it: SDPA's own `enable_gqa` runs only on the flash and
math kernels on CUDA, and flash takes no mask.

A batch of uneven prompts arrives left-padded, so every row's next token is in the same column. Its
state is allocated as padded: each row's first prompt column (`state.start`) hides the padding from
every mask and sets the row's rotary positions, so a row computes what it computes alone. That
state traces graphs of its own; an unpadded batch keeps the plain masks and positions.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from playground.fast.fuse import FusedLayer, fused_layers
from playground.fast.ops import fa2_decode, fa2_prefill, materialize
from playground.fast.state import LayerKV, StaticState
from playground.quantization import is_quantized


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (batch, heads, seq, head_dim) rotated by cos/sin (seq, head_dim), or per row (batch, 1, seq, head_dim);
    the same ops as transformers."""
    return x * cos + rotate_half(x) * sin


def project_qkv(attn, fused: FusedLayer, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """h (batch, seq, hidden) -> q (batch, heads, seq, d), k and v (batch, kv_heads, seq, d), rope applied."""
    batch, seq, _ = h.shape
    shape = (batch, seq, -1, attn.head_dim)
    q, k, v = (part.reshape(shape).transpose(1, 2) for part in fused.qkv(h))
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def uses_flash_attn(config) -> bool:
    return config._attn_implementation == "flash_attention_2"


def masked_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """SDPA of q (batch, heads, n, d) over keys and values (batch, kv_heads, L, d) where `visible` (batch or 1,
    1, n, L) allows: (batch, heads, n, d). The query heads of a group are folded into the query axis,
    (batch, heads, n, d) -> (batch, kv_heads, group * n, d), the mask repeated for each of them."""
    batch, heads, n, head_dim = q.shape
    group = heads // keys.shape[1]
    if group > 1 and n > 1:  # one query row per head broadcasts as it is
        visible = visible.unsqueeze(2).expand(-1, -1, group, -1, -1).reshape(visible.shape[0], 1, group * n, -1)
    out = F.scaled_dot_product_attention(q.reshape(batch, keys.shape[1], group * n, head_dim), keys, values,
                                         attn_mask=visible, scale=scale)
    return out.reshape(batch, heads, n, head_dim)


def written_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor,
                      scale: float) -> torch.Tensor:
    """Attention written out as transformers' eager attention computes it: q (batch, heads, n, d) against keys
    and values (batch, kv_heads, L, d) where `visible` (batch or 1, 1, n, L) allows, softmax in float32:
    (batch, heads, n, d).

    The article's eager row on the fast backend. Compiled, it is no library kernel but inductor's own: at
    one query row each product is a matrix-vector one, which inductor writes as a multiply-and-reduce over
    the cache, fused with the softmax and the rotary of q around it (five kernels a layer on the 1B shape).
    Each kv head is read through a broadcast view, never repeated. No speed lever: alone it took longer
    than flash-attn's decode kernel at every length measured (results/h100/2026-12-07-fixed-kernels-default/).
    """
    batch, heads, n, head_dim = q.shape
    kv_heads, length = keys.shape[1], keys.shape[2]
    group = heads // kv_heads
    keys = keys[:, :, None].expand(batch, kv_heads, group, length, head_dim).reshape(batch, heads, length, head_dim)
    values = values[:, :, None].expand(batch, kv_heads, group, length, head_dim).reshape(batch, heads, length, head_dim)
    scores = torch.matmul(q, keys.transpose(2, 3)) * scale
    scores = scores.masked_fill(~visible, float("-inf"))
    return torch.matmul(scores.softmax(dim=-1, dtype=torch.float32).to(q.dtype), values)


def uses_written_attention(config) -> bool:
    return config._attn_implementation == "eager"


def attention_over_cache(config):
    """The function that attends over a masked cache for a model loaded as `config` says (not flash-attn)."""
    return written_attention if uses_written_attention(config) else masked_attention


def attend_prefill(attn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: LayerKV,
                   visible: torch.Tensor | None = None) -> torch.Tensor:
    """Store the prompt's k/v at positions [0, seq) and attend causally within the prompt, or where `visible`
    (batch or 1, 1, seq, seq; `prompt_mask`) says: (batch, heads, seq, d)."""
    seq = q.shape[2]
    kv.keys[:, :, :seq] = k
    kv.values[:, :, :seq] = v
    if uses_flash_attn(attn.config):
        return fa2_prefill(q, k, v, attn.scaling).transpose(1, 2)
    if uses_written_attention(attn.config):  # `visible` given (`prompt_mask`): it takes no causal flag
        return written_attention(q, k, v, visible, attn.scaling)
    if visible is not None:
        return masked_attention(q, k, v, visible, attn.scaling)
    gqa = {"enable_gqa": True} if attn.num_key_value_groups > 1 else {}
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=attn.scaling, **gqa)


def padded_prompt_mask(state: StaticState, seq: int) -> torch.Tensor:
    """(batch, 1, seq, seq) bool: causal attention within each row's own prompt.

    A padding column sees only itself: a row with nothing visible would give NaN, which its k/v
    would carry into the cache, and masked-out slots still enter the product (0 * NaN is NaN).
    """
    columns = torch.arange(seq, device=state.start.device)
    in_prompt = columns[None, None, :] >= state.start[:, None, None]  # (batch, 1, key)
    itself = columns[None, :] == columns[:, None]
    return ((causal_mask(seq, state.start.device) & in_prompt) | itself)[:, None]


def causal_mask(seq: int, device: torch.device) -> torch.Tensor:
    """(seq, seq) bool, (query, key): each prompt position sees itself and those before it."""
    columns = torch.arange(seq, device=device)
    return columns[None, :] <= columns[:, None]


def prompt_mask(model, state: StaticState, seq: int) -> torch.Tensor | None:
    """What prefill's attention is masked with, built once for every layer: each left-padded row's own prompt,
    else plain causal for attention written out, else None (the kernels' own causal flag)."""
    if state.padded:
        return padded_prompt_mask(state, seq)
    return causal_mask(seq, state.pos.device)[None, None] if uses_written_attention(model.config) else None


def rope_at(state: StaticState, columns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin for the tokens at cache `columns` (n,): (n, d), or (batch, 1, n, d) when rows are left-padded,
    each row counting positions from its first prompt column, as transformers does from the attention mask."""
    if not state.padded:
        return state.cos.index_select(0, columns), state.sin.index_select(0, columns)
    positions = (columns[None, :] - state.start[:, None]).clamp(min=0)  # padding columns take position 0
    return state.cos[positions][:, None], state.sin[positions][:, None]


def attend_decode_sdpa(attn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: LayerKV, pos: torch.Tensor,
                       visible: torch.Tensor) -> torch.Tensor:
    """Store one token's k/v at `pos` (1,) and attend to the cache where `visible`: (batch, heads, 1, d)."""
    kv.keys.index_copy_(2, pos, k)
    kv.values.index_copy_(2, pos, v)
    return attention_over_cache(attn.config)(q, kv.keys, kv.values, visible, attn.scaling)


def attend_decode_flash(attn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: LayerKV, pos: torch.Tensor,
                        filled: torch.Tensor) -> torch.Tensor:
    """Store one token's k/v at `pos` (1,) and attend to the first `filled` (batch,) positions: (batch, heads, 1, d)."""
    kv.keys.index_copy_(2, pos, k)
    kv.values.index_copy_(2, pos, v)
    return fa2_decode(q, kv.keys, kv.values, filled, attn.scaling).transpose(1, 2)


def decode_attention(model, state: StaticState, pos: torch.Tensor):
    """The decode step's attention for every layer, with what the layers share computed once per step."""
    if uses_flash_attn(model.config):
        filled = (pos + 1).to(torch.int32).repeat(state.batch)  # (batch,): every row is at the same position
        return functools.partial(attend_decode_flash, pos=pos, filled=filled)
    columns = torch.arange(state.cache_len, device=pos.device)
    visible = columns <= pos
    if state.padded:  # each row's own prompt and output: (batch, cache_len)
        visible = visible & (columns >= state.start[:, None])
    return functools.partial(attend_decode_sdpa, pos=pos, visible=visible.view(-1, 1, 1, state.cache_len))


def normed_input(norm, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """norm(x), written to memory first when `weight` is quantized.

    Inductor fuses the RMS norm into the matmul that reads it, so every thread block recomputes
    the norm over the whole hidden width. With bf16 weights that costs little; with int8 weights
    (torchao's weight-only matmul, compiled) the fused norm-and-matmul kernel ran at a fraction of
    the bandwidth the same matmul reached on a written input (benchmarks/quant_matmul.py, H200).
    """
    return materialize(norm(x)) if is_quantized(weight) else norm(x)


def attend_chunk_sdpa(attn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: LayerKV, positions: torch.Tensor,
                      visible: torch.Tensor) -> torch.Tensor:
    """Store n tokens' k/v at `positions` (n,) and attend to the cache where `visible` (1, 1, n, cache_len)."""
    kv.keys.index_copy_(2, positions, k)
    kv.values.index_copy_(2, positions, v)
    return attention_over_cache(attn.config)(q, kv.keys, kv.values, visible, attn.scaling)


def chunk_attention(model, state: StaticState, positions: torch.Tensor):
    """Attention for n consecutive tokens at `positions` (n,), each seeing the cache up to its own position."""
    if uses_flash_attn(model.config):  # flash-attn aligns a causal mask to the end of the filled cache
        filled = (positions[-1:] + 1).to(torch.int32).repeat(state.batch)
        return functools.partial(attend_decode_flash, pos=positions, filled=filled)
    cache_positions = torch.arange(state.cache_len, device=positions.device)
    visible = (cache_positions[None, :] <= positions[:, None]).view(1, 1, positions.shape[0], state.cache_len)
    return functools.partial(attend_chunk_sdpa, positions=positions, visible=visible)


def decoder_layer(layer, fused: FusedLayer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  attend) -> torch.Tensor:
    """One pre-norm block: x + attention(norm(x)), then + mlp(norm(x)). x (batch, seq, hidden)."""
    attn, mlp = layer.self_attn, layer.mlp
    q, k, v = project_qkv(attn, fused, normed_input(layer.input_layernorm, x, fused.qkv.weight), cos, sin)
    out = attend(attn, q, k, v)  # (batch, heads, seq, d)
    x = x + attn.o_proj(out.transpose(1, 2).reshape(*x.shape[:2], -1))
    gate, up = fused.gate_up(normed_input(layer.post_attention_layernorm, x, fused.gate_up.weight))
    return x + mlp.down_proj(materialize(mlp.act_fn(gate) * up))


def last_logits(model, x: torch.Tensor) -> torch.Tensor:
    """Final norm and head on the last position only: (batch, vocab) float32, as generate upcasts them."""
    return model.lm_head(normed_input(model.model.norm, x[:, -1:], model.lm_head.weight))[:, -1].float()


def argmax_rows(x: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """`torch.argmax(x, dim=-1)` for x (batch, n), computed in two stages: each chunk's max, then the best chunk.

    At batch 1 a plain argmax over the vocabulary is one row, which a compiled step reduces in one
    thread block: measured on the H200 (Llama-3.2-1B shape, 128k vocabulary) that block took about
    24 µs of a 1.2 ms step. Chunks spread the read over hundreds of blocks. The index is the
    same as argmax's, ties included: the first chunk holding the maximum, and its first maximum.
    """
    batch, n = x.shape
    chunk = math.gcd(n, chunk)
    if chunk < 32:  # a vocabulary with no useful power-of-two factor: one stage
        return torch.argmax(x, dim=-1)
    best, local = x.reshape(batch, n // chunk, chunk).max(dim=-1)
    which = best.argmax(dim=-1, keepdim=True)
    return (which * chunk + local.gather(1, which)).squeeze(-1)


def select_token(logits: torch.Tensor, pos: torch.Tensor, state: StaticState, sample: bool) -> torch.Tensor:
    """Next ids (batch,) from logits (batch, vocab) computed at input position `pos` (1,).

    EOS is masked while `pos < eos_until` (min_new_tokens, as transformers does); sampling uses the
    exponential-race form of multinomial (argmax of p / Exp(1)), which needs no host sync and runs
    inside a CUDA graph. Rows that already ended get the pad id.
    """
    logits = logits.masked_fill(state.eos_mask & (pos < state.eos_until), float("-inf"))
    if sample:
        probs = torch.softmax(logits / state.temperature, dim=-1)
        token = argmax_rows(probs / torch.empty_like(probs).exponential_(1))
    else:
        token = argmax_rows(logits)
    token = torch.where(state.finished, state.pad_id, token)
    state.finished |= state.eos_mask[token]
    return token


def run_layers(model, state: StaticState, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               attend) -> torch.Tensor:
    """All decoder layers, each attending with `attend` over its own slice of the cache."""
    for layer, fused, kv in zip(model.model.layers[: model.config.num_hidden_layers], fused_layers(model),
                                state.layers):
        x = decoder_layer(layer, fused, x, cos, sin, functools.partial(attend, kv=kv))
    return x


def prefill(model, state: StaticState, input_ids: torch.Tensor, sample: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Fill the cache with the prompt (batch, seq) and pick the first new token.

    Returns (token (batch,), logits (batch, vocab)); leaves `state.pos` at seq, where the first
    decode step reads that token.
    """
    seq = input_ids.shape[1]
    state.tokens[:, :seq] = input_ids
    cos, sin = rope_at(state, torch.arange(seq, device=state.pos.device))
    attend = functools.partial(attend_prefill, visible=prompt_mask(model, state, seq))
    x = run_layers(model, state, model.model.embed_tokens(input_ids), cos, sin, attend)
    logits = last_logits(model, x)
    last = state.pos.new_full((1,), seq - 1)  # a tensor, so a compiled prefill stays generic in seq
    token = select_token(logits, last, state, sample)
    state.tokens.index_copy_(1, last + 1, token[:, None])
    state.pos.copy_(last + 1)
    return token, logits


def decode_one_token(model, state: StaticState, sample: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step, entirely on device: read the token at `state.pos`, write the next at pos + 1.

    Returns (token (batch,), logits (batch, vocab)) and advances `state.pos` by one. Every tensor it
    touches lives in `state` or the model, so a CUDA graph of it needs no input copies.
    """
    pos = state.pos
    token = state.tokens.index_select(1, pos)  # (batch, 1)
    cos, sin = rope_at(state, pos)
    x = run_layers(model, state, model.model.embed_tokens(token), cos, sin, decode_attention(model, state, pos))
    logits = last_logits(model, x)
    next_token = select_token(logits, pos, state, sample)
    state.tokens.index_copy_(1, pos + 1, next_token[:, None])
    state.pos.add_(1)
    return next_token, logits


def forward_chunk(model, state: StaticState, n: int) -> torch.Tensor:
    """Run the n tokens at positions pos..pos+n-1 of `state.tokens` through the model, writing their k/v.

    Returns logits (batch, n, vocab) float32: row i predicts the token at pos + i + 1. Leaves `state.pos`
    alone: a speculative step verifies n - 1 drafts at once, then moves pos past the accepted ones.
    """
    positions = state.pos + torch.arange(n, device=state.pos.device)
    tokens = state.tokens.index_select(1, positions)  # (batch, n)
    cos, sin = rope_at(state, positions)
    x = run_layers(model, state, model.model.embed_tokens(tokens), cos, sin, chunk_attention(model, state, positions))
    return model.lm_head(normed_input(model.model.norm, x, model.lm_head.weight)).float()
