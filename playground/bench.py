"""`python -m playground bench`: sweep configurations like llama-bench.

Every option takes a comma-separated list; the run set is their Cartesian product, ordered so that
load-time settings (model, device, dtype, attention) change least often and the loaded model is
reused. An invalid or failing combination becomes a row with its status and reason, and the sweep
goes on; the command then ends with a line naming each such row and why, and exits 1. Ctrl-C stops the
run in flight within one decode step, prints the rows finished so far in the chosen format, and exits 130.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable

from playground.config import SETTINGS, ConfigError, RunConfig, Setting
from playground.presets import DEFAULT_MODEL, PRESETS
from playground.printers import PRINTERS, to_jsonl
from playground.record import SETTING_FIELDS, RunRecord, run_name

DEFAULT_PROMPT = "The quick brown fox"  # parsed like a typed --prompt, so it meets the same rule
BENCH_DEFAULTS = {"new_tokens": 128}  # a sweep measures more decode steps than an interactive run
INTERRUPTED = 130  # the shell's code for a command ended by SIGINT
FAILED = 1  # a row did not run (invalid, error, stopped)
SHORT_REASON = 100  # characters of a failed row's reason on the closing line
# Swept fields in loop order, slowest first: load-time settings outermost, so the loaded model is reused.
SWEPT = tuple(sorted((name for name, s in SETTINGS.items() if s.sweep), key=lambda name: not SETTINGS[name].load))
SINGLE = tuple(name for name in SETTINGS if name not in SWEPT and name != "prompt")  # one value for every run


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


def _whole_from(low: int) -> Callable[[str], int]:
    def whole(text: str) -> int:
        value = int(text)
        if value < low:
            raise ValueError(f"{text} is below {low}")
        return value
    return whole


def _prompt(text: str) -> str:
    """The prompt as given, or the config's own reason to refuse it (empty, only whitespace, ...)."""
    try:
        return RunConfig(prompt=text).prompt
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _option(setting: Setting) -> tuple[str, dict]:
    """A setting's CLI option: its flag and add_argument keywords, the allowed values and default in its help."""
    default = BENCH_DEFAULTS.get(setting.name, setting.default)
    choices = ON_OFF if setting.type is bool else setting.choices
    parse = {bool: _on_off, float: float}.get(setting.type) or (_whole_from(setting.bounds[0]) if setting.bounds else str)
    if setting.type is bool:
        default = "on" if default else "off"
    if setting.sweep:  # a comma-separated list, parsed from the default's text too
        allowed = f"whole numbers from {setting.bounds[0]} to {setting.bounds[1]}" if setting.bounds else ""
        help = f"{setting.help}; {_one_of(choices)}" if choices else ", ".join(
            filter(None, [f"comma-separated {setting.help}", allowed]))
        kwargs = dict(type=_list_of(parse, choices), default=None if default is None else str(default))
    else:
        allowed = f", {setting.bounds[0]} to {setting.bounds[1]}" if setting.bounds else ""
        help = (f"one of: {', '.join(choices)}; " if choices else "") + setting.help + allowed
        kwargs = dict(type=parse, default=default, **(dict(choices=choices) if choices else {}))
    flag = (setting.flag or setting.name).replace("_", "-")
    return f"--{flag}", dict(dest=setting.name, metavar=flag.upper().replace("-", "_"), help=help, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground", description="LLM Speed Playground command line")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the built-in models")
    b = sub.add_parser("bench", help="measure the Cartesian product of the given settings",
                       description="Every list option is swept: the runs are the Cartesian product of the lists.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _add_settings(b)
    b.add_argument("--no-profile", action="store_true", help="skip the profiled pass that names the kernels")
    b.add_argument("--no-store", action="store_true", help="do not add the runs to the history store")
    b.add_argument("--format", choices=tuple(PRINTERS), default="md", help=f"one of: {', '.join(PRINTERS)}")
    b.add_argument("--output", type=Path, help="write here instead of stdout; its directory must exist")
    w = sub.add_parser("warm", help="compile the given settings once and keep torch's compile artifacts, so the "
                                    "next process's first compiled call starts warm",
                       description="Runs each setting's cold call (one warm-up pass, one repeat) and saves what "
                                   "torch.compile built where the engine loads it from (PLAYGROUND_COMPILE_CACHE).",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    w.add_argument("models", nargs="*", metavar="MODEL", help="models to warm (the same as --model)")
    _add_settings(w)
    w.set_defaults(repeats=1, warmup=1, no_profile=True)
    return parser


def _add_settings(parser: argparse.ArgumentParser) -> None:
    """Every run setting as an option, from the settings schema."""
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", type=_prompt, default=DEFAULT_PROMPT,
                        help="prompt text, not empty (one prompt; use --prompt-tokens to sweep lengths)")
    for name, setting in SETTINGS.items():
        if name != "prompt":
            flag, kwargs = _option(setting)
            (prompt if name == "prompt_tokens" else parser).add_argument(flag, **kwargs)
    parser.add_argument("--trust-remote-code", action="store_true", help="run code shipped with a hub model")


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
    lists = {name: getattr(args, name) or [None] for name in SWEPT}  # None: no --prompt-tokens, the text prompt
    fixed = dict(prompt=args.prompt, **{name: getattr(args, name) for name in SINGLE},
                 trust_remote_code=args.trust_remote_code, profile_kernels=not args.no_profile)
    combos = []
    for values in itertools.product(*(lists[name] for name in SWEPT)):
        combo = {**fixed, **dict(zip(SWEPT, values))}
        if combo["prompt_tokens"] is not None:
            combo["prompt"] = None
        combos.append(combo)
    return combos


def invalid_record(fields: dict, reason: str) -> RunRecord:
    return RunRecord(**{k: fields[k] for k in SETTING_FIELDS}, status="invalid", reason=reason, config=fields)


def run_bench(args: argparse.Namespace, records: list[RunRecord]) -> None:
    """Run the sweep, appending each finished run to `records` (so an interrupt keeps them)."""
    from tqdm import tqdm

    from playground.engine import describe, run
    from playground.store import RunStore

    store = None if args.no_store else RunStore()
    if store and store.problem:
        print(f"warning: {store.problem}", file=sys.stderr)
    stream = args.output.open("w") if args.output and args.format == "jsonl" else None  # a crash keeps finished runs
    stop = threading.Event()
    try:
        with tqdm(run_set(args), desc="bench", unit="run", file=sys.stderr, dynamic_ncols=True) as bar:
            for fields in bar:
                label = f"{fields['model']} · {run_name(fields)}"
                bar.set_postfix_str(label)
                try:
                    record = run(RunConfig(**fields), stop,
                                 on_phase=lambda phase: bar.set_postfix_str(f"{label} · {describe(phase)}"))
                except ConfigError as exc:
                    record = invalid_record(fields, str(exc))
                if store and record.status == "ok" and store.add(record) is None:
                    print(f"warning: {record.reason}", file=sys.stderr)
                if stream:
                    stream.write(to_jsonl([record], base=records[0] if records else None))
                    stream.flush()
                records.append(record)
    except KeyboardInterrupt:
        stop.set()  # the engine's device thread ends within one decode step
        raise
    finally:
        if stream:
            stream.close()


def run_warm(args: argparse.Namespace) -> int:
    """Compile each setting once, saving its artifacts; prints one line per run, and the run in flight's progress
    (a compile takes minutes on a large model) on stderr. Returns 1 if any run failed."""
    from tqdm import tqdm

    from playground.engine import describe, run

    if args.models:
        args.model = args.models
    code = 0
    bar = tqdm(run_set(args), desc="warm", unit="run", file=sys.stderr, dynamic_ncols=True)
    for fields in bar:
        label = f"{fields['model']} · {run_name(fields)}"
        try:
            record = run(RunConfig(**fields), on_phase=lambda phase: bar.set_postfix_str(describe(phase)))
        except ConfigError as exc:
            print(f"{label}: refused: {exc}")
            code = 1
            continue
        if record.status != "ok":
            print(f"{label}: {record.status}: {record.reason}")
            code = 1
        elif not record.compile_cache:
            print(f"{label}: nothing to keep ({'compile is off' if fields['compile'] == 'off' else 'no cache used'})")
        else:
            print(f"{label}: cold call {record.cold_e2e_ms / 1e3:.1f} s, compile cache {record.compile_cache}, "
                  f"then {record.decode_tok_s:.1f} tok/s decode")
    return code


def _short(reason: str) -> str:
    """A reason's first line, cut at a word to at most SHORT_REASON characters (the row's status cell has it all)."""
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    if len(first) <= SHORT_REASON:
        return first
    return first[:SHORT_REASON].rsplit(" ", 1)[0].rstrip(",;:(") + " …"


def failures_line(records: list[RunRecord]) -> str:
    """The closing line of a sweep with rows that did not run: each by its row number and name, and why; "" when
    every row ran."""
    failed = [f"row {i} ({r.name}) {r.status}: {_short(r.reason)}" for i, r in enumerate(records, 1)
              if r.status != "ok"]
    return f"{len(failed)} of {len(records)} row(s) failed: " + "; ".join(failed) if failed else ""


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
    if args.command == "warm":
        return run_warm(args)
    check_output(parser, args.output)
    records: list[RunRecord] = []
    code = 0
    try:
        run_bench(args, records)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(records)} of {len(run_set(args))} run(s) finished; printing those",
              file=sys.stderr)
        code = INTERRUPTED
    if not (args.output and args.format == "jsonl"):  # else already written run by run
        text = PRINTERS[args.format](records)
        if args.output:
            args.output.write_text(text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()  # the table, then the closing line
    failed = failures_line(records)
    if failed:
        print(failed, file=sys.stderr)
    return code or (FAILED if failed else 0)
