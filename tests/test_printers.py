"""The printers: speedups over the first row, the settings each row ran with, and the footer the rows share."""

from __future__ import annotations

import csv
import io
import json

from playground.bench import failures_line, invalid_record
from playground.config import RunConfig
from playground.printers import PRINTERS, to_csv, to_json, to_jsonl, to_markdown


def _record(**changes):
    from playground.record import RunRecord

    config = RunConfig(prompt="hi", **{k: v for k, v in changes.items() if not k.endswith("_effective")
                                       and k not in ("ttft_ms", "decode_tok_s")})
    fields = {k: getattr(config, k) for k in ("model", "backend", "quant", "spec", "draft_tokens", "draft_model",
                                              "attn", "use_cache", "cache_impl", "dtype", "compile", "device",
                                              "batch_size", "prompt_tokens", "new_tokens", "mode", "repeats",
                                              "warmup")}
    figures = dict(ttft_ms=10.0, ttft_ms_std=1.0, decode_tok_s=100.0, decode_tok_s_std=2.0, tokens_generated=4,
                   dtype_effective="fp32", device_effective="cpu", quant_effective="none", spec_effective="none",
                   cache_impl_effective=config.cache_impl_effective)
    figures.update({k: v for k, v in changes.items() if k in figures})
    return RunRecord(**fields, **figures, config=config.to_dict())


def test_speedups_are_against_the_first_row_in_every_format():
    rows = [_record(), _record(attn="eager", ttft_ms=5.0, decode_tok_s=250.0)]
    table = to_markdown(rows)
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    cells = [c.strip() for c in table.splitlines()[3].strip("|").split("|")]
    assert cells[header.index("TTFT ×")] == "2.00" and cells[header.index("decode ×")] == "2.50"  # >1: faster
    first = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    assert first[header.index("decode ×")] == "1.00"
    csv_rows = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert [float(r["decode_speedup"]) for r in csv_rows] == [1.0, 2.5] and float(csv_rows[1]["ttft_speedup"]) == 2.0
    assert [r["decode_speedup"] for r in json.loads(to_json(rows))] == [1.0, 2.5]
    lines = [json.loads(line) for line in to_jsonl(rows).splitlines()]
    assert [line["decode_speedup"] for line in lines] == [1.0, 2.5] and lines[1]["name"] == rows[1].name
    assert json.loads(to_jsonl(rows[1:], base=rows[0]))["decode_speedup"] == 2.5  # a stream, run by run


def test_one_row_shows_no_speedup_and_a_failed_row_none():
    assert "decode ×" not in to_markdown([_record()])
    failed = invalid_record(RunConfig(prompt="hi", attn="eager").to_dict(), "no reason")
    rows = json.loads(to_json([_record(), failed]))
    assert rows[1]["decode_speedup"] is None and rows[1]["name"] == failed.name


def test_an_invalid_row_prints_the_settings_it_asked_for():
    fields = RunConfig(prompt="hi", dtype="bf16", quant="none").to_dict()
    fields.update(backend="fast", cache_impl="dynamic")  # refused: the fast backend decodes from its own static cache
    table = to_markdown([_record(), invalid_record(fields, "backend=fast always decodes from its own static KV cache")])
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    cells = [c.strip() for c in table.splitlines()[3].strip("|").split("|")]
    assert "None" not in table
    assert cells[header.index("backend")] == "fast" and cells[header.index("dtype")] == "bf16"
    assert "cache impl=dynamic" in table.splitlines()[-1]  # the first row's auto ran dynamic, as the second asked


def test_the_footer_says_what_every_row_ran_with():
    rows = [_record(spec="prompt_lookup", draft_tokens=k) for k in (3, 4)]  # drafted nothing: spec ran as none
    footer = to_markdown(rows).splitlines()[-1]
    assert footer.startswith("Same for all rows: ") and "spec=prompt_lookup → none" in footer
    assert "cache impl=dynamic" in footer and "dtype=fp32" in footer
    fast = [_record(backend="fast", attn=a) for a in ("sdpa", "eager")]
    assert "cache impl=static" in to_markdown(fast).splitlines()[-1]  # auto, as the fast backend resolved it


def test_every_printer_takes_no_rows():
    for printer in PRINTERS.values():
        printer([])


def test_the_closing_line_names_each_failed_row_by_number_and_name_and_why():
    ok = _record()
    bad = invalid_record({**RunConfig(prompt="hi").to_dict(), "compile": "default", "cache_impl": "dynamic"},
                         "compile=default needs use_cache on and cache_impl=static (or auto): transformers compiles "
                         "the decode step only with a static cache (a dynamic or absent cache changes shape every "
                         "token and would recompile each step)")
    assert failures_line([ok, ok]) == ""
    line = failures_line([ok, bad])
    assert line.startswith("1 of 2 row(s) failed: row 2 (transformers · sdpa · dtype auto · dynamic cache · "
                           "compile default) invalid: compile=default needs use_cache on")
    assert line.endswith(" …") and len(line) < 250  # the reason in short; the table's status cell has it all
