"""Render run records as markdown, CSV, JSON or JSONL: one record, many printers.

A field table drives every printer, so a new figure is one line here and not an `if` per format.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Callable, Iterable

from playground.config import SETTINGS
from playground.diagnostics import HEADLINES
from playground.metrics import speedup
from playground.record import RunRecord

# Fields of the flat JSON/CSV row, in order, then any setting with a column that the record keeps only in its
# config. Nested fields (kernels, env, ids) stay nested in JSON.
_ROW_FIELDS = (
    "run_id", "created_at", "label", "name", "model", "backend", "attn", "attn_effective", "use_cache", "cache_impl",
    "cache_impl_effective", "dtype",
    "dtype_effective", "quant", "quant_effective", "quant_weights", "spec", "spec_effective", "draft_tokens",
    "draft_tokens_max", "draft_model", "compile", "compiled", "device", "device_effective", "batch_size", "prompt_tokens",
    "new_tokens", "tokens_generated", "mode", "repeats", "warmup", "status", "reason", "ttft_ms", "ttft_ms_std",
    "decode_tok_s", "decode_tok_s_std", "aggregate_decode_tok_s", "aggregate_decode_tok_s_std", "itl_ms_p50",
    "itl_ms_p90", "itl_ms_p99", "e2e_ms", "e2e_ms_std", "ttft_speedup", "decode_speedup",
    "prompt_real_tokens", "prompt_padded_tokens", "padding_pct",
    "load_s", "cold_ttft_ms", "cold_e2e_ms", "compile_s", "compile_cache", "peak_mem_mb", "peak_mem_kind", "weights_mb", "kv_cache_mb",
    "kv_bytes_per_token", "kv_bytes_per_token_measured", "max_batch_predicted",
    "gpu_busy_pct", "host_other_cpu_pct", "bandwidth_gb_s", "roofline_weight_mb", "roofline_kv_mb", "roofline_kv_read", "roofline_tok_s",
    "bandwidth_roofline_pct", "prefill_tflop_s", "target_steps", "drafted_tokens", "accepted_tokens",
    "acceptance_rate", "tokens_per_step", "draft_share_pct", "draft_step_ms", "verify_step_ms", "fallback", "random_weights",
)
ROW_FIELDS = _ROW_FIELDS + tuple(name for name, s in SETTINGS.items() if s.column and name not in _ROW_FIELDS)
JSON_EXTRA = ("attn_kernels", "attn_families", "matmul_kernels", "decode_top_kernels", "output_ids", "env", "config")

# Markdown: settings columns appear only when they vary; figures always appear.
SETTING_COLUMNS = tuple((name, s.column) for name, s in SETTINGS.items() if s.column)
# Speedups against the first row (>1: faster than it), on the figures diagnostics compares A and B on.
SPEEDUPS = {"ttft": "TTFT ×", "decode": "decode ×"}


def speedup_over(base: RunRecord | None, record: RunRecord, headline: str) -> float | None:
    """How many times faster `record` ran than `base` on a headline figure (ttft, decode); None where either
    has no figure."""
    if base is None or record.status != "ok" or base.status != "ok":
        return None
    field, higher_is_better = HEADLINES[headline]
    return speedup(getattr(base, field), getattr(record, field), higher_is_better)


def _derived(record: RunRecord, base: RunRecord | None) -> dict[str, Any]:
    """The row fields a record does not hold: its name and its speedups over the first row."""
    return {"name": record.name, **{f"{headline}_speedup": speedup_over(base, record, headline)
                                    for headline in SPEEDUPS}}


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _pm(mean: float | None, std: float | None, digits: int = 1) -> str:
    return "" if mean is None else f"{mean:,.{digits}f} ± {std or 0:,.{digits}f}"


# (title, cell of a record given the table's first row)
FIGURE_COLUMNS: tuple[tuple[str, Callable[[RunRecord, RunRecord | None], str]], ...] = (
    ("status", lambda r, _: r.status if r.status == "ok" else f"{r.status}: {r.reason}"),
    ("TTFT ms", lambda r, _: _pm(r.ttft_ms, r.ttft_ms_std, 2)),
    (SPEEDUPS["ttft"], lambda r, base: _num(speedup_over(base, r, "ttft"), 2)),
    ("prefill TFLOP/s", lambda r, _: _num(r.prefill_tflop_s, 2)),
    ("decode tok/s", lambda r, _: _pm(r.decode_tok_s, r.decode_tok_s_std)),
    (SPEEDUPS["decode"], lambda r, base: _num(speedup_over(base, r, "decode"), 2)),
    ("all rows tok/s", lambda r, _: _pm(r.aggregate_decode_tok_s, r.aggregate_decode_tok_s_std) if r.batch_size > 1 else ""),
    ("padding %", lambda r, _: _num(r.padding_pct, 0) if r.prompt_padded_tokens else ""),
    ("ITL p50/p99 ms", lambda r, _: "" if r.itl_ms_p50 is None else f"{r.itl_ms_p50:.2f} / {r.itl_ms_p99:.2f}"),
    ("peak MB", lambda r, _: _num(r.peak_mem_mb, 0)),
    ("KV MB", lambda r, _: _num(r.kv_cache_mb, 1)),
    ("KV B/token config/held", lambda r, _: "" if r.kv_bytes_per_token_measured is None
     else f"{r.kv_bytes_per_token:,} / {r.kv_bytes_per_token_measured:,.0f}"),
    ("fits batch", lambda r, _: _num(r.max_batch_predicted, 0)),
    ("cold s", lambda r, _: _num(r.cold_e2e_ms and r.cold_e2e_ms / 1e3, 2)),
    ("compile s", lambda r, _: _num(r.compile_s, 1)),
    ("GPU busy %", lambda r, _: _num(r.gpu_busy_pct, 0)),
    ("other CPU %", lambda r, _: _num(r.host_other_cpu_pct, 0)),
    ("roofline %", lambda r, _: _num(r.bandwidth_roofline_pct, 1)),
    ("accepted %", lambda r, _: _num(r.acceptance_rate and 100 * r.acceptance_rate, 0)),
    ("tok/target step", lambda r, _: _num(r.tokens_per_step, 2)),
    ("draft time %", lambda r, _: _num(r.draft_share_pct, 0)),
    ("kernels (decode)", lambda r, _: ", ".join(r.attn_families.get("decode", []))),
    ("fallback", lambda r, _: f"⚠ {r.fallback}" if r.fallback else ""),
)


def row(record: RunRecord, base: RunRecord | None = None) -> dict[str, Any]:
    """The flat row of a record; `base` is the first row of its table, which the speedups compare against."""
    derived = _derived(record, base)
    return {key: derived[key] if key in derived else record.value(key) for key in ROW_FIELDS}


def to_json(records: Iterable[RunRecord]) -> str:
    records = list(records)
    return json.dumps([{**row(r, records[0]), **{k: getattr(r, k) for k in JSON_EXTRA}} for r in records], indent=2)


def to_jsonl(records: Iterable[RunRecord], base: RunRecord | None = None) -> str:
    """One record per line, with its name and speedups over `base` (else over the first of `records`)."""
    records = list(records)
    base = base or (records[0] if records else None)
    return "".join(json.dumps({**r.to_dict(), **_derived(r, base)}) + "\n" for r in records)


def to_csv(records: Iterable[RunRecord]) -> str:
    records = list(records)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=ROW_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow(row(r, records[0]))
    return out.getvalue()


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _text(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else "" if value is None else str(value)


def setting_text(record: RunRecord, name: str) -> str:
    """A setting's cell: what ran; where that is not what was asked (and the ask was not auto), "asked → ran"
    (spec=prompt_lookup that drafted nothing reads "prompt_lookup → none")."""
    asked, ran = record.value(name), record.setting(name)
    if ran == asked or asked == "auto":
        return _text(ran)
    return f"{_text(asked)} → {_text(ran)}"


def to_markdown(records: Iterable[RunRecord]) -> str:
    records = list(records)
    base = records[0] if records else None
    cells = {name: [setting_text(r, name) for r in records] for name, _ in SETTING_COLUMNS}
    varying = [(name, title) for name, title in SETTING_COLUMNS if len(set(cells[name])) > 1]
    speedups = set(SPEEDUPS.values())  # shown where a row other than the first has one
    used_figures = [(title, fn) for title, fn in FIGURE_COLUMNS
                    if any(fn(r, base) for r in records if title not in speedups or r is not base)]
    headers = [title for _, title in varying] + [title for title, _ in used_figures]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for i, r in enumerate(records):
        row_cells = [cells[name][i] for name, _ in varying] + [fn(r, base) for _, fn in used_figures]
        lines.append("| " + " | ".join(_cell(c) for c in row_cells) + " |")
    if records:  # what every row ran with, read from the rows themselves
        common = [f"{title}={cells[name][0]}" for name, title in SETTING_COLUMNS if (name, title) not in varying]
        lines.append("")
        lines.append("Same for all rows: " + ", ".join(common))
    return "\n".join(lines) + "\n"


PRINTERS: dict[str, Callable[[Iterable[RunRecord]], str]] = {
    "md": to_markdown, "csv": to_csv, "json": to_json, "jsonl": to_jsonl,
}
