"""The fast backend: the loaded model's own weights through `playground.fast`'s static-cache decoder."""

from __future__ import annotations

from typing import Sequence

import torch

from playground.backends import Drafting
from playground.backends.request import generate_kwargs
from playground.config import AOT, RunConfig
from playground.fast import (FastOutput, fast_generate, fixed_kernels_reason, kernel_choice, padding_reason,
                             unsupported_reason)
from playground.fast.speculative import SpeculativeOutput, speculative_generate
from playground.loader import LoadedModel


def unsupported(config: RunConfig, lm: LoadedModel, total_tokens: int) -> str | None:
    uneven = config.batch_size > 1 and config.length_spread_pct > 0
    return (unsupported_reason(lm.model, total_tokens=total_tokens, compile_mode=config.compile)
            or (padding_reason(lm.model) if uneven else None)
            or (fixed_kernels_reason() if config.kernels == "fixed" else None))


def generate(config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int, streamer,
             stopping_criteria: Sequence) -> FastOutput:
    kwargs = generate_kwargs(config, lm, input_ids, new_tokens)
    with kernel_choice(config.kernels):
        if config.spec != "none":
            del kwargs["attention_mask"], kwargs["top_k"], kwargs["top_p"]
            draft = lm.draft.model if config.spec == "draft" else None  # None: prompt lookup
            return speculative_generate(lm.model, draft, **kwargs, draft_tokens=config.draft_tokens,
                                        streamer=streamer, stopping_criteria=stopping_criteria,
                                        compile_mode=config.compile)
        return fast_generate(lm.model, **kwargs, streamer=streamer, stopping_criteria=stopping_criteria,
                             compile_mode=config.compile)


def speculation(output: FastOutput) -> Drafting | None:
    if not isinstance(output, SpeculativeOutput):
        return None
    return Drafting(tuple(output.drafted), output.draft_s, output.draft_calls, output.verify_s)


def kv_cache_bytes(output: FastOutput) -> int:
    return output.kv_cache_bytes  # the whole static allocation


def compiled(config: RunConfig, lm: LoadedModel) -> str:
    if config.compile == "off":
        return ""
    if config.compile == AOT:
        return ("decode step: exported (torch.export) and compiled ahead of time (AOTInductor) by the fast backend, "
                "the package kept in the compile cache; prefill eager")
    kernels = ("; kernels fixed: inductor's deterministic mode, no launch config timed" if config.kernels == "fixed"
               else "; kernels tuned: launch configs timed while compiling (coordinate descent)")
    if config.spec == "prompt_lookup":
        return (f"the target's verify step over {config.draft_tokens + 1} tokens: torch.compile(mode={config.compile}, "
                "fullgraph=True) by the fast backend, replayed as one CUDA graph; prefill eager; lookup on the host"
                + kernels)
    if config.spec == "draft":
        return (f"draft's decode step and the target's verify step over {config.draft_tokens + 1} tokens: "
                f"torch.compile(mode={config.compile}, fullgraph=True) by the fast backend, each replayed as one "
                "CUDA graph; prefills eager" + kernels)
    return (f"decode step: torch.compile(decode_one_token, mode={config.compile}, fullgraph=True) by the fast "
            "backend, replayed as one CUDA graph per token; prefill compiled with dynamic shapes" + kernels)
