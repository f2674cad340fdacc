"""Render run records as markdown, CSV, JSON or JSONL: one record, many printers.

A field table drives every printer, so a new figure is one line here and not an `if` per format.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Callable, Iterable

from playground.config import SETTINGS
from playground.record import RunRecord

# Fields of the flat JSON/CSV row, in order, then any setting with a column that the record keeps only in its
# config. Nested fields (kernels, env, ids) stay nested in JSON.
_ROW_FIELDS = (
    "run_id", "created_at", "label", "model", "backend", "attn", "attn_effective", "use_cache", "cache_impl", "dtype",
    "dtype_effective", "quant", "quant_effective", "quant_weights", "spec", "spec_effective", "draft_tokens",
    "draft_tokens_max", "draft_model", "compile", "compiled", "device", "device_effective", "batch_size", "prompt_tokens",
    "new_tokens", "tokens_generated", "mode", "repeats", "warmup", "status", "reason", "ttft_ms", "ttft_ms_std",
    "decode_tok_s", "decode_tok_s_std", "aggregate_decode_tok_s", "aggregate_decode_tok_s_std", "itl_ms_p50",
    "itl_ms_p90", "itl_ms_p99", "e2e_ms", "e2e_ms_std", "prompt_real_tokens", "prompt_padded_tokens", "padding_pct",
    "load_s", "cold_ttft_ms", "cold_e2e_ms", "compile_s", "compile_cache", "peak_mem_mb", "peak_mem_kind", "weights_mb", "kv_cache_mb",
    "kv_bytes_per_token", "kv_bytes_per_token_measured", "max_batch_predicted",
    "gpu_busy_pct", "host_other_cpu_pct", "bandwidth_gb_s", "roofline_weight_mb", "roofline_kv_mb", "roofline_kv_read", "roofline_tok_s",
    "bandwidth_roofline_pct", "prefill_tflop_s", "target_steps", "drafted_tokens", "accepted_tokens",
    "acceptance_rate", "tokens_per_step", "draft_share_pct", "draft_step_ms", "verify_step_ms", "fallback", "random_weights",
)
ROW_FIELDS = _ROW_FIELDS + tuple(name for name, s in SETTINGS.items() if s.column and name not in _ROW_FIELDS)
JSON_EXTRA = ("attn_kernels", "attn_families", "matmul_kernels", "decode_top_kernels", "output_ids", "env", "config")

# Markdown: settings columns appear only when they vary; figures always appear.
SETTING_COLUMNS = tuple((f"{name}_effective" if s.effective else name, s.column)
                        for name, s in SETTINGS.items() if s.column)


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _pm(mean: float | None, std: float | None, digits: int = 1) -> str:
    return "" if mean is None else f"{mean:,.{digits}f} ± {std or 0:,.{digits}f}"


FIGURE_COLUMNS: tuple[tuple[str, Callable[[RunRecord], str]], ...] = (
    ("status", lambda r: r.status if r.status == "ok" else f"{r.status}: {r.reason}"),
    ("TTFT ms", lambda r: _pm(r.ttft_ms, r.ttft_ms_std, 2)),
    ("prefill TFLOP/s", lambda r: _num(r.prefill_tflop_s, 2)),
    ("decode tok/s", lambda r: _pm(r.decode_tok_s, r.decode_tok_s_std)),
    ("all rows tok/s", lambda r: _pm(r.aggregate_decode_tok_s, r.aggregate_decode_tok_s_std) if r.batch_size > 1 else ""),
    ("padding %", lambda r: _num(r.padding_pct, 0) if r.prompt_padded_tokens else ""),
    ("ITL p50/p99 ms", lambda r: "" if r.itl_ms_p50 is None else f"{r.itl_ms_p50:.2f} / {r.itl_ms_p99:.2f}"),
    ("peak MB", lambda r: _num(r.peak_mem_mb, 0)),
    ("KV MB", lambda r: _num(r.kv_cache_mb, 1)),
    ("KV B/token config/held", lambda r: "" if r.kv_bytes_per_token_measured is None
     else f"{r.kv_bytes_per_token:,} / {r.kv_bytes_per_token_measured:,.0f}"),
    ("fits batch", lambda r: _num(r.max_batch_predicted, 0)),
    ("cold s", lambda r: _num(r.cold_e2e_ms and r.cold_e2e_ms / 1e3, 2)),
    ("compile s", lambda r: _num(r.compile_s, 1)),
    ("GPU busy %", lambda r: _num(r.gpu_busy_pct, 0)),
    ("other CPU %", lambda r: _num(r.host_other_cpu_pct, 0)),
    ("roofline %", lambda r: _num(r.bandwidth_roofline_pct, 1)),
    ("accepted %", lambda r: _num(r.acceptance_rate and 100 * r.acceptance_rate, 0)),
    ("tok/target step", lambda r: _num(r.tokens_per_step, 2)),
    ("draft time %", lambda r: _num(r.draft_share_pct, 0)),
    ("kernels (decode)", lambda r: ", ".join(r.attn_families.get("decode", []))),
    ("fallback", lambda r: f"⚠ {r.fallback}" if r.fallback else ""),
)


def row(record: RunRecord) -> dict[str, Any]:
    return {key: record.value(key) for key in ROW_FIELDS}


def to_json(records: Iterable[RunRecord]) -> str:
    return json.dumps([{**row(r), **{k: getattr(r, k) for k in JSON_EXTRA}} for r in records], indent=2)


def to_jsonl(records: Iterable[RunRecord]) -> str:
    return "".join(json.dumps(r.to_dict()) + "\n" for r in records)


def to_csv(records: Iterable[RunRecord]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=ROW_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow(row(r))
    return out.getvalue()


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _setting(record: RunRecord, key: str) -> str:
    value = record.value(key)
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def to_markdown(records: Iterable[RunRecord]) -> str:
    records = list(records)
    varying = [(key, title) for key, title in SETTING_COLUMNS
               if len({json.dumps(r.value(key)) for r in records}) > 1]
    used_figures = [(title, fn) for title, fn in FIGURE_COLUMNS if any(fn(r) for r in records)]
    headers = [title for _, title in varying] + [title for title, _ in used_figures]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in records:
        cells = [_setting(r, key) for key, _ in varying] + [fn(r) for _, fn in used_figures]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if records:
        common = [f"{title}={_setting(records[0], key)}" for key, title in SETTING_COLUMNS if (key, title) not in varying]
        lines.append("")
        lines.append("Same for all rows: " + ", ".join(common))
    return "\n".join(lines) + "\n"


PRINTERS: dict[str, Callable[[Iterable[RunRecord]], str]] = {
    "md": to_markdown, "csv": to_csv, "json": to_json, "jsonl": to_jsonl,
}
