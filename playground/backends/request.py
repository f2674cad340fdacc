"""The `generate()` arguments every backend takes from a run's configuration: prompt, length, sampling, padding.

A batch of uneven prompts is left-padded to the longest, so every row's next token lands in the same last
column; the attention mask that hides the padding is a function of the configuration and the batch's width
(`row_lengths`), so the engine that builds the batch and the backend that runs it cannot disagree.
"""

from __future__ import annotations

from typing import Any

import torch

from playground.config import RunConfig
from playground.loader import LoadedModel


def row_lengths(width: int, batch_size: int, spread_pct: int) -> list[int]:
    """Each row's real prompt tokens: row 0 the whole `width`, then evenly shorter down to
    (100 - spread_pct)% of it for the last row, at least one token each."""
    if batch_size == 1:
        return [width]
    return [max(1, round(width * (1 - spread_pct / 100 * i / (batch_size - 1)))) for i in range(batch_size)]


def pad_token_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def padded_batch(config: RunConfig, ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(batch, n) from one (1, n) prompt: row i is its first `row_lengths(...)[i]` tokens, left-padded with `pad_id`."""
    width = ids.shape[1]
    batch = ids.repeat(config.batch_size, 1)
    for row, length in enumerate(row_lengths(width, config.batch_size, config.length_spread_pct)):
        batch[row] = torch.cat([torch.full((width - length,), pad_id, dtype=ids.dtype), ids[0, :length]])
    return batch


def attention_mask(config: RunConfig, input_ids: torch.Tensor) -> torch.Tensor:
    """(batch, n): 0 over each row's left padding, 1 over its prompt."""
    batch, width = input_ids.shape
    lengths = torch.tensor(row_lengths(width, batch, config.length_spread_pct), device=input_ids.device)
    return (torch.arange(width, device=input_ids.device) >= width - lengths[:, None]).to(torch.long)


def generate_kwargs(config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int) -> dict[str, Any]:
    tok = lm.tokenizer
    kwargs: dict[str, Any] = dict(
        input_ids=input_ids,
        attention_mask=attention_mask(config, input_ids),
        max_new_tokens=new_tokens,
        do_sample=not config.greedy,
        pad_token_id=pad_token_id(tok),
    )
    if config.mode == "benchmark":
        kwargs["min_new_tokens"] = new_tokens  # EOS cannot end a benchmark run early
    if not config.greedy:
        kwargs.update(temperature=config.temperature, top_k=0, top_p=1.0)
    else:
        kwargs.update(temperature=None, top_k=None, top_p=None)
    return kwargs
