"""gpt-fast's own batch-1 decode on a random-weight preset shape: the anchor row beside the fast backend.

pytorch-labs/gpt-fast's published model.py and generate.py are loaded from a folder (`--gpt-fast DIR`; nothing of
them is copied here) and run as its generate.py's main() runs them: random weights of the preset's exact shape,
`generate()` at batch 1 with prefill eager and `decode_one_token` compiled with mode="reduce-overhead" and
fullgraph=True, inside its `decode_n_tokens` loop (math SDPA over the whole allocated cache, which inductor fuses),
under the inductor settings its generate.py sets on import. Which is why it runs in a process of its own:
`benchmarks.fast_decode --gpt-fast DIR` starts one per model, with compile caches of its own.

Changed for a timing comparison, nothing else: its top-k `sample()` becomes the greedy argmax the fast backend
decodes with (the last position's logits stand in for the probabilities it returns); a torch without
`torch.backends.cuda.sdp_kernel` gets that context through `torch.nn.attention.sdpa_kernel`; and where
sentencepiece or tiktoken is missing, its tokenizer module is left out (the prompt is random ids).

Timing: a device synchronize before each clock read. The first decode token's callback reads the clock once, the
end of `generate()` again, so decode tok/s = (n - 2) / (t_last - t_first_decode) over n new tokens, with no
synchronize between steps (its best case). The first call (compile and graph capture) is reported apart; one
warm-up, then `--repeats`. Prints one JSON object as its last line.

    python -m benchmarks.gpt_fast_anchor --gpt-fast ../shared/anchors/gpt-fast --model llama-3.2-1b-shape   # CUDA
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import statistics
import sys
import time
import types
from pathlib import Path

import torch

from playground import roofline
from playground.hardware import memory_bandwidth_gb_s
from playground.loader import TORCH_DTYPES
from playground.presets import PRESETS, preset_config


def model_args(preset_name: str) -> dict:
    """gpt-fast's ModelArgs for a random-weight Llama preset, read from the preset's own config."""
    preset = PRESETS.get(preset_name)
    if preset is None or not preset.random_weights or preset.model_type != "llama":
        llamas = ", ".join(n for n, p in PRESETS.items() if p.random_weights and p.model_type == "llama")
        raise ValueError(f"gpt-fast runs a random-weight Llama preset ({llamas}), not {preset_name!r}")
    config = preset_config(preset)
    if config.head_dim != config.hidden_size // config.num_attention_heads:
        raise ValueError(f"{preset_name}: head_dim {config.head_dim} is not hidden_size / heads, which gpt-fast assumes")
    rope = config.rope_parameters
    scaling = None
    if rope.get("rope_type") == "llama3":
        scaling = {k: rope[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                        "original_max_position_embeddings")}
    return dict(block_size=config.max_position_embeddings, vocab_size=config.vocab_size,
                n_layer=config.num_hidden_layers, n_head=config.num_attention_heads,
                n_local_heads=config.num_key_value_heads, dim=config.hidden_size,
                intermediate_size=config.intermediate_size, rope_base=rope["rope_theta"],
                norm_eps=config.rms_norm_eps, rope_scaling=scaling)


def greedy(logits: torch.Tensor, **_sampling) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt-fast's `sample()` made greedy: the last position's argmax, its logits returned where probs were."""
    last = logits[:, -1]
    return torch.argmax(last, dim=-1, keepdim=True).to(torch.int), last


def _sdp_kernel(enable_flash: bool = True, enable_mem_efficient: bool = True, enable_math: bool = True,
                enable_cudnn: bool = True) -> contextlib.AbstractContextManager:
    """The removed `torch.backends.cuda.sdp_kernel`, as `torch.nn.attention.sdpa_kernel` takes it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    wanted = {SDPBackend.FLASH_ATTENTION: enable_flash, SDPBackend.EFFICIENT_ATTENTION: enable_mem_efficient,
              SDPBackend.MATH: enable_math, SDPBackend.CUDNN_ATTENTION: enable_cudnn}
    return sdpa_kernel([backend for backend, on in wanted.items() if on])


def load_gpt_fast(folder: str) -> tuple[types.ModuleType, types.ModuleType]:
    """gpt-fast's model and generate modules, imported from `folder`, with greedy sampling."""
    root = Path(folder).resolve()
    missing = [name for name in ("model.py", "generate.py") if not (root / name).is_file()]
    if missing:
        raise FileNotFoundError(f"--gpt-fast {folder}: no {' or '.join(missing)} there (a pytorch-labs/gpt-fast "
                                f"checkout)")
    sys.path.insert(0, str(root))
    try:
        importlib.import_module("tokenizer")
    except ImportError:  # its tokenizer needs sentencepiece and tiktoken; random prompt ids need neither
        sys.modules["tokenizer"] = types.SimpleNamespace(get_tokenizer=None)
    if not hasattr(torch.backends.cuda, "sdp_kernel"):
        torch.backends.cuda.sdp_kernel = _sdp_kernel
    model, generate = importlib.import_module("model"), importlib.import_module("generate")
    generate.sample = greedy
    return model, generate


def step_bytes(model: torch.nn.Module) -> roofline.StepBytes:
    """What a gpt-fast decode step reads: every weight but the input-embedding table (one row of it), and the whole
    allocated KV cache (its attention is masked SDPA over all of it)."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    table = model.tok_embeddings.weight
    weights -= table.numel() * table.element_size() - table.shape[1] * table.element_size()
    kv = sum(b.numel() * b.element_size() for name, b in model.named_buffers() if name.endswith(("k_cache", "v_cache")))
    return roofline.StepBytes(weights, kv, "allocated")


def measure(gpt_fast: tuple[types.ModuleType, types.ModuleType], preset_name: str, dtype: str, compile_: bool,
            prompt_tokens: int, new_tokens: int, repeats: int, device: str) -> dict:
    """A first call, one warm-up and `repeats` timed `generate()` calls of gpt-fast on the preset's shape."""
    if new_tokens < 3:
        raise ValueError("--new-tokens must be at least 3: the rate is timed from the first decode token to the last")
    model_mod, generate = gpt_fast
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(TORCH_DTYPES[dtype])  # built in its dtype: an fp32 8B would not fit beside the parent
    try:
        with torch.device(device):
            model = model_mod.Transformer(model_mod.ModelArgs(**model_args(preset_name))).eval()
    finally:
        torch.set_default_dtype(previous)
    prompt = torch.randint(0, model.config.vocab_size, (prompt_tokens,), device=device)
    if compile_:  # as its main() does
        generate.decode_one_token = torch.compile(generate.decode_one_token, mode="reduce-overhead", fullgraph=True)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def timed_call() -> tuple[float, float, torch.Tensor]:
        """(seconds for the whole call, decode tok/s, the generated ids)."""
        marks: list[float] = []

        def first_decode_token(_token):
            if not marks:
                sync()
                marks.append(time.perf_counter())

        sync()
        start = time.perf_counter()
        seq, _stats = generate.generate(model, prompt, new_tokens, batch_size=1, interactive=False,
                                        draft_model=None, callback=first_decode_token)
        sync()
        end = time.perf_counter()
        return end - start, (new_tokens - 2) / (end - marks[0]), seq[0, prompt_tokens:]

    first_call_s, _, _ = timed_call()
    timed_call()  # warm-up
    rates, ids = [], None
    for _ in range(repeats):
        _, rate, ids = timed_call()
        rates.append(rate)
    bandwidth = memory_bandwidth_gb_s()
    mean = statistics.fmean(rates)
    return {"decode_tok_s": mean, "decode_tok_s_std": statistics.pstdev(rates), "first_call_s": first_call_s,
            "roofline_pct": 100 * mean / roofline.roofline_tok_s(bandwidth, step_bytes(model)) if bandwidth else None,
            "ids": ids.tolist(), "compiled": compile_}


def main() -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt-fast", required=True, metavar="DIR", help="a pytorch-labs/gpt-fast checkout")
    parser.add_argument("--model", default="llama-3.2-1b-shape" if cuda else "tiny-random-llama")
    parser.add_argument("--dtype", choices=sorted(TORCH_DTYPES), default="bf16" if cuda else "fp32")
    parser.add_argument("--compile", choices=("reduce-overhead", "off"), default="reduce-overhead" if cuda else "off")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        gpt_fast = load_gpt_fast(args.gpt_fast)
        result = measure(gpt_fast, args.model, args.dtype, args.compile != "off", args.prompt_tokens,
                         args.new_tokens, args.repeats, "cuda" if cuda else "cpu")
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
