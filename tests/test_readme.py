"""The README's headline H200 table is read back against the committed records, so the two cannot drift."""

import json
import re
from pathlib import Path

from scripts.rederive_roofline import fast_decode_rows

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"Llama-3.1-8B": "llama-3.1-8b-shape", "Llama-3.2-1B": "llama-3.2-1b-shape"}


def headline_tables() -> dict[str, list[list[str]]]:
    """The section's tables by their header line, each as rows of cells."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Results on an NVIDIA H200", 1)[1].split("\n## ", 1)[0]
    tables, header = {}, None
    for line in section.splitlines():
        if not line.startswith("| "):
            header = None
        elif header is None:
            header = line
            tables[header] = []
        elif "---" not in line:
            tables[header].append([cell.strip() for cell in line.strip("|").split("|")])
    return tables


def headline_rows() -> list[list[str]]:
    return next(rows for header, rows in headline_tables().items() if "roofline %" in header)


def test_every_headline_figure_is_in_its_record():
    rows = headline_rows()
    assert len(rows) >= 4
    for shape, configuration, tok_s, roofline_pct, first_call_s, record in rows:
        path = ROOT / record.strip("`")
        backend = "fast" if configuration.startswith("fast") else "transformers"
        data = json.loads(path.read_text())
        (row,) = [r for r in data["rows"] if r["model"] == SHAPES[shape] and r["backend"] == backend]
        assert f"{row['decode_tok_s']:.1f}" == tok_s, (shape, configuration)
        assert f"{row['cold_start_s']:.0f}" == first_call_s, (shape, configuration)
        if backend == "fast":
            assert re.search(row["attn"], configuration)
        (rederived,) = [new for model, b, attn, dtype, tok, old, new, kind in fast_decode_rows(path)
                        if model == SHAPES[shape] and b == backend]
        assert f"{rederived:.0f}" == roofline_pct, (shape, configuration, rederived)


def test_every_quantization_headline_figure_is_in_its_record():
    [rows] = [rows for header, rows in headline_tables().items() if "vs bf16" in header]
    assert len(rows) >= 2
    for shape, configuration, tok_s, ratio, weights_mb, error, record in rows:
        data = json.loads((ROOT / record.strip("`")).read_text())
        quant = "none" if configuration.endswith("bf16") else re.search(r"(int\d) weights \((\w+)\)", configuration)
        quant = quant if quant == "none" else f"{quant[1]}-{quant[2]}"
        (row,) = [r for r in data["records"] if r["quant"] == quant and r["model"] == SHAPES[shape]]
        (reference,) = [r for r in data["records"] if r["quant"] == "none" and r["model"] == SHAPES[shape]]
        assert f"{row['decode_tok_s']:.1f}" == tok_s, (shape, configuration)
        assert f"{row['decode_tok_s'] / reference['decode_tok_s']:.2f}x" == ratio, (shape, configuration)
        assert f"{row['weights_mb']:,.0f}" == weights_mb, (shape, configuration)
        logit_errors = {cells[8] for cells in data["table"] if cells[1] == quant}
        assert error == "reference" or f"logit err {error}" in logit_errors, (shape, configuration)
