"""Re-derive the bandwidth-roofline % of committed H200 records with the bytes a decode step reads.

Records made before `playground.roofline` divided by every parameter byte plus the KV cache held at
the end of the run. The measured tok/s and bandwidth do not change; only the bytes per step do, so
    new % = old % x (bytes read) / (bytes held)
with both byte counts rebuilt from the record's model shape (on the meta device) and settings.
Prints one markdown row per record that has a roofline figure counted the old way (newer records say
which part of the KV cache they counted, `roofline_kv_read`, and are left out).

    python scripts/rederive_roofline.py results/h200 > results/h200/roofline_rederived.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from playground import memory, roofline
from playground.fast.state import cache_len_for
from playground.presets import PRESETS, preset_config


TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def shape_bytes(model_name: str, dtype: str) -> tuple[int, int, int]:
    """(all parameter bytes, bytes a step reads, KV bytes per token) of a preset shape in `dtype`."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(preset_config(PRESETS[model_name]), dtype=TORCH_DTYPES[dtype])
    every = sum(p.numel() * p.element_size() for p in model.parameters())
    return every, roofline.decode_weight_bytes(model), memory.kv_cache_bytes(model.config, 1, 1, dtype)


def rederive(old_pct: float, model: str, dtype: str, backend: str, attn: str, use_cache: bool, cache_impl: str,
             prompt: int, new: int, kv_held: int) -> tuple[float, str]:
    every, read, per_token = shape_bytes(model, dtype)
    kind = roofline.kv_read(use_cache, cache_impl, backend, attn)
    step = roofline.step_bytes(read, kind, per_token, prompt, new, kv_held)
    return old_pct * step.total / (every + kv_held), kind


def bench_rows(path: Path):
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("bandwidth_roofline_pct") is None or r.get("roofline_kv_read"):  # the latter: already bytes read
            continue
        new, kind = rederive(r["bandwidth_roofline_pct"], r["model"], r["dtype_effective"], r.get("backend", "transformers"), r["attn"],
                             r["use_cache"], r["cache_impl"], r["prompt_tokens"], r["tokens_generated"],
                             round(r["kv_cache_mb"] * 2**20))
        yield r["model"], r.get("backend", "transformers"), r["attn"], r["dtype_effective"], r["decode_tok_s"], r["bandwidth_roofline_pct"], new, kind


def fast_decode_rows(path: Path):
    data = json.loads(path.read_text())
    prompt, new_tokens = data["args"]["prompt_tokens"], data["args"]["new_tokens"]
    for r in data["rows"]:
        if r.get("roofline_pct") is None or r.get("roofline_kv_read"):  # the latter: already bytes read
            continue
        # both backends held a static cache of prompt + new tokens (the fast one rounded to its multiple)
        held_tokens = prompt + new_tokens if r["backend"] == "transformers" else cache_len_for(prompt + new_tokens, None)
        per_token = shape_bytes(r["model"], r["dtype"])[2]
        new, kind = rederive(r["roofline_pct"], r["model"], r["dtype"], r["backend"], r["attn"], True, "static", prompt,
                             new_tokens, per_token * held_tokens)
        yield r["model"], r["backend"], r["attn"], r["dtype"], r["decode_tok_s"], r["roofline_pct"], new, kind


def main(root: str) -> None:
    print("| file | model | backend | attn | dtype | decode tok/s | roofline % before | roofline % now | KV read |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in sorted(Path(root).rglob("*.json*")):
        if path.suffix == ".jsonl":
            rows = bench_rows(path)
        elif "rows" in json.loads(path.read_text()):
            rows = fast_decode_rows(path)
        else:
            continue
        for model, backend, attn, dtype, tok_s, old, new, kind in rows:
            print(f"| {path.relative_to(root)} | {model} | {backend} | {attn} | {dtype} | {tok_s:.1f} | {old:.1f} | {new:.1f} | {kind} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/h200")
