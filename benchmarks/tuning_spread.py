"""How far apart cold compiles land each batch-1 projection, under each coordinate-descent tuning setting.

At batch 1 the fast backend's compiled step runs every projection as a Triton reduction whose block
sizes and warps inductor's coordinate-descent tuner picks by timing candidates on the GPU, taking any
that measures 0.1% faster and walking on from there. Two cold compiles of the Llama-3.2-1B-shape step
ran the head at 122 and 183 µs, and a step 8-10% apart: the walk depends on timing noise, so two
configurations compared side by side can differ by more than the lever under test.

Each tuning setting here is the step's own compile options (`fixed`: under the kernel choice of that name,
inductor's deterministic mode) plus inductor overrides. For each, every
projection of the model shape (the RMS norm before it where the step has one) is compiled in
`--processes` fresh processes, one after another, each with empty caches; the settings take turns, so
a drift in the machine hits them alike. Per projection and setting this prints how long a call took in
each process (L2 flushed before each call, as in a decode step; a normed projection is two kernels), their
spread (slowest / fastest - 1), how many distinct launch configs the tuner settled on, and how many
candidates it timed.

    python -m benchmarks.tuning_spread --model llama-3.2-1b-shape --processes 4     # CUDA
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from benchmarks import cold_caches_env, spread, write_json
from benchmarks.quant_matmul import shapes, time_us
from playground.fast.generate import decode_compile_options, kernel_choice
from playground.record import environment

# inductor overrides on top of the step's options (`decode_compile_options`); the tuner reads both keys
SETTINGS = {
    "step": {},
    "fixed": {},  # the step's options under kernel_choice("fixed"): nothing timed, inductor's own config each
    "all-directions": {"coordinate_descent_check_all_directions": True},
    "radius-2": {"coordinate_descent_search_radius": 2},
    "heuristic-start": {"max_autotune_pointwise": True},  # start the walk from the best of inductor's own configs
}
NORMED = ("qkv", "gate_up", "lm_head")  # the projections whose RMS norm inductor fuses into the matmul's kernel
TUNER_LOG = "torch._inductor.runtime.coordinate_descent_tuner"


def overrides(setting: str) -> dict:
    """The inductor options of `setting`: names from SETTINGS joined by '+', e.g. all-directions+radius-2."""
    options = {}
    for name in setting.split("+"):
        if name not in SETTINGS:
            raise SystemExit(f"unknown tuning setting {name!r}; choose from {', '.join(SETTINGS)} (join with +)")
        options.update(SETTINGS[name])
    return options


def setting_options(setting: str) -> dict:
    """The inductor options a projection compiles with under `setting`: the step's, then the overrides."""
    with kernel_choice("fixed" if "fixed" in setting.split("+") else "tuned"):
        return {**decode_compile_options("reduce-overhead", torch.bfloat16), **overrides(setting)}


class Projection(torch.nn.Module):
    """One projection as the step computes it: the decoder's RMS norm (transformers' op order) then the linear."""

    def __init__(self, out_f: int, in_f: int, normed: bool) -> None:
        super().__init__()
        kw = {"device": "cuda", "dtype": torch.bfloat16}
        self.weight = torch.nn.Parameter(torch.randn(out_f, in_f, **kw) / in_f ** 0.5, requires_grad=False)
        self.norm = torch.nn.Parameter(torch.ones(in_f, **kw), requires_grad=False) if normed else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is not None:
            h = x.float()
            x = self.norm * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)
        return F.linear(x, self.weight)


class TunerLog(logging.Handler):
    """The tuner's verdict on each kernel: its "Improve from <start> <µs> -> <chosen> <µs>" line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.verdicts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Improve from" in message:
            self.verdicts.append(message)


def chosen_config(verdict: str) -> str:
    """'XBLOCK: 1, R0_BLOCK: 2048, num_warps: 8, ...' from a verdict line: what the tuner settled on."""
    chosen = verdict.split(" -> ", 1)[1]
    return chosen.rsplit(" ", 2)[0].rstrip(",")


def child(model: str, setting: str, projections: list[str], flush_mb: int) -> dict:
    """Compile and time each projection in this process (its caches are empty): {projection: {...}}."""
    log = TunerLog()
    tuner = logging.getLogger(TUNER_LOG)
    tuner.setLevel(logging.DEBUG)
    tuner.addHandler(log)
    options = setting_options(setting)
    flush = torch.empty(flush_mb * 2 ** 20, dtype=torch.uint8, device="cuda")
    out = {}
    for name in projections:
        out_f, in_f = shapes(model)[name]
        module = Projection(out_f, in_f, name in NORMED)
        fn = torch.compile(module, options=options, fullgraph=True)
        x = torch.randn(1, in_f, device="cuda", dtype=torch.bfloat16)
        log.verdicts.clear()
        timed_before = counters["inductor"]["coordesc_tuning_bench"]
        us = time_us(fn, x, flush)
        out[name] = {"us": us, "configs": [chosen_config(v) for v in log.verdicts], "verdicts": list(log.verdicts),
                     "candidates_timed": counters["inductor"]["coordesc_tuning_bench"] - timed_before}
        torch._dynamo.reset()
        del module, fn
    return out


def run_cold(args, setting: str) -> dict:
    """One child process with caches of its own; its result, or {"failed": reason}."""
    with tempfile.TemporaryDirectory() as caches:
        env = cold_caches_env(caches)
        try:
            done = subprocess.run([sys.executable, "-m", "benchmarks.tuning_spread", "--child", setting,
                                   "--model", args.model, "--projections", args.projections,
                                   "--l2-flush-mb", str(args.l2_flush_mb)],
                                  env=env, capture_output=True, text=True, timeout=args.child_timeout_s)
        except subprocess.TimeoutExpired:
            return {"failed": [f"no result within {args.child_timeout_s} s"]}
    if done.returncode != 0:
        return {"failed": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary_rows(results: dict[str, list[dict]], projections: list[str]) -> list[dict]:
    """One row per setting and projection over the processes that finished."""
    rows = []
    for setting, runs in results.items():
        finished = [r for r in runs if "failed" not in r]
        for name in projections:
            times = [r[name]["us"] for r in finished]
            if not times:
                continue
            rows.append({"setting": setting, "projection": name, "us": times, "spread": spread(times),
                         "distinct_configs": len({tuple(r[name]["configs"]) for r in finished}),
                         "candidates_timed": [r[name]["candidates_timed"] for r in finished]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.2-1b-shape")
    parser.add_argument("--settings", default="step,fixed",
                        help=f"comma-separated; each joins names from {', '.join(SETTINGS)} with +")
    parser.add_argument("--projections", default="qkv,o,gate_up,down,lm_head")
    parser.add_argument("--processes", type=int, default=4, help="cold compiles per setting")
    parser.add_argument("--l2-flush-mb", type=int, default=256)
    parser.add_argument("--child-timeout-s", type=int, default=300)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # run one cold process's compiles and print them
    parser.add_argument("--output", help="also write every process's result and the environment as JSON here")
    args = parser.parse_args()
    projections = args.projections.split(",")
    if args.child:
        print(json.dumps(child(args.model, args.child, projections, args.l2_flush_mb)))
        return
    if not torch.cuda.is_available():
        raise SystemExit("coordinate-descent tuning runs on CUDA only; this benchmark needs a GPU")
    settings = args.settings.split(",")
    for setting in settings:
        overrides(setting)  # refuse an unknown name before any compile
    print(f"{args.model}, batch 1, bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"{args.processes} cold processes per setting, L2 flushed ({args.l2_flush_mb} MB) before each call\n",
          flush=True)
    results: dict[str, list[dict]] = {s: [] for s in settings}
    for i in range(args.processes):
        for setting in settings:  # settings take turns
            result = run_cold(args, setting)
            results[setting].append(result)
            brief = result.get("failed") or ", ".join(f"{n} {result[n]['us']:.1f}" for n in projections)
            print(f"process {i + 1} {setting}: {brief}", flush=True)
            write_json(args.output, {"results": results, "rows": summary_rows(results, projections),
                                     "env": environment(), "args": vars(args)})
    print("\n| setting | projection | µs per process | spread | distinct configs | candidates timed |")
    print("|---|---|---|---|---|---|")
    for row in summary_rows(results, projections):
        print(f"| {row['setting']} | {row['projection']} | {', '.join(f'{t:.1f}' for t in row['us'])} | "
              f"{row['spread']:.1%} | {row['distinct_configs']} | {', '.join(map(str, row['candidates_timed']))} |")
    print("\nconfigs chosen (first process of each setting):")
    for setting, runs in results.items():
        first = next((r for r in runs if "failed" not in r), None)
        for name in projections if first else []:
            print(f"  {setting} {name}: {' | '.join(first[name]['configs'])}")


if __name__ == "__main__":
    main()
