"""The transformers backend: `model.generate` as shipped, with transformers' own caches and torch.compile."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from transformers import CompileConfig

from playground.backends.request import generate_kwargs
from playground.config import RunConfig
from playground.loader import LoadedModel


def unsupported(config: RunConfig, lm: LoadedModel, total_tokens: int) -> str | None:
    return None  # generate runs whatever transformers loaded


def generate(config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int, streamer,
             stopping_criteria: Sequence) -> Any:
    kwargs = generate_kwargs(config, lm, input_ids, new_tokens)
    kwargs.update(use_cache=config.use_cache, return_dict_in_generate=True, streamer=streamer,
                  stopping_criteria=stopping_criteria)
    if config.cache_impl_effective == "static":
        kwargs["cache_implementation"] = "static"
    kwargs.update(_speculation(config, lm))
    if config.compile == "off":
        kwargs["disable_compile"] = True  # transformers would otherwise compile decode with a static cache
    else:
        compile_config = CompileConfig(mode=config.compile, fullgraph=False)
        compile_config._compile_all_devices = True  # let CPU users see compile too
        kwargs["compile_config"] = compile_config
    return lm.model.generate(**kwargs)


def _speculation(config: RunConfig, lm: LoadedModel) -> dict[str, Any]:
    """transformers' own arguments for the configured method, drafting exactly `draft_tokens` per step.

    The assisted-generation candidate generator reads its draft length, schedule and confidence threshold
    from the draft model's generation config, not from `generate`'s arguments; they are set there on every
    call: a constant schedule (the default "heuristic" one changes the length between steps and keeps it
    for the next call) and no confidence threshold (which would end a draft early).
    """
    if config.spec == "prompt_lookup":
        return {"prompt_lookup_num_tokens": config.draft_tokens}
    if config.spec == "draft":
        lm.draft.model.generation_config.update(num_assistant_tokens=config.draft_tokens,
                                                num_assistant_tokens_schedule="constant",
                                                assistant_confidence_threshold=0.0)
        return {"assistant_model": lm.draft.model}
    return {}


def kv_cache_bytes(output: Any) -> int:
    """Bytes held by a transformers cache (keys, values and any other per-layer state)."""
    cache = output.past_key_values
    if cache is None:
        return 0
    return sum(v.numel() * v.element_size() for layer in getattr(cache, "layers", [])
               for v in vars(layer).values() if isinstance(v, torch.Tensor))


def compiled(config: RunConfig, lm: LoadedModel) -> str:
    if config.compile == "off" or getattr(lm.model, "_compiled_call", None) is None:
        return ""
    return (f"decode step: torch.compile(model.__call__, mode={config.compile}) by transformers generate; "
            "prefill runs eager")


def speculation(output: Any) -> None:
    return None  # the engine's hooks count the target's forward passes and time the draft's
