"""The fast decode step's first call in a new process: torch.compile from warm caches, or Dynamo's precompile.

A warm start from inductor's caches skips code generation and tuning, but torch.compile's Dynamo still
traces the step in every new process: on the H200 the 8B shape's first call took 85 s with every cache
hit (results/h200/2026-12-03-warm-start-and-aot/). torch's ahead-of-time Dynamo compile
(`torch.compile(fn).aot_compile(example)`, saved with `save_compiled_function`, loaded with
`torch.compiler.load_compiled_function`) keeps the trace too; the playground compiles its steps that
way (playground.fast.precompile). Each row below is its own process:

    plain, cold     torch.compile alone (`torch_compiled`), an empty inductor cache
    plain, warm     the same in a new process, on the caches the cold one filled
    precompile      `aot_compile` of the same step with the same options, an empty cache, saved to a file:
                    the playground's first compile
    load            a new process on the caches precompile filled: the file loaded, no trace (the
                    playground's warm start)
    load, artifacts the same with an empty cache into which torch's artifacts (`save_cache_artifacts`) of the
                    precompile row are hot-loaded first, as `playground.warm` does (`plain, artifacts` likewise)
    load, no cache  the same with an empty cache: what the file alone brings (kernels are built again)

The first call is timed from the compile (or load) to the first token, on CUDA through the capture of the
step's CUDA graph and its first replay, as the fast backend runs it; a step is the mean of the replays that
follow. Every row checks its token against the eager step's from the same position. `--other` calls the
loaded step with another model's state, which its guards must refuse. Model loading is not timed.

    python -m benchmarks.precompile_step                      # CPU: tiny-random-llama in fp32, stdlib-llama-tiny
    python -m benchmarks.precompile_step --model llama-3.1-8b-shape --dtype bf16 --attn flash_attention_2 \\
        --other llama-3.2-1b-shape                            # CUDA
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from playground import warm
from playground.fast.forward import decode_one_token
from playground.fast.generate import CapturedStep, compile_step, fast_generate, torch_compiled
from playground.fast.precompile import PrecompiledStep
from playground.hardware import synchronize
from playground.loader import MODELS

ROWS = (("plain, cold", "plain", "plain"), ("plain, warm", "plain", "plain"),
        ("plain, artifacts", "plain", "plain-artifacts"), ("precompile", "aot", "aot"), ("load", "load", "aot"),
        ("load, artifacts", "load", "aot-artifacts"), ("load, no cache", "load", "none"))
# (row, what it does, its inductor cache: "X-artifacts" is an empty one into which the artifacts of X's first row
# are hot-loaded first, as `playground.warm` does)
NEEDS = {"plain, warm": "plain, cold", "plain, artifacts": "plain, cold", "load": "precompile",
         "load, artifacts": "precompile", "load, no cache": "precompile"}  # the row it runs after


def prefilled(args, preset: str):
    """(model, state) with a prompt prefilled and one token decoded, eagerly."""
    model = MODELS.get(preset, args.device, args.dtype, args.attn)[0].model
    ids = torch.arange(1, args.prompt_tokens + 1, device=args.device)[None] % model.config.vocab_size
    return model, fast_generate(model, input_ids=ids, max_new_tokens=args.steps + 2, compile_mode="off",
                                eos_token_id=[], pad_token_id=0).past_key_values


def sync(device: str) -> float:
    """The clock, read after the device's queued work."""
    synchronize(device)
    return time.perf_counter()


def one_step(step, model, state, device: str) -> tuple[int, float]:
    """(token, seconds) of one call of `step` from the state's position, which is put back after it."""
    pos = state.pos.clone()
    started = sync(device)
    token = int(step(model, state, False)[0])
    seconds = sync(device) - started
    state.pos.copy_(pos)
    return token, seconds


def kept(step) -> PrecompiledStep:
    """The saved-step layer of a step from `compile_step` (inside its CUDA-graph capture on CUDA)."""
    return step.compiled if isinstance(step, CapturedStep) else step


def run(args, does: str) -> dict:
    """One row, in this process."""
    model, state = prefilled(args, args.model)
    expected, _ = one_step(decode_one_token, model, state, args.device)
    started = sync(args.device)
    if args.load_artifacts:
        warm.load(args.load_artifacts)
    note = ""
    if does == "plain":  # torch.compile alone, as the playground compiled before it kept its steps
        step = torch_compiled(decode_one_token, state, args.mode)
        step = CapturedStep(step) if args.device == "cuda" else step  # captured as the fast backend does
    else:  # the playground's route: compiled ahead of time and saved, or loaded from what the precompile row saved
        step = compile_step(decode_one_token, state, args.mode)
        note = kept(step).prepare(model, state, False)
    prepared = sync(args.device) - started
    token, first = one_step(step, model, state, args.device)
    if args.device == "cuda":  # the second call captures the graph and replays it
        first += one_step(step, model, state, args.device)[1]
    steps = [one_step(step, model, state, args.device)[1] for _ in range(args.steps)]
    row = dict(prepare_s=prepared, first_call_s=prepared + first, step_ms=1e3 * sum(steps) / len(steps),
               token=token, eager_token=expected, note=note.split(" ")[0])
    if args.save_artifacts:
        warm.save(args.save_artifacts)
    if does == "load" and args.other:  # the loaded function itself, without the playground's choice of file
        loaded = kept(step).steps[(False,)]
        other_model, other_state = prefilled(args, args.other)
        try:
            one_step(loaded, other_model, other_state, args.device)
            row["other"] = "ran: its guards did not refuse another model's state"
        except RuntimeError as e:
            reason = str(e).split("verbose_code_parts=")[-1].splitlines()[0].strip('[]," ')
            row["other"] = f"refused by its guards: {reason}"
    return row


def main(argv: list[str] | None = None) -> None:
    cuda = torch.cuda.is_available()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b-shape" if cuda else "tiny-random-llama")
    ap.add_argument("--other", default="llama-3.2-1b-shape" if cuda else "stdlib-llama-tiny",
                    help="a model of other shapes whose state the loaded step must refuse ('' skips it)")
    ap.add_argument("--device", default="cuda" if cuda else "cpu")
    ap.add_argument("--dtype", default="bf16" if cuda else "fp32")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--mode", default="reduce-overhead" if cuda else "default", help="torch.compile mode")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="replays timed after the first call")
    ap.add_argument("--rows", nargs="+", default=[row for row, _, _ in ROWS],
                    help="the rows to run, by name (default all); a row runs only after the one it needs")
    ap.add_argument("--row", choices=[does for _, does, _ in ROWS], help=argparse.SUPPRESS)  # a child's one row
    ap.add_argument("--save-artifacts", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--load-artifacts", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    unknown = [r for r in args.rows if r not in {row for row, _, _ in ROWS}]
    missing = [f"'{r}' needs '{NEEDS[r]}'" for r in args.rows if NEEDS.get(r, r) not in args.rows]
    if unknown or missing:
        ap.error(f"--rows: unknown {unknown}" if unknown else f"--rows: {'; '.join(missing)}")
    if args.row:
        with torch.inference_mode():
            print(json.dumps(run(args, args.row)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{args.model}, {torch.cuda.get_device_name() if args.device == 'cuda' else args.device}, {args.dtype}, "
              f"{args.attn}, compile {args.mode}, torch {torch.__version__}\n")
        print("| process | inductor cache | step | prepare s | first call s | step ms | token = eager | other model |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- |")
        first_user: dict[str, str] = {}  # inductor cache -> the row that filled it
        for row, does, cache in (r for r in ROWS if r[0] in args.rows):
            filled_by = first_user.setdefault(cache, row)
            artifacts = Path(tmp) / f"{cache.removesuffix('-artifacts')}.artifacts"
            hot = ["--load-artifacts", str(artifacts)] if cache.endswith("-artifacts") else []
            if filled_by == row and not hot:
                hot = ["--save-artifacts", str(artifacts)]
            child = [sys.executable, "-m", "benchmarks.precompile_step", "--row", does, *hot,
                     "--model", args.model, "--other", args.other, "--device", args.device, "--dtype", args.dtype,
                     "--attn", args.attn, "--mode", args.mode, "--prompt-tokens", str(args.prompt_tokens),
                     "--steps", str(args.steps)]
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / cache),
                   "TRITON_CACHE_DIR": str(Path(tmp) / cache / "triton"), warm.CACHE_ENV: str(Path(tmp) / "steps")}
            out = subprocess.run(child, capture_output=True, text=True, env=env)
            if out.returncode:
                print(f"| {row} | | | failed: {out.stderr.strip().splitlines()[-1][:200]} | | | | |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            state = (f"empty, then the {NEEDS[row]} row's artifacts" if cache.endswith("-artifacts") else
                     "empty" if filled_by == row else f"the {filled_by} row's")
            print(f"| {row} | {state} | {r['note'] or 'traced'} | {r['prepare_s']:.2f} | {r['first_call_s']:.2f} | {r['step_ms']:.3f} | "
                  f"{r['token']} {'=' if r['token'] == r['eager_token'] else '≠'} {r['eager_token']} | "
                  f"{r.get('other', '')} |", flush=True)


if __name__ == "__main__":
    main()
