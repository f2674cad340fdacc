"""The fast backend: the loaded model's own weights through `playground.fast`'s static-cache decoder."""

from __future__ import annotations

from typing import Sequence

import torch

from playground.backends.request import generate_kwargs
from playground.config import RunConfig
from playground.fast import FastOutput, fast_generate, unsupported_reason
from playground.loader import LoadedModel


def unsupported(config: RunConfig, lm: LoadedModel, total_tokens: int) -> str | None:
    return unsupported_reason(lm.model, total_tokens=total_tokens, compile_mode=config.compile)


def generate(config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int, streamer,
             stopping_criteria: Sequence) -> FastOutput:
    return fast_generate(lm.model, **generate_kwargs(config, lm, input_ids, new_tokens), streamer=streamer,
                         stopping_criteria=stopping_criteria, compile_mode=config.compile)


def kv_cache_bytes(output: FastOutput) -> int:
    return output.kv_cache_bytes  # the whole static allocation


def compiled(config: RunConfig, lm: LoadedModel) -> str:
    if config.compile == "off":
        return ""
    return (f"decode step: torch.compile(decode_one_token, mode={config.compile}, fullgraph=True) by the fast "
            "backend, replayed as one CUDA graph per token; prefill compiled with dynamic shapes")
