"""Engine overhead: the engine's decode tok/s against a bare `model.generate` on the same model.

The engine adds a streamer (a device synchronize and a clock read per token), a stop check and a
queue hand-off. This script measures what that costs, side by side in one process on one model
object. Host load drifts (on a shared GPU machine bare generate can swing 5x between minutes), so
each round measures an engine run and a bare run back to back, in alternating order (ABBA), and
the headline figure is the median of the per-round ratios; the ratio of medians is printed too.

Bare decode tok/s = (N - 1) / (t(N) - t(1)), where t(k) is the wall time of generate with
exactly k new tokens (the same definition as the engine, without any per-token hook).

    python -m benchmarks.engine_overhead --model llama-3.2-1b-shape --attn eager,sdpa
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from playground.config import RunConfig
from playground.engine import run
from playground.hardware import synchronize
from playground.loader import MODELS
from playground.record import environment


def bare_seconds(model, input_ids, new_tokens: int, device: str) -> float:
    synchronize(device)
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=False, disable_compile=True,
                       temperature=None, top_k=None, top_p=None, pad_token_id=0)
    synchronize(device)
    return time.perf_counter() - start


def measure(model_name: str, attn: str, device: str, prompt_tokens: int, new_tokens: int, rounds: int) -> dict:
    config = RunConfig(model=model_name, attn=attn, device=device, prompt_tokens=prompt_tokens,
                       new_tokens=new_tokens, repeats=1, warmup=1, profile_kernels=False)
    first = run(config)  # loads the model and warms up
    if first.status != "ok":
        raise SystemExit(f"{attn}: {first.reason}")
    lm, _ = MODELS.get(model_name, first.device_effective, first.dtype_effective, config.transformers_attn)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, lm.model.config.vocab_size - 1, (1, prompt_tokens), generator=g).to(lm.device)
    def engine_tok_s() -> float:
        return run(config.replace(warmup=0)).decode_tok_s

    def bare_tok_s() -> float:
        one, full = bare_seconds(lm.model, ids, 1, lm.device), bare_seconds(lm.model, ids, new_tokens, lm.device)
        return (new_tokens - 1) / (full - one)

    engine, bare = [], []
    for i in range(rounds):
        if i % 2 == 0:
            engine.append(engine_tok_s())
            bare.append(bare_tok_s())
        else:
            bare.append(bare_tok_s())
            engine.append(engine_tok_s())
    e, b = statistics.median(engine), statistics.median(bare)
    paired = statistics.median(x / y for x, y in zip(engine, bare))
    return {"model": model_name, "attn": attn, "device": lm.device, "dtype": lm.dtype, "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens, "rounds": rounds, "engine_tok_s": e, "bare_tok_s": b, "ratio": paired,
            "ratio_of_medians": e / b, "engine_all": engine, "bare_all": bare}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-random-llama")
    parser.add_argument("--attn", default="eager,sdpa")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--output", help="also write the results as JSON here")
    args = parser.parse_args()
    print("| model | attn | device | dtype | engine decode tok/s | bare generate tok/s | ratio (median of rounds) "
          "| ratio of medians |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    results = []
    for attn in args.attn.split(","):
        r = measure(args.model, attn, args.device, args.prompt_tokens, args.new_tokens, args.rounds)
        results.append(r)
        print(f"| {r['model']} | {r['attn']} | {r['device']} | {r['dtype']} | {r['engine_tok_s']:.1f} | "
              f"{r['bare_tok_s']:.1f} | {r['ratio']:.3f} | {r['ratio_of_medians']:.3f} |", flush=True)
    print(f"{args.rounds} rounds, engine and bare back to back in ABBA order; prompt {args.prompt_tokens}, {args.new_tokens} new tokens; "
          f"{environment()['device_name']}, torch {environment()['torch']}", file=sys.stderr)
    if args.output:
        with open(args.output, "w") as fh:
            json.dump({"results": results, "env": environment()}, fh, indent=1)


if __name__ == "__main__":
    main()
