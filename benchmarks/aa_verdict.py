"""How often the A-vs-B verdict calls a difference that is not there, and still calls one that is.

Runs the same configuration on both sides (A/A) and KV cache off against on, each N times through the engine's
interleaved measurement, optionally beside a second process that keeps one core busy, and prints how many of each
the verdict called a real difference (diagnostics.verdict on decode). Target on a 2-core host with the load on:
0 of 20 A/A called, KV cache off vs on called B faster in 20 of 20.

    python -m benchmarks.aa_verdict --runs 20 --load
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

from playground import engine
from playground.config import RunConfig
from playground.diagnostics import noise_words, verdict, verdict_words


def _spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _compare(a: RunConfig, b: RunConfig):
    records = {side: event.record for side, event in engine.generate_sides({"A": a, "B": b})
               if isinstance(event, engine.Result)}
    return records["A"], records["B"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="comparisons of each kind")
    parser.add_argument("--load", action="store_true", help="keep one core busy in a second process")
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True) if args.load else None
    if spinner:
        spinner.start()
    base = RunConfig(prompt_tokens=128, new_tokens=args.new_tokens)
    kinds = {"A/A (same configuration)": (base, base), "KV cache off vs on": (base.replace(use_cache=False), base)}
    try:
        for kind, (a, b) in kinds.items():
            called, started = 0, time.perf_counter()
            for i in range(args.runs):
                rec_a, rec_b = _compare(a, b)
                v = verdict(rec_a, rec_b, "decode")
                called += v is not None and v.call == "better" if kind.startswith("KV") else v is not None and v.call in (
                    "better", "worse")
                print(f"{kind} {i + 1}/{args.runs}: {verdict_words(v)} · {noise_words(v, rec_b.host_other_cpu_pct)}"
                      if v else f"{kind} {i + 1}/{args.runs}: {rec_a.status} {rec_a.reason} {rec_b.reason}", flush=True)
            what = "called B faster" if kind.startswith("KV") else "called a real difference"
            print(f"== {kind}: {what} in {called} of {args.runs} ({time.perf_counter() - started:.0f} s)", flush=True)
    finally:
        stop.set()


if __name__ == "__main__":
    main()
