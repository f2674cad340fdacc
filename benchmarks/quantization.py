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
    python -m benchmarks.quantization --quant none,int8 --compile reduce-overhead   # CUDA: static cache, compiled
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playground import kernels, quality
from playground.config import RunConfig
from playground.engine import run
from playground.loader import MODELS
from playground.metrics import first_difference
from playground.presets import PRESETS
from playground.record import RunRecord, environment

HELDOUT = Path(__file__).resolve().parent.parent / "tests" / "models" / "data" / "heldout_sample.jsonl"
PROMPT = "If the file does not exist, the function"
HEADER = ("quant", "decode tok/s", "vs none", "weights MB", "peak MB", "quality", "first diff vs none", "kernels")


def _quality(config: RunConfig, record: RunRecord, reference_logits) -> str:
    """Perplexity on the held-out sample for a trained model, else the logit error against `none`."""
    lm, _ = MODELS.get(config.model, record.device_effective, record.dtype_effective, config.transformers_attn,
                       quant=config.quant)  # the engine's loaded model, reused
    if not lm.random_weights:
        return f"ppl {quality.perplexity(lm.model, lm.tokenizer, quality.heldout_texts(HELDOUT)):.2f}"
    ids = lm.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    if reference_logits is None:
        return "logit err: reference"
    err = quality.logit_error(quality.logits(lm.model, ids), reference_logits)
    return f"logit err {err.max_abs:.3g} ({100 * err.relative:.2g}%)"


def _kernels(record: RunRecord) -> str:
    """The decode step's matmuls, "(deq)" when none is a quantized kernel of the requested kind."""
    names = record.matmul_kernels.get("decode", [])
    seen = kernels.PhaseKernels(matmuls=names, quant_families=kernels.matmul_families(names)[1])
    return f"{', '.join(names) or '-'}{' (deq)' if kernels.quant_fallback(record.quant, {'decode': seen}) else ''}"


def rows(base: RunConfig, quants: list[str]) -> list[tuple[str, ...]]:
    """One row per quantization; `none` first, as the reference every other row is compared with."""
    reference, reference_logits, table = None, None, []
    for quant in ["none"] + [q for q in quants if q != "none"]:
        config = base.replace(quant=quant)
        record = run(config)
        if record.status != "ok":
            table.append((quant, f"refused: {record.reason}"))
            continue
        fidelity = _quality(config, record, reference_logits)
        if reference is None:
            reference = record
            lm, _ = MODELS.get(config.model, record.device_effective, record.dtype_effective, config.transformers_attn)
            reference_logits = quality.logits(lm.model, lm.tokenizer(PROMPT, return_tensors="pt")["input_ids"])
        diff = first_difference(reference.output_ids, record.output_ids)
        table.append((quant, f"{record.decode_tok_s:.1f} ± {record.decode_tok_s_std or 0:.1f}",
                      f"{record.decode_tok_s / reference.decode_tok_s:.2f}x", f"{record.weights_mb:.1f}",
                      f"{record.peak_mem_mb:.1f}", fidelity, "none" if diff is None else f"token {diff}",
                      _kernels(record)))
    return table


def markdown(table: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" if len(row) == len(HEADER)
              else f"| {row[0]} | {row[1]} |" + " |" * (len(HEADER) - 2) for row in table]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="stdlib-llama-tiny", choices=sorted(PRESETS))
    parser.add_argument("--quant", default="none,int8", help="comma-separated quantizations; none is always run")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compile", default="off")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    static = args.compile != "off"
    base = RunConfig(model=args.model, prompt=PROMPT, new_tokens=args.new_tokens, repeats=args.repeats,
                     dtype=args.dtype, device=args.device, compile=args.compile,
                     cache_impl="static" if static else "dynamic")
    table = rows(base, args.quant.split(","))
    env = environment()
    print(f"{args.model}, prompt {PROMPT!r}, {args.new_tokens} new tokens, 1 warm-up + {args.repeats} repeats, "
          f"dtype {args.dtype}, compile {args.compile}; {env['device_name']}, torch {env['torch']}, "
          f"commit {env['project_commit']}\n")
    print(markdown(table))


if __name__ == "__main__":
    main()
