"""Fast backend against transformers' best configuration, on one loaded model, in one process.

Batch-1 decode is bound by memory bandwidth: each token reads every weight and the KV cache once,
so bandwidth / (weight + KV bytes) is the ceiling on tok/s. Transformers with a static cache and
torch.compile (reduce-overhead) reaches about half of it on an H200; the fast backend replays one
CUDA graph per token over the same weights. Both run here side by side, on the same model object
and the same prompt, and the table gives decode tok/s, % of that roofline, cold start
(compile + graph capture: first call's end-to-end time minus the steady mean), the ratio
fast / transformers and whether greedy ids agree (else the first differing position).

Timing is the engine's: a device synchronize before every clock read (in the streamer, once
before prefill and once per token), decode tok/s = (n - 1) / (t_last - t_first).

    python -m benchmarks.fast_decode --model llama-3.1-8b-shape,llama-3.2-1b-shape   # CUDA: bf16, compiled
    python -m benchmarks.fast_decode --dtype bf16,fp32     # fp32 row: greedy ids should agree exactly
    python -m benchmarks.fast_decode                       # CPU: tiny preset, fp32, no compile (a smoke test)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field

import torch
from transformers.generation.streamers import BaseStreamer

from playground.config import RunConfig
from playground.engine import _prompt_ids, _sdpa_context, run
from playground.fast import fast_generate, unsupported_reason
from playground.hardware import memory_bandwidth_gb_s, synchronize
from playground.loader import MODELS
from playground.metrics import PassTiming, first_difference, summarize
from playground.record import environment


class Clock(BaseStreamer):
    """Synchronize, then read the clock: once for the prompt (prefill starts), then once per token."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.prefill_start: float | None = None
        self.times: list[float] = []

    def put(self, value: torch.Tensor) -> None:
        synchronize(self.device)
        now = time.perf_counter()
        if self.prefill_start is None:
            self.prefill_start = now
        else:
            self.times.append(now)

    def end(self) -> None:
        pass


@dataclass
class Row:
    model: str
    backend: str  # "transformers" or "fast"
    dtype: str
    attn: str
    decode_tok_s: float | None = None
    decode_tok_s_std: float | None = None
    roofline_pct: float | None = None
    cold_start_s: float | None = None
    ratio: float | None = None
    ids_match: str = ""
    note: str = ""
    ids: list[int] = field(default_factory=list, repr=False)


def fast_pass(lm, input_ids: torch.Tensor, new_tokens: int, compile_mode: str, sdpa: str | None, compile_prefill: bool):
    """One fast_generate call timed like an engine pass; returns (PassTiming, output)."""
    clock = Clock(lm.device)
    with _sdpa_context(sdpa):
        synchronize(lm.device)
        start = time.perf_counter()
        out = fast_generate(lm.model, input_ids=input_ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                            streamer=clock, compile_mode=compile_mode, compile_prefill=compile_prefill)
        synchronize(lm.device)
    return PassTiming(clock.prefill_start, tuple(clock.times), time.perf_counter(), start), out


def measure_transformers(config: RunConfig) -> Row:
    record = run(config)
    row = Row(config.model, "transformers", record.dtype_effective or config.dtype, config.attn)
    if record.status != "ok":
        row.note = f"{record.status}: {record.reason}"
        return row
    row.decode_tok_s, row.decode_tok_s_std = record.decode_tok_s, record.decode_tok_s_std
    row.roofline_pct, row.cold_start_s, row.ids = record.bandwidth_roofline_pct, record.compile_s, record.output_ids
    row.note = f"static cache, compile={config.compile}"
    return row


def measure_fast(config: RunConfig, sdpa: str | None, compile_prefill: bool) -> Row:
    lm, _ = MODELS.get(config.model, config.device, config.dtype, config.transformers_attn)
    row = Row(config.model, "fast", config.dtype, f"sdpa:{sdpa}" if sdpa else "sdpa")
    input_ids = _prompt_ids(config, lm)  # the engine's synthetic prompt for this seed: the same ids
    reason = unsupported_reason(lm.model, total_tokens=input_ids.shape[1] + config.new_tokens,
                                compile_mode=config.compile)
    if reason:
        row.note = f"refused: {reason}"
        return row
    passes = [fast_pass(lm, input_ids, config.new_tokens, config.compile, sdpa, compile_prefill)
              for _ in range(1 + config.repeats)]
    cold, steady = passes[0][0], passes[1:]
    decode = summarize([timing.decode_tok_s for timing, _ in steady])
    row.decode_tok_s, row.decode_tok_s_std = decode.mean, decode.std
    out = steady[-1][1]
    row.ids = out.sequences[0, input_ids.shape[1]:].tolist()
    if config.compile != "off":
        row.cold_start_s = max(0.0, cold.e2e_ms - summarize([t.e2e_ms for t, _ in steady]).mean) / 1e3
    bandwidth = memory_bandwidth_gb_s() if lm.device == "cuda" else None
    if bandwidth:
        roofline_tok_s = bandwidth * 1e9 / (lm.param_bytes + out.kv_cache_bytes)
        row.roofline_pct = 100 * row.decode_tok_s / roofline_tok_s
    prefill = "compiled" if compile_prefill and config.compile != "off" else "eager"
    row.note = f"compile={config.compile}, prefill {prefill}, cache {out.past_key_values.cache_len} positions"
    return row


def compare(base: Row, fast: Row) -> None:
    if base.decode_tok_s and fast.decode_tok_s:
        fast.ratio = fast.decode_tok_s / base.decode_tok_s
    if base.ids and fast.ids:
        diff = first_difference(base.ids, fast.ids)
        fast.ids_match = "yes" if diff is None else f"no, from token {diff}"


def fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def print_table(rows: list[Row]) -> None:
    print("| model | backend | dtype | attn | decode tok/s | % of bandwidth roofline | cold start s | "
          "fast / transformers | greedy ids match | note |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tok_s = f"{fmt(r.decode_tok_s, '.1f')} ± {fmt(r.decode_tok_s_std, '.1f')}" if r.decode_tok_s else ""
        print(f"| {r.model} | {r.backend} | {r.dtype} | {r.attn} | {tok_s} | {fmt(r.roofline_pct, '.0f')} | "
              f"{fmt(r.cold_start_s, '.1f')} | {fmt(r.ratio, '.2f')} | {r.ids_match} | {r.note} |", flush=True)


def main() -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b-shape" if cuda else "tiny-random-llama",
                        help="comma-separated presets or model ids")
    parser.add_argument("--dtype", default="bf16" if cuda else "fp32", help="comma-separated: bf16, fp16, fp32")
    parser.add_argument("--compile", default="reduce-overhead" if cuda else "off")
    parser.add_argument("--fast-sdpa", default="auto",
                        help="comma-separated SDPA backends for the fast decoder: auto (torch chooses), flash, "
                             "efficient, cudnn, math (gpt-fast decodes with math, which inductor fuses)")
    parser.add_argument("--eager-prefill", action="store_true", help="compile only the decode step")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="also write the rows and the environment as JSON here")
    args = parser.parse_args()
    device = "cuda" if cuda else "cpu"
    rows: list[Row] = []
    for model in args.model.split(","):
        for dtype in args.dtype.split(","):
            config = RunConfig(model=model, device=device, dtype=dtype, attn="sdpa", cache_impl="static",
                               compile=args.compile, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                               repeats=args.repeats, warmup=1, profile_kernels=False)
            base = measure_transformers(config)
            rows.append(base)
            for sdpa in args.fast_sdpa.split(","):
                fast = measure_fast(config, None if sdpa == "auto" else sdpa, not args.eager_prefill)
                compare(base, fast)
                rows.append(fast)
    print_table(rows)
    print(f"\nbatch 1, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, greedy, EOS off; "
          f"mean ± std of {args.repeats} repeats after one cold call; device {device}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"rows": [vars(r) for r in rows], "env": environment(), "args": vars(args)}, f, indent=1)


if __name__ == "__main__":
    main()
