"""Weight quantization: speed and what it costs in quality, one row per setting, against `none`.

Weight-only quantization cuts the bytes a decode step reads, so on a bandwidth-bound GPU it can only
pay when a kernel multiplies the narrow weights directly; the kernels column (the engine's profiled
pass) shows whether one did or the weights were dequantized for a float matmul (flagged "deq"). Speed
is worthless without quality, so each row also gives held-out perplexity (a trained model: the shipped
`stdlib-llama-tiny`) or the largest logit error against `none` on the prompt (random-weight shapes),
and the first greedy token that differs from `none`.

Every row is an engine run (`run(config)`), so timing, memory and kernel proof are the engine's; a
refused setting prints its reason as the row.

    python -m benchmarks.quantization                                        # CPU: stdlib-llama-tiny, none,int8
    python -m benchmarks.quantization --model llama-3.1-8b-shape --quant none,int8,int4,fp8 --dtype bf16
    python -m benchmarks.quantization --model llama-3.1-8b-shape --quant int8,int4 --dtype bf16 \
        --backend fast --compile reduce-overhead --prompt-tokens 512 --new-tokens 256 --output q.json   # CUDA
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import write_json
from playground import kernels, quality
from playground.config import ConfigError, RunConfig
from playground.engine import run
from playground.loader import MODELS
from playground.metrics import first_difference
from playground.presets import PRESETS
from playground.record import RunRecord, environment

HELDOUT = Path(__file__).resolve().parent.parent / "tests" / "models" / "data" / "heldout_sample.jsonl"
PROMPT = "If the file does not exist, the function"
HEADER = ("backend", "quant", "decode tok/s", "vs none", "% roofline", "cold s", "weights MB", "peak MB", "quality",
          "first diff vs none", "kernels")


def _quality(config: RunConfig, record: RunRecord, reference_logits) -> str:
    """Perplexity on the held-out sample for a trained model, else the logit error against `none`."""
    lm, _ = MODELS.get(config.model, record.device_effective, record.dtype_effective, config.transformers_attn,
                       quant=config.quant)  # the engine's loaded model, reused
    if not lm.random_weights:
        return f"ppl {quality.perplexity(lm.model, lm.tokenizer, quality.heldout_texts(HELDOUT)):.2f}"
    ids = lm.tokenizer(PROMPT, return_tensors="pt")["input_ids"].to(lm.model.device)
    if reference_logits is None:
        return "logit err: reference"
    err = quality.logit_error(quality.logits(lm.model, ids), reference_logits)
    return f"logit err {err.max_abs:.3g} ({100 * err.relative:.2g}%)"


def _logits(config: RunConfig, record: RunRecord):
    """The held model's logits on PROMPT; no reference to the model outlives this call, so the next
    setting's load frees it (a kept reference would add its weights to every later row's peak memory)."""
    lm, _ = MODELS.get(config.model, record.device_effective, record.dtype_effective, config.transformers_attn)
    return quality.logits(lm.model, lm.tokenizer(PROMPT, return_tensors="pt")["input_ids"].to(lm.model.device))


def _kernels(record: RunRecord) -> str:
    """The decode step's matmuls, "(deq)" when none is a quantized kernel of the requested kind."""
    names = record.matmul_kernels.get("decode", [])
    seen = kernels.PhaseKernels(matmuls=names,
                                quant_families=kernels.matmul_families(names, kernels.compiled_kernel_reads())[1])
    return f"{', '.join(names) or '-'}{' (deq)' if kernels.quant_fallback(record.quant, {'decode': seen}) else ''}"


def rows(base: RunConfig, quants: list[str], keep) -> list[tuple[str, ...]]:
    """One row per quantization; `none` first, as the reference every other row is compared with.

    `keep(record, table)` is called as soon as each row is measured or refused (record None: refused by the
    config, before any run)."""
    reference, reference_logits, table = None, None, []
    for quant in ["none"] + [q for q in quants if q != "none"]:
        try:
            config = base.replace(quant=quant)
        except ConfigError as exc:  # refused before loading: a row that says why, and the next setting runs
            table.append((base.backend, quant, f"refused: {exc}"))
            keep(None, table)
            continue
        record = run(config)
        if record.status != "ok":
            table.append((base.backend, quant, f"refused: {record.reason}"))
            keep(record, table)
            continue
        fidelity = _quality(config, record, reference_logits)
        if reference is None:
            reference, reference_logits = record, _logits(config, record)
        diff = first_difference(reference.output_ids, record.output_ids)
        table.append((base.backend, quant, f"{record.decode_tok_s:.1f} ± {record.decode_tok_s_std or 0:.1f}",
                      f"{record.decode_tok_s / reference.decode_tok_s:.2f}x",
                      f"{record.bandwidth_roofline_pct:.0f}" if record.bandwidth_roofline_pct else "-",
                      f"{record.compile_s:.1f}" if record.compile_s else "-", f"{record.weights_mb:.1f}",
                      f"{record.peak_mem_mb:.1f}", fidelity, "none" if diff is None else f"token {diff}",
                      _kernels(record)))
        keep(record, table)
    return table


def markdown(table: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" if len(row) == len(HEADER)
              else "| " + " | ".join(row) + " |" + " |" * (len(HEADER) - len(row)) for row in table]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="stdlib-llama-tiny", choices=sorted(PRESETS))
    parser.add_argument("--quant", default="none,int8", help="comma-separated quantizations; none is always run")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compile", default="off")
    parser.add_argument("--backend", default="transformers", help="comma-separated: transformers, fast")
    parser.add_argument("--attn", default="sdpa")
    parser.add_argument("--prompt-tokens", type=int, default=0, help="a synthetic prompt of N tokens (0: the text)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", help="also write every record and the table as JSON here")
    args = parser.parse_args(argv)
    backends = args.backend.split(",")
    static = args.compile != "off" or "fast" in backends
    prompt = dict(prompt_tokens=args.prompt_tokens) if args.prompt_tokens else dict(prompt=PROMPT)
    base = RunConfig(model=args.model, **prompt, new_tokens=args.new_tokens, repeats=args.repeats,
                     dtype=args.dtype, device=args.device, compile=args.compile, attn=args.attn,
                     cache_impl="static" if static else "dynamic")
    env = environment()
    print(f"{args.model}, prompt {args.prompt_tokens or repr(PROMPT)}, {args.new_tokens} new tokens, 1 warm-up + "
          f"{args.repeats} repeats, dtype {args.dtype}, compile {args.compile}, attn {args.attn}; "
          f"{env['device_name']}, torch {env['torch']}, commit {env['project_commit']}\n", flush=True)
    records: list[RunRecord] = []
    table: list[tuple[str, ...]] = []

    def keep(record: RunRecord | None, backend_rows: list[tuple[str, ...]]) -> None:
        """Print the row and rewrite the JSON file, so a run cut short keeps every finished row."""
        if record is not None:
            records.append(record)
        print(markdown(backend_rows[-1:]).splitlines()[-1], flush=True)
        write_json(args.output, {"table": table + backend_rows, "records": [r.to_dict() for r in records],
                                 "env": env, "args": vars(args)})

    print("\n".join(markdown([]).splitlines()[:2]), flush=True)
    for backend in backends:
        table += rows(base.replace(backend=backend), args.quant.split(","), keep)
    print("\n" + markdown(table))
    for record in records:
        if record.decode_top_kernels:
            print(f"\n{record.backend} {record.quant}: GPU time per decode step by kernel (profiled pass)")
            for name, us in record.decode_top_kernels:
                print(f"  {us:9.1f} µs  {name[:120]}")


if __name__ == "__main__":
    main()
