"""The README's headline H200 table is read back against the committed records, so the two cannot drift."""

import json
import re
from pathlib import Path

from scripts.rederive_roofline import fast_decode_rows

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"Llama-3.1-8B": "llama-3.1-8b-shape", "Llama-3.2-1B": "llama-3.2-1b-shape"}


def headline_rows() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Results on an NVIDIA H200", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| shape")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if "---" not in line]


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
