"""Render committed run records as PNG charts with the app's own Plotly figures.

Records come from `bench --format jsonl` files (one record per line) or from a benchmark's JSON
output (its "records" list). The figures come from `playground.ui.charts`, the code the web UI draws
with; headless Chromium turns each into a PNG so the README can show it.

    python scripts/plot_results.py results/h200/article_1b_*.jsonl --out results/h200/article_1b.png
    python scripts/plot_results.py batching_8b.json batching_8b_transformers.json --figure batch-throughput --out x.png
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from playground.record import RunRecord
from playground.ui.charts import batch_memory_figure, batch_throughput_figure, memory_figure, timing_figure

CHROMIUM = "/usr/bin/chromium"
FIGURES = {"timing": timing_figure, "memory": memory_figure, "batch-throughput": batch_throughput_figure,
           "batch-memory": batch_memory_figure}
LABELLED = ("timing", "memory")  # figures whose series are the article's levers, labelled by them


def _dicts(path: Path) -> list[dict]:
    if path.suffix == ".json":
        return json.loads(path.read_text())["records"]
    return [json.loads(line) for line in path.read_text().splitlines()]


def load(paths: list[Path], labelled: bool = True) -> list[RunRecord]:
    """The finished records, labelled by attention, dtype, cache and compile; else by the record's own name and,
    when the records come from several files, the file's (two runs of one setting stay two series)."""
    records = []
    for path in paths:
        for data in _dicts(path):
            record = RunRecord.from_dict(data)
            if record.status != "ok":
                continue
            if labelled:
                cache = record.cache_impl if record.use_cache else "no cache"
                compiled = "" if record.compile == "off" else f" {record.compile}"
                record.label = f"{record.attn} {record.dtype_effective} {cache}{compiled} P{record.prompt_tokens}"
            elif len(paths) > 1:
                record.label = f"{record.name} · {path.stem}"
            records.append(record)
    return records


def to_png(figure, out: Path, width: int = 1400) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "figure.html"
        figure.update_layout(width=width)
        figure.write_html(html, include_plotlyjs=True, full_html=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": width + 40, "height": 900})
            page.goto(html.as_uri())
            page.wait_for_selector(".main-svg")
            page.locator(".plot-container").first.screenshot(path=str(out))
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+")
    parser.add_argument("--figure", choices=tuple(FIGURES), default="timing")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    to_png(FIGURES[args.figure](load(args.records, args.figure in LABELLED)), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
