"""Static decode state: every tensor a decode step reads or writes, allocated once per shape.

A CUDA graph replays fixed addresses, so the KV cache, the token buffer, the position counter and
the sampling settings all live in tensors allocated here once per (batch, length, padded, dtype,
device) and updated in place. A step then has no inputs that change between calls: nothing is copied
into the graph before a replay. Compiled functions are kept with the state they were traced on,
so a new shape never replays a graph that points at freed memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

CACHE_LEN_MULTIPLE = 256  # cache lengths are rounded up to this, so nearby lengths share one graph


@dataclass
class LayerKV:
    keys: torch.Tensor  # (batch, kv_heads, cache_len, head_dim), model dtype
    values: torch.Tensor  # (batch, kv_heads, cache_len, head_dim)


@dataclass
class StaticState:
    layers: list[LayerKV]
    tokens: torch.Tensor  # (batch, cache_len) int64: prompt, then generated ids; a step reads its input here
    pos: torch.Tensor  # (1,) int64: position of the token the next decode step reads
    cos: torch.Tensor  # (cache_len, head_dim) model dtype: the model's own rotary table
    sin: torch.Tensor  # (cache_len, head_dim)
    eos_mask: torch.Tensor  # (vocab,) bool: True at EOS ids
    eos_until: torch.Tensor  # (1,) int64: EOS is suppressed while the input position is below this
    pad_id: torch.Tensor  # (1,) int64: written to rows that already ended
    finished: torch.Tensor  # (batch,) bool: rows that produced EOS
    temperature: torch.Tensor  # (1,) float32
    start: torch.Tensor  # (batch,) int64: each row's first prompt column; left padding fills the columns before it
    padded: bool = False  # rows may start after column 0: positions and masks are per row (a separate graph)
    compiled: dict[tuple, tuple[Callable, Callable]] = field(default_factory=dict)  # (mode, sdpa) -> (prefill, step)

    @property
    def batch(self) -> int:
        return self.tokens.shape[0]

    @property
    def cache_len(self) -> int:
        return self.tokens.shape[1]

    @property
    def kv_cache_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for kv in self.layers for t in (kv.keys, kv.values))

    def __getstate__(self) -> dict:
        """Pickled without the steps compiled for it: a step saved ahead of time (playground.fast.precompile)
        pickles the state it was traced on, and another saved step held here cannot be pickled."""
        return {**self.__dict__, "compiled": {}}

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor, in the order `from_tensors` reads them back."""
        fixed = [self.tokens, self.pos, self.cos, self.sin, self.eos_mask, self.eos_until, self.pad_id,
                 self.finished, self.temperature, self.start]
        return fixed + [t for kv in self.layers for t in (kv.keys, kv.values)]

    @classmethod
    def from_tensors(cls, tensors, padded: bool = False) -> StaticState:
        """A state over `tensors()`'s list (no copies): how an exported step takes its state as inputs."""
        fixed, kv = tensors[:10], tensors[10:]
        return cls([LayerKV(kv[i], kv[i + 1]) for i in range(0, len(kv), 2)], *fixed, padded=padded)


def cache_len_for(total_tokens: int, max_positions: int | None, multiple: int = CACHE_LEN_MULTIPLE) -> int:
    """`total_tokens` rounded up to `multiple`, but never past the model's context unless it must."""
    rounded = -(-total_tokens // multiple) * multiple
    if max_positions is None:
        return rounded
    return max(total_tokens, min(rounded, max_positions))


def rotary_table(model, cache_len: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (cache_len, head_dim) from the model's own rotary module, so llama3 scaling is its own."""
    positions = torch.arange(cache_len, device=device)[None]  # (1, cache_len)
    like = torch.empty(0, dtype=dtype, device=device)  # the module reads only dtype and device from it
    cos, sin = model.model.rotary_emb(like, positions)
    return cos[0].contiguous(), sin[0].contiguous()


def allocate(model, batch: int, cache_len: int, padded: bool = False) -> StaticState:
    config = model.config
    weight = model.model.embed_tokens.weight
    dtype, device = weight.dtype, weight.device
    head_dim = model.model.layers[0].self_attn.head_dim
    kv_shape = (batch, config.num_key_value_heads, cache_len, head_dim)
    # zeros, not empty: masked-out slots still enter the attention product (0 * NaN would be NaN)
    zeros = lambda: torch.zeros(kv_shape, dtype=dtype, device=device)  # noqa: E731
    layers = [LayerKV(zeros(), zeros()) for _ in range(config.num_hidden_layers)]
    cos, sin = rotary_table(model, cache_len, dtype, device)
    return StaticState(
        layers=layers,
        tokens=torch.zeros((batch, cache_len), dtype=torch.long, device=device),
        pos=torch.zeros(1, dtype=torch.long, device=device),
        cos=cos, sin=sin,
        eos_mask=torch.zeros(config.vocab_size, dtype=torch.bool, device=device),
        eos_until=torch.zeros(1, dtype=torch.long, device=device),
        pad_id=torch.zeros(1, dtype=torch.long, device=device),
        finished=torch.zeros(batch, dtype=torch.bool, device=device),
        temperature=torch.ones(1, dtype=torch.float32, device=device),
        start=torch.zeros(batch, dtype=torch.long, device=device),
        padded=padded,
    )


class StateCache:
    """The one static state of a model, kept while runs keep the same (batch, cache_len, padded, dtype, device).

    One shape at a time, like the engine holds one model: a new shape frees the old cache and its
    compiled graphs before allocating, so GPU memory never holds two caches.
    """

    def __init__(self) -> None:
        self.state: StaticState | None = None
        self.key: tuple | None = None

    def get(self, model, batch: int, cache_len: int, padded: bool = False) -> tuple[StaticState, bool]:
        """Return (state, reused)."""
        weight = model.model.embed_tokens.weight
        key = (batch, cache_len, padded, weight.dtype, weight.device)
        if self.state is not None and self.key == key:
            return self.state, True
        self.state = self.key = None
        self.state, self.key = allocate(model, batch, cache_len, padded), key
        return self.state, False


def state_cache(model) -> StateCache:
    """The model's StateCache, kept on the model object so it lives and dies with the weights."""
    cache = model.__dict__.get("_playground_fast_states")
    if cache is None:
        cache = model.__dict__["_playground_fast_states"] = StateCache()
    return cache
