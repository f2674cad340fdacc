"""Batching: aggregate throughput against per-sequence latency, and how many sequences fit before memory runs out.

Decode is bandwidth-bound at batch 1: each step reads every weight to make one token. A batch of B
sequences reads the weights once per step for B tokens, so aggregate tok/s climbs with B while each
sequence's inter-token latency grows slowly, until the KV cache (which grows with every sequence and
every token) fills the GPU. This sweeps batch sizes on each backend (transformers' static cache and
compiled step is the fast backend's anchor), with uniform prompts or, with `--length-spread`, uneven
ones left-padded to the longest, so the padded share and what it costs show. Then, on CUDA, it
searches for the largest batch that really runs and prints it beside the memory pre-flight's
prediction (`playground.memory`, `record.max_batch_predicted`).

Every row is an engine run (`run(config)`). The search turns the pre-flight's refusal off, so it finds
the real limit rather than the prediction; a probe that runs out of memory is an `error` record.

    python -m benchmarks.batching                                  # CPU smoke test: tiny-random-llama
    python -m benchmarks.batching --model llama-3.1-8b-shape --dtype bf16 --compile reduce-overhead \
        --fast-attn flash_attention_2 --batch-sizes 1,8,16,32,64,128 --output batching.json --chart batching.html
"""

from __future__ import annotations

import argparse
from typing import Callable
from unittest import mock

from benchmarks import write_json
from playground import memory
from playground.config import RunConfig
from playground.engine import run
from playground.presets import PRESETS
from playground.record import RunRecord, environment

TARGETS = {8: 1_500, 64: 6_000}  # fast backend, aggregate decode tok/s, Llama-3.1-8B shape, bf16, H200
HEADER = ("backend", "batch", "padded %", "TTFT ms", "tok/s per sequence", "tok/s all sequences", "ITL p50 ms", "peak MB",
          "KV MB", "KV B/token config / held", "predicted max batch")


def row(record: RunRecord) -> tuple[str, ...]:
    if record.status != "ok":
        return (record.backend, str(record.batch_size), f"{record.status}: {record.reason}")
    return (record.backend, str(record.batch_size), f"{record.padding_pct or 0:.0f}", f"{record.ttft_ms:,.1f}",
            f"{record.decode_tok_s:,.1f}",
            f"{record.aggregate_decode_tok_s:,.1f} ± {record.aggregate_decode_tok_s_std or 0:,.1f}",
            f"{record.itl_ms_p50:.2f}", f"{record.peak_mem_mb:,.0f}", f"{record.kv_cache_mb:,.1f}",
            f"{record.kv_bytes_per_token:,} / {record.kv_bytes_per_token_measured:,.0f}",
            f"{record.max_batch_predicted:,}" if record.max_batch_predicted is not None else "-")


def markdown(rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def out_of_memory(record: RunRecord) -> bool:
    return record.status == "error" and "out of memory" in record.reason


def largest_batch(probe: Callable[[int], RunRecord], start: int, tolerance: float = 0.0) -> tuple[int, list[RunRecord]]:
    """The largest batch `probe` runs: double from `start` until one runs out of memory, then bisect until the
    gap between a batch that ran and one that did not is at most `tolerance` of the one that ran (0: exact).

    Any other failure ends the search there, so a refusal is never mistaken for the memory limit."""
    tried: list[RunRecord] = []

    def fits(batch: int) -> bool:
        record = probe(batch)
        tried.append(record)
        if record.status != "ok" and not out_of_memory(record):
            raise RuntimeError(f"batch {batch} failed for another reason: {record.reason}")
        return record.status == "ok"

    low, high = 0, max(1, start)
    while fits(high):
        low, high = high, 2 * high
    while high - low > max(1, int(low * tolerance)):
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low, tried


def configs(args: argparse.Namespace) -> dict[str, RunConfig]:
    """The fast backend and transformers' best anchor: both static caches, same compile mode."""
    base = RunConfig(model=args.model, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                     length_spread_pct=args.length_spread, repeats=args.repeats, warmup=1, dtype=args.dtype,
                     device=args.device, compile=args.compile, cache_impl="static")
    return {backend: base.replace(backend=backend, attn=args.fast_attn if backend == "fast" else "sdpa")
            for backend in args.backend.split(",")}


SEARCH_TOLERANCE = 0.02  # finer than the 10% the prediction is held to, and each probe costs a whole run


def search(config: RunConfig, start: int) -> tuple[int, list[RunRecord]]:
    """The real limit: probes of one eager run without warm-up or kernel pass, the pre-flight's refusal off.

    Eager, because a compiled probe would compile a new graph for every batch size it tries (minutes each on
    an 8B model); the memory that decides the limit (weights, the static KV cache, the prefill's transients)
    is held either way."""
    probe_config = config.replace(repeats=1, warmup=0, compile="off", profile_kernels=False)
    with mock.patch.object(memory, "refuse_if_too_big", lambda *args: None):
        return largest_batch(lambda batch: run(probe_config.replace(batch_size=batch)), start, SEARCH_TOLERANCE)


def targets(records: list[RunRecord]) -> list[str]:
    fast = {r.batch_size: r for r in records if r.backend == "fast" and r.status == "ok"}
    lines = []
    for batch, target in TARGETS.items():
        if batch in fast:
            got = fast[batch].aggregate_decode_tok_s
            lines.append(f"fast backend, batch {batch}: {got:,.0f} tok/s all sequences (target >= {target:,} on an "
                         f"H200, Llama-3.1-8B shape, bf16, prompt 512, 256 new): {'met' if got >= target else 'missed'}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-random-llama", choices=sorted(PRESETS))
    parser.add_argument("--backend", default="fast,transformers", help="comma-separated: fast, transformers")
    parser.add_argument("--batch-sizes", default="1,2,4,8", help="comma-separated batch sizes to sweep")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compile", default="off")
    parser.add_argument("--fast-attn", default="sdpa")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--length-spread", type=int, default=0,
                        help="prompt length spread %%: row i keeps a prefix of 100 - spread x i/(batch-1) %% (0: uniform)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--search", choices=("auto", "on", "off"), default="auto",
                        help="search for the largest batch that runs (auto: on CUDA only, where memory runs out)")
    parser.add_argument("--output", help="also write every record and the table as JSON here")
    parser.add_argument("--chart", help="also write the throughput-latency and memory charts as HTML here")
    args = parser.parse_args(argv)
    env = environment()
    lengths = f"lengths spread {args.length_spread}%" if args.length_spread else "uniform lengths"
    print(f"{args.model}, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, {lengths}, 1 warm-up + "
          f"{args.repeats} repeats, dtype {args.dtype}, compile {args.compile}, fast attn {args.fast_attn}; "
          f"{env['device_name']}, torch {env['torch']}, commit {env['project_commit']}\n", flush=True)
    records: list[RunRecord] = []
    table: list[tuple[str, ...]] = []
    limits: dict[str, dict] = {}

    def save() -> None:
        write_json(args.output, {"table": table, "limits": limits, "records": [r.to_dict() for r in records],
                                 "env": env, "args": vars(args)})

    print("\n".join(markdown([]).splitlines()[:2]), flush=True)
    for backend, config in configs(args).items():
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            record = run(config.replace(batch_size=batch))
            records.append(record)
            table.append(row(record))
            print(markdown(table[-1:]).splitlines()[-1], flush=True)
            save()
    print()
    cuda = bool(records) and records[0].device_effective == "cuda"
    # the targets are an H200's, for uniform prompts; a CPU smoke run or an uneven batch only runs
    for line in targets(records) if cuda and not args.length_spread else ():
        print(line)
    searching = args.search == "on" or (args.search == "auto" and cuda)
    for backend, config in configs(args).items() if searching else ():
        ok = [r for r in records if r.backend == backend and r.status == "ok"]
        if not ok:
            continue
        predicted = ok[-1].max_batch_predicted
        found, tried = search(config, max(r.batch_size for r in ok))
        limits[backend] = {"predicted": predicted, "found": found, "probes": [(r.batch_size, r.status) for r in tried]}
        error = f", prediction off by {100 * (predicted - found) / found:+.0f}%" if predicted and found else ""
        print(f"{backend}: largest batch predicted {predicted}, found {found} by eager probes to within "
              f"{100 * SEARCH_TOLERANCE:.0f}% (target: within 10%){error}")
        save()
    if not searching:
        print("largest batch: predicted " + ", ".join(f"{r.backend} {r.max_batch_predicted:,}" for r in records
                                                      if r.status == "ok" and r.batch_size == records[0].batch_size)
              + " (no search: memory runs out only on CUDA here; --search on forces it)")
    if args.chart:
        from playground.ui.charts import batch_memory_figure, batch_throughput_figure

        with open(args.chart, "w") as f:
            for figure in (batch_throughput_figure(records), batch_memory_figure(records)):
                f.write(figure.to_html(full_html=False, include_plotlyjs="cdn"))


if __name__ == "__main__":
    main()
