"""`python -m playground bench`: sweep configurations like llama-bench.

Every option takes a comma-separated list; the run set is their Cartesian product, ordered so that
load-time settings (model, device, dtype, attention) change least often and the loaded model is
reused. An invalid or failing combination becomes a row with its status and reason, and the sweep
goes on. Ctrl-C stops the run in flight within one decode step, prints the rows finished so far in
the chosen format, and exits 130.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable

from playground.config import (ATTENTIONS, BACKENDS, CACHE_IMPLS, COMPILE_MODES, DEVICES, DTYPES, MAX_BATCH_SIZE,
                               MAX_NEW_TOKENS, MAX_PROMPT_TOKENS, MAX_REPEATS, MODES, ConfigError, RunConfig)
from playground.presets import DEFAULT_MODEL, PRESETS
from playground.printers import PRINTERS, to_jsonl
from playground.record import RunRecord

DEFAULT_PROMPT = "The quick brown fox"  # parsed like a typed --prompt, so it meets the same rule
INTERRUPTED = 130  # the shell's code for a command ended by SIGINT
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


def _one_of(choices: Iterable[str]) -> str:
    return f"comma-separated, from: {', '.join(choices)}"


ON_OFF = ("on", "off")


def _on_off(text: str) -> bool:
    return {"on": True, "off": False}[text]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{text} is not a positive whole number")
    return value


def _prompt(text: str) -> str:
    """The prompt as given, or the config's own reason to refuse it (empty, only whitespace, ...)."""
    try:
        return RunConfig(prompt=text).prompt
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground", description="LLM Speed Playground command line")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the built-in models")
    b = sub.add_parser("bench", help="measure the Cartesian product of the given settings",
                       description="Every list option is swept: the runs are the Cartesian product of the lists.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    b.add_argument("--model", type=_list_of(str), default=DEFAULT_MODEL,
                   help=f"comma-separated presets ({', '.join(PRESETS)}), Hugging Face ids or local directories")
    b.add_argument("--attn", type=_list_of(str, ATTENTIONS), default="sdpa",
                   help=f"attention implementation; {_one_of(ATTENTIONS)}")
    b.add_argument("--backend", type=_list_of(str, BACKENDS), default="transformers",
                   help=f"transformers generate, or the fast static-cache decoder; {_one_of(BACKENDS)}")
    b.add_argument("--cache", type=_list_of(_on_off, ON_OFF), default="on", help=f"KV cache; {_one_of(ON_OFF)}")
    b.add_argument("--cache-impl", type=_list_of(str, CACHE_IMPLS), default="dynamic",
                   help=f"KV cache layout; {_one_of(CACHE_IMPLS)}")
    b.add_argument("--dtype", type=_list_of(str, DTYPES), default="auto", help=f"weight dtype; {_one_of(DTYPES)}")
    b.add_argument("--compile", type=_list_of(str, COMPILE_MODES), default="off",
                   help=f"torch.compile mode; {_one_of(COMPILE_MODES)}")
    prompt = b.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", type=_prompt, default=DEFAULT_PROMPT,
                        help="prompt text, not empty (one prompt; use --prompt-tokens to sweep lengths)")
    prompt.add_argument("--prompt-tokens", type=_list_of(_positive_int),
                        help=f"comma-separated synthetic prompt lengths, whole numbers from 1 to {MAX_PROMPT_TOKENS}, "
                             "instead of --prompt")
    b.add_argument("--new-tokens", type=_list_of(_positive_int), default="128",
                   help=f"comma-separated tokens to generate, whole numbers from 1 to {MAX_NEW_TOKENS}")
    b.add_argument("--batch-size", type=_list_of(_positive_int), default="1",
                   help=f"comma-separated batch sizes, whole numbers from 1 to {MAX_BATCH_SIZE}")
    b.add_argument("--device", type=_list_of(str, DEVICES), default="auto", help=_one_of(DEVICES))
    b.add_argument("--mode", choices=MODES, default="benchmark",
                   help=f"one of: {', '.join(MODES)}; benchmark: exactly N tokens; free: EOS may end")
    b.add_argument("--repeats", type=_positive_int, default=3,
                   help=f"measured passes per run, 1 to {MAX_REPEATS}; results are mean ± stddev")
    b.add_argument("--warmup", type=int, default=1, help=f"unmeasured passes first, 0 to {MAX_REPEATS}")
    b.add_argument("--seed", type=int, default=0, help="random seed for sampling and synthetic prompts")
    b.add_argument("--temperature", type=float, default=0.0, help="sampling temperature from 0 (greedy) to 10")
    b.add_argument("--trust-remote-code", action="store_true", help="run code shipped with a hub model")
    b.add_argument("--no-profile", action="store_true", help="skip the profiled pass that names the kernels")
    b.add_argument("--no-store", action="store_true", help="do not add the runs to the history store")
    b.add_argument("--format", choices=tuple(PRINTERS), default="md", help=f"one of: {', '.join(PRINTERS)}")
    b.add_argument("--output", type=Path, help="write here instead of stdout; its directory must exist")
    return parser


def check_output(parser: argparse.ArgumentParser, output: Path | None) -> None:
    """Refuse an --output that cannot be written before the sweep runs, not after."""
    if output is None:
        return
    folder = output.parent
    if not folder.is_dir():
        parser.error(f"--output {output}: the directory {folder} does not exist")
    if output.is_dir():
        parser.error(f"--output {output} is a directory; give a file name")
    if not os.access(folder, os.W_OK):
        parser.error(f"--output {output}: the directory {folder} is not writable")


def run_set(args: argparse.Namespace) -> list[dict]:
    """The Cartesian product of the swept options, as RunConfig keyword sets."""
    lists = {
        "model": args.model, "device": args.device, "dtype": args.dtype, "attn": args.attn, "backend": args.backend,
        "use_cache": args.cache, "cache_impl": args.cache_impl, "compile": args.compile,
        "prompt_tokens": args.prompt_tokens or [None], "new_tokens": args.new_tokens, "batch_size": args.batch_size,
    }
    fixed = dict(prompt=args.prompt,
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


def run_bench(args: argparse.Namespace, records: list[RunRecord]) -> None:
    """Run the sweep, appending each finished run to `records` (so an interrupt keeps them)."""
    from tqdm import tqdm

    from playground.engine import run
    from playground.store import RunStore

    store = None if args.no_store else RunStore()
    if store and store.problem:
        print(f"warning: {store.problem}", file=sys.stderr)
    stream = args.output.open("w") if args.output and args.format == "jsonl" else None  # a crash keeps finished runs
    stop = threading.Event()
    try:
        with tqdm(run_set(args), desc="bench", unit="run", file=sys.stderr, dynamic_ncols=True) as bar:
            for fields in bar:
                bar.set_postfix_str(f"{fields['model']} {fields['backend']} {fields['attn']} "
                                    f"cache={'on' if fields['use_cache'] else 'off'} "
                                    f"{fields['dtype']} compile={fields['compile']}")
                try:
                    record = run(RunConfig(**fields), stop)
                except ConfigError as exc:
                    record = invalid_record(fields, str(exc))
                if store and record.status == "ok" and store.add(record) is None:
                    print(f"warning: {record.reason}", file=sys.stderr)
                if stream:
                    stream.write(to_jsonl([record]))
                    stream.flush()
                records.append(record)
    except KeyboardInterrupt:
        stop.set()  # the engine's device thread ends within one decode step
        raise
    finally:
        if stream:
            stream.close()


def list_models() -> str:
    width = max(len(name) for name in PRESETS)
    lines = [f"{name:<{width}}  {p.summary}" + ("  (default)" if name == DEFAULT_MODEL else "")
             for name, p in PRESETS.items()]
    lines.append("Any Hugging Face id (owner/name) or local directory also works where the network or files allow.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "models":
        sys.stdout.write(list_models())
        return 0
    check_output(parser, args.output)
    records: list[RunRecord] = []
    code = 0
    try:
        run_bench(args, records)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(records)} of {len(run_set(args))} run(s) finished; printing those",
              file=sys.stderr)
        code = INTERRUPTED
    if args.output and args.format == "jsonl":
        return code  # already written run by run
    text = PRINTERS[args.format](records)
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return code
