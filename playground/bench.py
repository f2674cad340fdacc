"""`python -m playground bench`: sweep configurations like llama-bench.

Every option takes a comma-separated list; the run set is their Cartesian product, ordered so that
load-time settings (model, device, dtype, attention) change least often and the loaded model is
reused. An invalid or failing combination becomes a row with its status and reason, and the sweep
goes on.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Callable, Iterable

from playground.config import (ATTENTIONS, BACKENDS, CACHE_IMPLS, COMPILE_MODES, DEVICES, DTYPES, MODES, ConfigError,
                               RunConfig)
from playground.presets import DEFAULT_MODEL, PRESETS
from playground.printers import PRINTERS, to_jsonl
from playground.record import RunRecord

# Swept fields in loop order, slowest first: load-time settings outermost.
SWEPT = ("model", "device", "dtype", "attn", "backend", "use_cache", "cache_impl", "compile", "prompt_tokens",
         "new_tokens", "batch_size")


def _list_of(parse: Callable[[str], object], choices: Iterable[str] | None = None):
    choices = tuple(choices) if choices else None

    def parse_list(text: str) -> list:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        for item in items:
            if choices and item not in choices:
                raise argparse.ArgumentTypeError(f"{item!r} is not one of: {', '.join(choices)}")
        try:
            return [parse(item) for item in items]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return parse_list


def _on_off(text: str) -> bool:
    return {"on": True, "off": False}[text]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{text} is not a positive whole number")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground", description="LLM Speed Playground command line")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the built-in models")
    b = sub.add_parser("bench", help="measure the Cartesian product of the given settings",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    b.add_argument("--model", type=_list_of(str), default=[DEFAULT_MODEL], help="presets, hub ids or local dirs")
    b.add_argument("--attn", type=_list_of(str, ATTENTIONS), default=["sdpa"])
    b.add_argument("--backend", type=_list_of(str, BACKENDS), default=["transformers"],
                   help="transformers generate, or the fast static-cache decoder")
    b.add_argument("--cache", type=_list_of(_on_off, ("on", "off")), default=[True], help="KV cache on,off")
    b.add_argument("--cache-impl", type=_list_of(str, CACHE_IMPLS), default=["dynamic"])
    b.add_argument("--dtype", type=_list_of(str, DTYPES), default=["auto"])
    b.add_argument("--compile", type=_list_of(str, COMPILE_MODES), default=["off"])
    prompt = b.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="prompt text (one prompt; use --prompt-tokens to sweep lengths)")
    prompt.add_argument("--prompt-tokens", type=_list_of(_positive_int), help="synthetic prompt lengths")
    b.add_argument("--new-tokens", type=_list_of(_positive_int), default=[128])
    b.add_argument("--batch-size", type=_list_of(_positive_int), default=[1])
    b.add_argument("--device", type=_list_of(str, DEVICES), default=["auto"])
    b.add_argument("--mode", choices=MODES, default="benchmark", help="benchmark: exactly N tokens; free: EOS may end")
    b.add_argument("--repeats", type=_positive_int, default=3)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    b.add_argument("--trust-remote-code", action="store_true", help="run code shipped with a hub model")
    b.add_argument("--no-profile", action="store_true", help="skip the profiled pass that names the kernels")
    b.add_argument("--no-store", action="store_true", help="do not add the runs to the history store")
    b.add_argument("--format", choices=tuple(PRINTERS), default="md")
    b.add_argument("--output", type=Path, help="write here instead of stdout")
    return parser


def run_set(args: argparse.Namespace) -> list[dict]:
    """The Cartesian product of the swept options, as RunConfig keyword sets."""
    lists = {
        "model": args.model, "device": args.device, "dtype": args.dtype, "attn": args.attn, "backend": args.backend,
        "use_cache": args.cache, "cache_impl": args.cache_impl, "compile": args.compile,
        "prompt_tokens": args.prompt_tokens or [None], "new_tokens": args.new_tokens, "batch_size": args.batch_size,
    }
    fixed = dict(prompt=args.prompt if args.prompt or args.prompt_tokens else "The quick brown fox",
                 mode=args.mode, repeats=args.repeats, warmup=args.warmup, seed=args.seed,
                 temperature=args.temperature, trust_remote_code=args.trust_remote_code,
                 profile_kernels=not args.no_profile)
    combos = []
    for values in itertools.product(*(lists[name] for name in SWEPT)):
        combo = {**fixed, **dict(zip(SWEPT, values))}
        if combo["prompt_tokens"] is not None:
            combo["prompt"] = None
        combos.append(combo)
    return combos


def invalid_record(fields: dict, reason: str) -> RunRecord:
    keep = ("model", "backend", "attn", "use_cache", "cache_impl", "dtype", "compile", "device", "batch_size",
            "prompt_tokens", "new_tokens", "mode", "repeats", "warmup")
    return RunRecord(**{k: fields[k] for k in keep}, status="invalid", reason=reason, config=fields)


def run_bench(args: argparse.Namespace) -> list[RunRecord]:
    from tqdm import tqdm

    from playground.engine import run
    from playground.store import RunStore

    store = None if args.no_store else RunStore()
    stream = args.output.open("w") if args.output and args.format == "jsonl" else None  # a crash keeps finished runs
    records = []
    combos = run_set(args)
    with tqdm(combos, desc="bench", unit="run", file=sys.stderr, dynamic_ncols=True) as bar:
        for fields in bar:
            bar.set_postfix_str(f"{fields['model']} {fields['backend']} {fields['attn']} "
                                f"cache={'on' if fields['use_cache'] else 'off'} "
                                f"{fields['dtype']} compile={fields['compile']}")
            try:
                record = run(RunConfig(**fields))
            except ConfigError as exc:
                record = invalid_record(fields, str(exc))
            if store and record.status == "ok":
                store.add(record)
            if stream:
                stream.write(to_jsonl([record]))
                stream.flush()
            records.append(record)
    if stream:
        stream.close()
    return records


def list_models() -> str:
    width = max(len(name) for name in PRESETS)
    lines = [f"{name:<{width}}  {p.summary}" + ("  (default)" if name == DEFAULT_MODEL else "")
             for name, p in PRESETS.items()]
    lines.append("Any Hugging Face id (owner/name) or local directory also works where the network or files allow.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "models":
        sys.stdout.write(list_models())
        return 0
    records = run_bench(args)
    if args.output and args.format == "jsonl":
        return 0  # already written run by run
    text = PRINTERS[args.format](records)
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0
