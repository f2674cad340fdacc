"""A model split across devices against the same configuration on one device, one engine run each.

Tensor parallel (transformers' `tp_plan="auto"`, one process per device) shards every layer's matmuls,
so each device reads a share of the weights per token and the ranks then exchange activations
(all-reduce after the attention and MLP outputs). Whether that pays at batch 1 depends on how the
saved weight reads compare with the collectives' cost: the table prints both, decode tok/s and time in
collectives per step (rank 0's profiled pass), with greedy ids checked against the one-device run.

    python -m benchmarks.parallel                                   # CPU: the shipped model over 2 processes (gloo)
    python -m benchmarks.parallel --model llama-3.1-8b-shape --devices 2 --dtype bf16 --compile reduce-overhead
                                                                    # GPUs (NCCL); bash benchmarks/h200.sh tp-8b

A random-weight preset is written once as a checkpoint for the ranks to load (playground.checkpoint).
"""

from __future__ import annotations

import argparse

from benchmarks import write_json
from playground.config import RunConfig
from playground.engine import run
from playground.metrics import first_difference
from playground.presets import DEFAULT_MODEL
from playground.record import RunRecord, environment

TARGET = 1.3  # tensor parallel on 2 H200s against one, Llama-3.1-8B shape, static cache + compile
HEADER = ("split", "decode tok/s", "vs one device", "collectives ms / step", "weights MB per device",
          "peak MB per device", "greedy ids")


def row(record: RunRecord, one: RunRecord) -> tuple[str, ...]:
    split = record.config.get("parallel")
    label = f"tp x{record.config.get('devices')}" if split == "tp" else split
    if record.status != "ok":
        return (label, f"{record.status}: {record.reason}")
    if one.status != "ok":  # e.g. a model that does not fit on one device: nothing to compare with
        ratio, same = "-", "-"
    else:
        diff = first_difference(one.output_ids, record.output_ids)
        ratio = f"{record.decode_tok_s / one.decode_tok_s:.2f}x"
        same = "identical" if diff is None else f"differ from token {diff}"
    return (label, f"{record.decode_tok_s:.1f} ± {record.decode_tok_s_std or 0:.1f}", ratio,
            "-" if record.comm_ms_per_step is None else f"{record.comm_ms_per_step:.2f}",
            _per_rank(record.rank_weights_mb or [record.weights_mb]),
            _per_rank(record.rank_peak_mem_mb or [record.peak_mem_mb]), same)


def _per_rank(values: list[float | None]) -> str:
    return " / ".join("?" if v is None else f"{v:,.1f}" for v in values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a checkpoint: a shipped preset, a directory or a hub id")
    parser.add_argument("--devices", default="2", help="comma-separated device counts for tensor parallel")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--compile", default="off")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="also write every record and the table as JSON here")
    args = parser.parse_args(argv)
    base = RunConfig(model=args.model, prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens,
                     repeats=args.repeats, dtype=args.dtype, compile=args.compile,
                     cache_impl="dynamic" if args.compile == "off" else "static")
    env = environment()
    print(f"{args.model}, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, 1 warm-up + {args.repeats} "
          f"repeats, dtype {args.dtype}, compile {args.compile}; {env['device_name']}, torch {env['torch']}, "
          f"commit {env['project_commit']}\n")
    print("| " + " | ".join(HEADER) + " |\n|" + " --- |" * len(HEADER), flush=True)
    one = run(base)
    records, table = [one], [row(one, one)]
    print("| " + " | ".join(table[-1]) + " |", flush=True)
    for devices in (int(d) for d in args.devices.split(",")):
        record = run(base.replace(parallel="tp", devices=devices))
        records.append(record)
        table.append(row(record, one))
        print("| " + " | ".join(table[-1]) + " |", flush=True)
        write_json(args.output, {"table": table, "records": [r.to_dict() for r in records], "env": env,
                                 "args": vars(args)})
    two = next((r for r in records[1:] if r.config.get("devices") == 2 and r.status == "ok"), None)
    if two is not None and one.status == "ok" and one.device_effective == "cuda":
        speedup = two.decode_tok_s / one.decode_tok_s
        print(f"\ntensor parallel on 2 GPUs: {speedup:.2f}x one GPU (target >= {TARGET}x on 2 H200s, Llama-3.1-8B "
              f"shape, static cache + compile): {'met' if speedup >= TARGET else 'missed'}")


if __name__ == "__main__":
    main()
