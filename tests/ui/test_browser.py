"""The page in a real headless Chromium: click Run A vs B, both panes fill, the charts draw.

Set PLAYGROUND_SCREENSHOTS=1 to also refresh assets/screenshot.png (desktop) and
assets/screenshot-laptop.png.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
ASSETS = Path(__file__).resolve().parents[2] / "assets"

pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists(),
    reason=f"Chromium not found at {CHROMIUM}: apt-get install chromium (or set CHROMIUM)")]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


def _run_and_wait(page, url: str) -> None:
    page.goto(url)
    page.get_by_role("button", name="Run A vs B").click()
    for side in "AB":  # each pane reaches ok with tokens shown
        page.wait_for_selector(f"#pane-{side} .pane.state-ok", timeout=120_000)
        assert int(page.get_attribute(f"#pane-{side} .pane", "data-tokens")) > 0
    page.wait_for_selector("#timing-chart .js-plotly-plot .bars path", timeout=60_000)
    page.wait_for_selector("#latency-chart .js-plotly-plot .scatterlayer path", timeout=60_000)


def test_run_a_vs_b_fills_panes_and_charts(launched, browser, tmp_path):
    demo, _ = launched
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    _run_and_wait(page, demo.local_url)
    text = page.inner_text("#pane-A .tokens")
    assert text.strip(), "pane A shows the generated text"
    assert "TTFT" in page.inner_text("#metrics") and "tok/s" in page.inner_text("#metrics")
    shot = ASSETS / "screenshot.png" if os.environ.get("PLAYGROUND_SCREENSHOTS") else tmp_path / "screenshot.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("PLAYGROUND_SCREENSHOTS"):
        page.set_viewport_size({"width": 1280, "height": 800})
        page.screenshot(path=str(ASSETS / "screenshot-laptop.png"), full_page=True)
    page.set_viewport_size({"width": 1024, "height": 800})  # a small laptop: the B-vs-A column stays on screen
    page.wait_for_timeout(300)
    right = page.evaluate("() => document.querySelector('#metrics table.metrics').getBoundingClientRect().right")
    assert right <= page.viewport_size["width"], "the metrics table runs off the page: kernel names must wrap"
    page.close()
