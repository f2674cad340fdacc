"""The `generate()` arguments every backend takes from a run's configuration: prompt, length, sampling, padding."""

from __future__ import annotations

from typing import Any

import torch

from playground.config import RunConfig
from playground.loader import LoadedModel


def generate_kwargs(config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int) -> dict[str, Any]:
    tok = lm.tokenizer
    kwargs: dict[str, Any] = dict(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        max_new_tokens=new_tokens,
        do_sample=not config.greedy,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    if config.mode == "benchmark":
        kwargs["min_new_tokens"] = new_tokens  # EOS cannot end a benchmark run early
    if not config.greedy:
        kwargs.update(temperature=config.temperature, top_k=0, top_p=1.0)
    else:
        kwargs.update(temperature=None, top_k=None, top_p=None)
    return kwargs
