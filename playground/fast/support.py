"""What the fast backend can run, and why not when it cannot.

The fast decoder re-implements the decoder-layer wiring of Llama, Qwen2 and Mistral around their
own modules; anything outside that wiring would give silently different tokens, so it is refused
here with a reason the engine can show as is.
"""

from __future__ import annotations

from playground.attention import listed, loads_for, taken_by
from playground.config import AOT
from playground.fast.forward import uses_flash_attn
from playground.fast.fuse import fusable_reason

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")
ROPE_TYPES = ("default", "llama3")  # both are a fixed inv_freq table: the model's rotary module computes it
DEVICE_TYPES = ("cpu", "cuda")


def _architecture_reason(model) -> str | None:
    name = type(model).__name__
    if name not in SUPPORTED_ARCHITECTURES:
        return f"the fast backend runs {', '.join(SUPPORTED_ARCHITECTURES)}; {name} is not one of them"
    return None


def _attention_reason(model) -> str | None:
    """The model's attention as loaded (a forced SDPA backend loads plain sdpa) must be one the registry gives fast."""
    attn = getattr(model.config, "_attn_implementation", None)
    if attn not in loads_for("fast"):
        return (f"the fast backend computes attention written out (eager), with scaled_dot_product_attention or with "
                f"flash-attn, but the model was loaded with attn_implementation={attn}; load it with "
                f"{listed(taken_by('fast'))}")
    return None


def _rope_reason(model) -> str | None:
    rope = getattr(model.config, "rope_parameters", None) or {}
    rope_type = rope.get("rope_type", "default")
    if rope_type not in ROPE_TYPES:
        return f"rope type {rope_type!r} is not supported by the fast backend (only {', '.join(ROPE_TYPES)})"
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        return "partial rotary embeddings (partial_rotary_factor != 1) are not supported by the fast backend"
    return None


def _sliding_window_reason(model, total_tokens: int | None) -> str | None:
    """A sliding window equals full causal attention while the whole sequence fits in it."""
    config = model.config
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)  # Qwen2 names each layer; Mistral slides in all of them
    if layer_types is not None and set(layer_types) - {"full_attention", "sliding_attention"}:
        return f"layer types {sorted(set(layer_types))} are not supported by the fast backend"
    slides = window is not None and (layer_types is None or "sliding_attention" in layer_types)
    if not slides or total_tokens is None or total_tokens <= window:
        return None
    return (f"sliding-window attention is not implemented in the fast backend: prompt + new tokens = {total_tokens} "
            f"exceeds the model's window of {window} tokens")


def _device_reason(model, compile_mode: str) -> str | None:
    device = next(model.parameters()).device.type
    if device not in DEVICE_TYPES:
        return f"the fast backend runs on {' or '.join(DEVICE_TYPES)}, not {device}"
    if compile_mode not in ("off", AOT) and device != "cuda":
        return (f"compile={compile_mode} with the fast backend needs CUDA (compiling exists to replay CUDA graphs); "
                f"use compile=off or {AOT} on CPU")
    return None


def unsupported_reason(model, *, total_tokens: int | None = None, compile_mode: str = "off") -> str | None:
    """Why the fast backend cannot run `model` (for `total_tokens` = prompt + new, if given), or None.

    `compile_mode` other than "off" needs CUDA: compiling exists to replay CUDA graphs, so CPU
    runs stay eager.
    """
    return (_architecture_reason(model) or _attention_reason(model) or _rope_reason(model)
            or _sliding_window_reason(model, total_tokens) or _device_reason(model, compile_mode)
            or fusable_reason(model))


def padding_reason(model) -> str | None:
    """Why the fast backend cannot run a left-padded batch of `model`, or None.

    flash-attn's decode kernel reads each row's cache from column 0 up to a length, so the padding at
    the front of a row would be attended.
    """
    if uses_flash_attn(model.config):
        return ("a batch of uneven prompts on the fast backend needs attn sdpa: flash-attn's decode kernel reads "
                "each row's cache from its first column, where the left padding sits")
    return None
