"""Every one-click comparison on this host, as Run sends it: its estimate before Run against the time it took,
and the verdict on the figure it is about.

A comparison the page runs must finish within TARGET_S on a 2-core CPU with its lever's direction called, or say
before Run why this host cannot show it (`Comparison.cannot_show`, or a side refused); its estimate
(`hosting.pair_seconds`: planned, and at most with the extra pairs an open verdict takes) must
land within 2x of the run. Comparisons that say so are run too, so the table shows
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
HEADER = ("comparison", "figure", "said before Run", "estimate s (at most)", "run s", "within 2x", "verdict", "how")


def _run(configs: dict, figure: str) -> tuple[dict, float]:
    started = time.perf_counter()
    records = {side: event.record for side, event in engine.generate_sides(configs, figure=figure)
               if isinstance(event, engine.Result)}
    return records, time.perf_counter() - started


def _said(comparison) -> str:
    text = comparison.cannot_show
    return text[:80] + "..." if len(text) > 80 else text


def _row(name: str, comparison, model: str) -> tuple[str, ...]:
    try:
        configs = comparison.configs(model)
    except ConfigError as exc:
        return name, comparison.figure, f"refused: {exc}", "", "", "", "", ""
    planned, most = comparison.estimate_s(model)
    records, wall = _run(configs, comparison.figure)
    estimate = f"{planned:.0f} ({most:.0f})"
    within = "yes" if planned / 2 <= wall <= 2 * most else "no"
    ended = {side: f"{side} {rec.status}: {rec.reason}" for side, rec in records.items() if rec.status != "ok"}
    refused = [words for side, words in ended.items() if records[side].status == "invalid"]
    failed = [words for side, words in ended.items() if records[side].status != "invalid"]
    if refused or failed:  # refused: the page says so before Run; failed: the verdict column says why
        return (name, comparison.figure, _said(comparison) or "; ".join(refused)[:160], estimate, f"{wall:.1f}", within,
                "; ".join(failed)[:160] or "-", "-")
    v = verdict(records["A"], records["B"], comparison.figure)
    return (name, comparison.figure, _said(comparison), estimate, f"{wall:.1f}", within,
            verdict_words(v) if v else "-", noise_words(v, records["B"].host_other_cpu_pct) if v else "-")


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
