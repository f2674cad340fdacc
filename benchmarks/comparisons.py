"""Every one-click comparison on this host, as Run sends it: its estimate before Run against the time it took,
and the verdict on the figure it is about.

A comparison the page runs must finish within TARGET_S on a 2-core CPU with its lever's direction called, or say
before Run why this host cannot show it (`Comparison.cannot_show`, or a side refused); its estimate
(`hosting.pair_seconds`) must land within 2x of the run. Comparisons that say so are run too, so the table shows
what they would have read.

    python -m benchmarks.comparisons                  # every comparison, the default model
    python -m benchmarks.comparisons --only "KV cache: off vs on" --runs 3
"""

from __future__ import annotations

import argparse
import time

from playground import engine
from playground.config import ConfigError
from playground.diagnostics import noise_words, verdict, verdict_words
from playground.presets import DEFAULT_MODEL
from playground.record import environment
from playground.ui.settings import comparisons

TARGET_S = 30.0
HEADER = ("comparison", "figure", "said before Run", "estimate s", "run s", "run / estimate", "verdict", "how")


def _run(configs: dict, figure: str) -> tuple[dict, float]:
    started = time.perf_counter()
    records = {side: event.record for side, event in engine.generate_sides(configs, figure=figure)
               if isinstance(event, engine.Result)}
    return records, time.perf_counter() - started


def _row(name: str, comparison, model: str) -> tuple[str, ...]:
    said = comparison.cannot_show or ""
    try:
        configs = comparison.configs(model)
    except ConfigError as exc:
        return name, comparison.figure, f"refused: {exc}", "", "", "", "", ""
    estimate = comparison.estimate_s(model)
    records, wall = _run(configs, comparison.figure)
    a, b = records.get("A"), records.get("B")
    refused = [f"{side} {rec.status}: {rec.reason}" for side, rec in records.items() if rec.status != "ok"]
    if refused:
        return name, comparison.figure, said or "; ".join(refused)[:160], f"{estimate or 0:.0f}", f"{wall:.1f}", "", "", ""
    v = verdict(a, b, comparison.figure)
    return (name, comparison.figure, said[:80] + ("..." if len(said) > 80 else ""), f"{estimate or 0:.0f}", f"{wall:.1f}",
            f"{wall / estimate:.2f}" if estimate else "-", verdict_words(v) if v else "-",
            noise_words(v, b.host_other_cpu_pct) if v else "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--only", action="append", help="a comparison's name (repeatable); default: all")
    parser.add_argument("--runs", type=int, default=1, help="times each comparison is run")
    args = parser.parse_args()
    env = environment()
    print(f"{args.model}; {env.get('device_name')}, torch {env.get('torch')}, transformers {env.get('transformers')}; "
          f"target: {TARGET_S:.0f} s a run with its direction called, or a reason before Run", flush=True)
    print("| " + " | ".join(HEADER) + " |\n|" + " --- |" * len(HEADER), flush=True)
    for name, comparison in comparisons().items():
        if args.only and name not in args.only:
            continue
        for _ in range(args.runs):
            print("| " + " | ".join(cell.replace("|", "/") for cell in _row(name, comparison, args.model)) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
