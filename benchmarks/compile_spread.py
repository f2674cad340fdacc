"""How far apart two cold compiles of the same fast step decode, per kernel choice: the spread a user's A/B has to beat.

Each process is a new `python -m playground bench` run with compile caches of its own (inductor's, Triton's and
the playground's), so it compiles the step from nothing, then times `--repeats` runs after a warm-up. The kernel
choices take turns (fixed, tuned, fixed, tuned, ...), so a drift in the machine hits them alike. Per process this
prints decode tok/s (mean ± std over the repeats), the median step (the median inter-token latency over every
repeat's steps, which host noise moves less than the mean rate) and the first call (compile included); per choice,
the spread of the median steps (slowest / fastest - 1) against the target of two compiles within 3%.

    python -m benchmarks.compile_spread --model llama-3.2-1b-shape --attn flash_attention_2 --processes 2   # CUDA
    python -m benchmarks.compile_spread --model tiny-random-llama --compile off --kernels fixed   # CPU smoke test
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks import add_fast_step_arguments, cold_caches_env, failure_line, spread, write_json
from playground.config import KERNELS
from playground.record import environment

TARGET = 0.03  # two compiles of the same code within 3% of each other


def run_cold(args: argparse.Namespace, kernels: str) -> dict:
    """One new process with caches of its own, compiling and timing the step: its record's figures, or
    {"failed": reason}."""
    with tempfile.TemporaryDirectory() as caches:
        output = Path(caches) / "run.jsonl"
        command = [sys.executable, "-m", "playground", "bench", "--no-store", "--format", "jsonl",
                   "--output", str(output), "--model", args.model, "--backend", "fast", "--cache-impl", "static",
                   "--compile", args.compile, "--dtype", args.dtype, "--attn", args.attn, "--kernels", kernels,
                   "--prompt-tokens", str(args.prompt_tokens), "--new-tokens", str(args.new_tokens),
                   "--repeats", str(args.repeats), "--warmup", "1"]
        try:
            done = subprocess.run(command, env=cold_caches_env(caches), capture_output=True, text=True,
                                  timeout=args.child_timeout_s)
        except subprocess.TimeoutExpired:
            return {"failed": f"no result within {args.child_timeout_s} s"}
        lines = output.read_text().splitlines() if output.exists() else []
    if not lines:
        return {"failed": failure_line(done)}
    return figures(json.loads(lines[-1]))


def figures(record: dict) -> dict:
    """What this benchmark keeps of a run's record, or {"failed": its status and reason}."""
    if record["status"] != "ok":
        return {"failed": f"{record['status']}: {record['reason']}"}
    return {"decode_tok_s": record["decode_tok_s"], "decode_tok_s_std": record["decode_tok_s_std"],
            "median_step_ms": record["itl_ms_p50"], "first_call_s": record["cold_e2e_ms"] / 1e3,
            "compiled": record["compiled"], "fallback": record["fallback"]}


def summary(results: dict[str, list[dict]]) -> dict[str, dict]:
    """Per kernel choice with two or more finished processes: the spread of their median steps and of their rates."""
    rows = {}
    for kernels, runs in results.items():
        finished = [r for r in runs if "failed" not in r]
        if len(finished) >= 2:
            rows[kernels] = {"median_step_spread": spread([r["median_step_ms"] for r in finished]),
                             "rate_spread": spread([r["decode_tok_s"] for r in finished]),
                             "processes": len(finished)}
    return rows


def main() -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fast_step_arguments(parser, cuda)
    parser.add_argument("--kernels", default=",".join(KERNELS), help=f"comma-separated, from: {', '.join(KERNELS)}")
    parser.add_argument("--processes", type=int, default=2, help="cold compiles per kernel choice")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child-timeout-s", type=int, default=600)
    parser.add_argument("--output", help="also write every process's figures and the environment as JSON here")
    args = parser.parse_args()
    choices = args.kernels.split(",")
    unknown = set(choices) - set(KERNELS)
    if unknown:
        parser.error(f"unknown kernel choice {', '.join(sorted(unknown))}; choose from {', '.join(KERNELS)}")
    print(f"{args.model} on the fast backend, {args.dtype}, {args.attn}, compile={args.compile}, batch 1, prompt "
          f"{args.prompt_tokens}, {args.new_tokens} new tokens; {args.processes} cold processes per kernel choice, "
          f"{args.repeats} repeats each\n", flush=True)
    results: dict[str, list[dict]] = {k: [] for k in choices}
    for i in range(args.processes):
        for kernels in choices:  # the choices take turns
            result = run_cold(args, kernels)
            results[kernels].append(result)
            brief = result.get("failed") or (
                f"{result['decode_tok_s']:.1f} ± {result['decode_tok_s_std']:.1f} tok/s, median step "
                f"{result['median_step_ms']:.4f} ms, first call {result['first_call_s']:.2f} s"
                + (f"; FALLBACK: {result['fallback']}" if result["fallback"] else ""))
            print(f"process {i + 1} kernels={kernels}: {brief}", flush=True)
            write_json(args.output, {"results": results, "summary": summary(results), "env": environment(),
                                     "args": vars(args)})
    print(f"\n| kernels | cold processes | median steps apart | mean rates apart | within {TARGET:.0%} |")
    print("|---|---|---|---|---|")
    for kernels, row in summary(results).items():
        print(f"| {kernels} | {row['processes']} | {row['median_step_spread']:.1%} | {row['rate_spread']:.1%} | "
              f"{'yes' if row['median_step_spread'] <= TARGET else 'no'} |")


if __name__ == "__main__":
    main()
