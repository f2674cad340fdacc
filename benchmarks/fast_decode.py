"""Fast backend against transformers' best configuration, on the same weights, in one process.

Batch-1 decode is bound by memory bandwidth: each token reads every weight and the KV cache once,
so bandwidth / (weight + KV bytes) is the ceiling on tok/s. Transformers with a static cache and
torch.compile (reduce-overhead) reaches about half of it on an H200; the fast backend replays one
CUDA graph per token over the same weights. Both run here side by side, on the same weights (the
same model object for sdpa rows; a flash_attention_2 row reloads the model with that attention,
and the random-weight presets are seeded, so its weights are the same) and the same prompt, and
the table gives decode tok/s, % of that roofline, cold start (compile + graph capture, the
engine's `compile_s`), the ratio fast / transformers and whether greedy ids agree (else the first
differing position). With `--gpt-fast DIR`, pytorch-labs/gpt-fast (its model.py and generate.py from DIR, never copied)
runs first on each model's shape as the anchor row, in a process of its own with compile caches of its own
(`benchmarks.gpt_fast_anchor`), and the fast rows get the ratio fast / gpt-fast. Its weights are random ones of
its own, so its greedy ids are not compared.

Both rows are engine runs (`run(config)` and `run(config.replace(backend="fast"))`), so timing,
cold start and the profiler's kernel proof are the engine's: a device synchronize before every
clock read, decode tok/s = (n - 1) / (t_last - t_first), warm-up (and compile) reported apart.

    python -m benchmarks.fast_decode --model llama-3.1-8b-shape,llama-3.2-1b-shape   # CUDA: bf16, compiled
    python -m benchmarks.fast_decode --dtype bf16,fp32     # fp32 row: greedy ids should agree exactly
    python -m benchmarks.fast_decode --gpt-fast ../shared/anchors/gpt-fast --no-transformers   # gpt-fast anchor
    python -m benchmarks.fast_decode                       # CPU: tiny preset, fp32, no compile (a smoke test)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import torch

from benchmarks import cold_caches_env, failure_line, write_json
from playground.config import KERNELS, ConfigError, RunConfig
from playground.engine import run
from playground.metrics import first_difference
from playground.record import environment


@dataclass
class Row:
    model: str
    backend: str  # "transformers", "fast" or "gpt-fast"
    dtype: str
    attn: str
    decode_tok_s: float | None = None
    decode_tok_s_std: float | None = None
    roofline_pct: float | None = None
    roofline_kv_read: str | None = None  # filled | allocated: which part of the KV cache the roofline counts
    gpu_busy_pct: float | None = None
    cold_start_s: float | None = None
    ratio: float | None = None
    vs_gpt_fast: float | None = None
    ids_match: str = ""
    note: str = ""
    ids: list[int] = field(default_factory=list, repr=False)
    top_kernels: list[tuple[str, float]] = field(default_factory=list, repr=False)  # (kernel, µs per decode step)


def measure(config: RunConfig) -> Row:
    """One engine run as a table row; both backends go through here, on the engine's one loaded model."""
    record = run(config)
    row = Row(config.model, config.backend, record.dtype_effective or config.dtype, config.attn)
    if record.status != "ok":
        row.note = f"{record.status}: {record.reason}"
        return row
    row.decode_tok_s, row.decode_tok_s_std = record.decode_tok_s, record.decode_tok_s_std
    row.roofline_pct, row.cold_start_s, row.ids = record.bandwidth_roofline_pct, record.compile_s, record.output_ids
    row.roofline_kv_read = record.roofline_kv_read
    row.top_kernels, row.gpu_busy_pct = record.decode_top_kernels, record.gpu_busy_pct
    if config.backend == "fast":
        decode_kernels = ", ".join(record.attn_families.get("decode", [])) or "not profiled"
        row.note = f"compile={config.compile}, kernels {config.kernels}; decode attention: {decode_kernels}" + (
            f"; FALLBACK: {record.fallback}" if record.fallback else "")
    else:
        row.note = f"static cache, compile={config.compile}"
    return row


def measure_gpt_fast(folder: str, model: str, dtype: str, args: argparse.Namespace) -> Row:
    """gpt-fast on the model's shape, in a new process with compile caches of its own: its first call is a cold
    compile, and its inductor settings (set by its generate.py on import) stay out of the other rows."""
    compile_ = "off" if args.compile == "off" else "reduce-overhead"  # the one mode its generate.py compiles with
    row = Row(model, "gpt-fast", dtype, "sdpa:math")
    command = [sys.executable, "-m", "benchmarks.gpt_fast_anchor", "--gpt-fast", folder, "--model", model,
               "--dtype", dtype, "--compile", compile_, "--prompt-tokens", str(args.prompt_tokens),
               "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats)]
    with tempfile.TemporaryDirectory() as caches:
        try:
            done = subprocess.run(command, env=cold_caches_env(caches), capture_output=True, text=True,
                                  timeout=args.child_timeout_s)
        except subprocess.TimeoutExpired:
            row.note = f"failed: no result within {args.child_timeout_s} s"
            return row
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        row.note = f"failed: {failure_line(done)}"
        return row
    result = json.loads(lines[-1])
    row.decode_tok_s, row.decode_tok_s_std = result["decode_tok_s"], result["decode_tok_s_std"]
    row.roofline_pct, row.cold_start_s, row.ids = result["roofline_pct"], result["first_call_s"], result["ids"]
    row.roofline_kv_read = "allocated"
    row.note = f"gpt-fast's generate(), compile={compile_}, greedy, random weights of its own"
    return row


def compare(base: Row, fast: Row) -> None:
    if base.decode_tok_s and fast.decode_tok_s:
        fast.ratio = fast.decode_tok_s / base.decode_tok_s
    if base.ids and fast.ids:
        diff = first_difference(base.ids, fast.ids)
        fast.ids_match = "yes" if diff is None else f"no, from token {diff}"


def fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


def print_header() -> None:
    print("| model | backend | dtype | attn | decode tok/s | % of bandwidth roofline | cold start s | "
          "fast / transformers | fast / gpt-fast | greedy ids match | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)


def print_row(r: Row) -> None:
    """One row as soon as it is measured, so a run cut short still shows what finished."""
    tok_s = f"{fmt(r.decode_tok_s, '.1f')} ± {fmt(r.decode_tok_s_std, '.1f')}" if r.decode_tok_s else ""
    print(f"| {r.model} | {r.backend} | {r.dtype} | {r.attn} | {tok_s} | {fmt(r.roofline_pct, '.0f')} | "
          f"{fmt(r.cold_start_s, '.1f')} | {fmt(r.ratio, '.2f')} | {fmt(r.vs_gpt_fast, '.2f')} | {r.ids_match} | "
          f"{r.note} |", flush=True)


def print_top_kernels(rows: list[Row]) -> None:
    """Where each row's decode step spends its GPU time: the kernels to attack next."""
    for r in rows:
        if r.top_kernels:
            print(f"\n{r.model} {r.backend} {r.attn}: GPU time per decode step by kernel (profiled pass; "
                  f"GPU busy {fmt(r.gpu_busy_pct, '.0f')}% of the step)")
            for name, us in r.top_kernels:
                print(f"  {us:9.1f} µs  {name[:110]}")


def main() -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b-shape" if cuda else "tiny-random-llama",
                        help="comma-separated presets or model ids")
    parser.add_argument("--dtype", default="bf16" if cuda else "fp32", help="comma-separated: bf16, fp16, fp32")
    parser.add_argument("--compile", default="reduce-overhead" if cuda else "off")
    parser.add_argument("--fast-attn", default="sdpa",
                        help="comma-separated attention for the fast decoder: sdpa (torch picks the kernel), "
                             "sdpa:<flash|efficient|cudnn|math> (gpt-fast decodes with math, which inductor fuses), "
                             "flash_attention_2 (flash-decoding over the filled cache only)")
    parser.add_argument("--kernels", choices=KERNELS, default=KERNELS[0],
                        help="the fast rows' kernel choice, as the kernel-choice setting takes it")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-transformers", action="store_true",
                        help="skip transformers' row, e.g. to try an inductor setting on the fast rows alone "
                             "(no ratio is printed then)")
    parser.add_argument("--gpt-fast", metavar="DIR",
                        help="also run pytorch-labs/gpt-fast from DIR (its model.py and generate.py) on each model's "
                             "shape, first, as the anchor row")
    parser.add_argument("--child-timeout-s", type=int, default=600, help="how long gpt-fast's process may take")
    parser.add_argument("--output", help="also write the rows and the environment as JSON here")
    args = parser.parse_args()
    device = "cuda" if cuda else "cpu"
    rows: list[Row] = []

    def keep(row: Row) -> None:
        """Print the row and rewrite the JSON file, so a run cut short keeps every finished row."""
        rows.append(row)
        print_row(row)
        write_json(args.output, {"rows": [vars(r) for r in rows], "env": environment(), "args": vars(args)})

    print_header()
    for model in args.model.split(","):
        for dtype in args.dtype.split(","):
            config = RunConfig(model=model, device=device, dtype=dtype, attn="sdpa", cache_impl="static",
                               compile=args.compile, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                               repeats=args.repeats, warmup=1)
            try:  # before any run: e.g. kernels=tuned where nothing compiles has nothing to time
                fast_configs = [config.replace(backend="fast", attn=attn, kernels=args.kernels)
                                for attn in args.fast_attn.split(",")]
            except ConfigError as exc:
                parser.error(str(exc))
            anchor = None
            if args.gpt_fast:  # first, while this process holds no copy of the model
                anchor = measure_gpt_fast(args.gpt_fast, model, dtype, args)
                keep(anchor)
            base = None
            if not args.no_transformers:
                base = measure(config)
                keep(base)
            for fast_config in fast_configs:
                fast = measure(fast_config)
                if base is not None:
                    compare(base, fast)
                if anchor is not None and anchor.decode_tok_s and fast.decode_tok_s:
                    fast.vs_gpt_fast = fast.decode_tok_s / anchor.decode_tok_s
                keep(fast)
    print(f"\nbatch 1, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, greedy, EOS off; "
          f"mean ± std of {args.repeats} repeats after one cold call; device {device}")
    print_top_kernels(rows)


if __name__ == "__main__":
    main()
