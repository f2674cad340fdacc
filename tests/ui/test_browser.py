"""The page in a real headless Chromium, on the default model: every one-click comparison either runs and leads
with its figure or, where this host cannot show it, says why before Run; one run is checked whole (panes,
metrics, charts, both widths).

Set PLAYGROUND_SCREENSHOTS=1 to also refresh assets/screenshot.png (1440x900) and
assets/screenshot-laptop.png (1024x768).
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
RUN_S = 300  # far beyond the slowest comparison this host runs, so only a hung run fails on time
CPU_SHOWS = ["KV cache: off vs on", "Attention: eager vs sdpa (long context)", "dtype: fp32 vs bf16",
             "torch.compile: off vs on", "Backend: transformers vs fast", "Batching: 1 vs 4 sequences",
             "Speculation: off vs prompt lookup"]  # on a CPU; the rest say why before Run

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


@pytest.fixture(scope="module")
def default_app(tmp_path_factory):
    """The real app on the default model (what a newcomer sees), with its own empty store; yields (demo, store)."""
    from playground.store import RunStore
    from playground.ui import build_demo, launch

    store = RunStore(tmp_path_factory.mktemp("browser-data") / "runs.sqlite3")
    demo = build_demo(store=store)
    launch(demo, prevent_thread_lock=True, quiet=True)
    yield demo, store
    demo.close()
    store.close()


ENDED_NOT_OK = ", ".join(f"#pane-{side} .pane.state-{state}" for side in "AB"
                         for state in ("error", "invalid", "stopped", "skipped"))  # a side that never reaches the history


def _run_and_wait(page, runs_before: int) -> None:
    """Press Run A vs B and wait until both sides are in the history (or one ended otherwise, which fails at
    once), then for both panes and the charts."""
    page.get_by_role("button", name="Run A vs B").click()
    page.wait_for_function(f"() => document.querySelector('#history-note').innerText.startsWith('{runs_before + 2} run(s)')"
                           f" || document.querySelector('{ENDED_NOT_OK}') !== null", timeout=RUN_S * 1000)
    ended = page.query_selector_all(ENDED_NOT_OK)
    assert not ended, "a side did not finish ok: " + " | ".join(pane.inner_text()[:500] for pane in ended)
    for side in "AB":  # each pane reaches ok with tokens shown
        page.wait_for_selector(f"#pane-{side} .pane.state-ok", timeout=30_000)
        assert int(page.get_attribute(f"#pane-{side} .pane", "data-tokens")) > 0
    page.wait_for_selector("#timing-chart .js-plotly-plot .bars path", timeout=60_000)
    page.wait_for_selector("#latency-chart .js-plotly-plot .scatterlayer path", timeout=60_000)


def _set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Tab")


EAGER = "dtype: fp32 vs bf16"  # run at once after its click, as it sets itself: different rounding marks the panes


def test_every_one_click_comparison_leads_with_its_figure_or_says_before_run_why_it_cannot(default_app, browser,
                                                                                           tmp_path):
    """Each comparison names its headline figure before Run. One this host can show runs (short: 8 tokens, 2
    repeats, so the verdict has a spread) and its headline leads with that figure and a verdict on it; one it
    cannot show says why before Run, in the column too where a side cannot run at all. EAGER is run the moment
    it is clicked, as an eager user does (Run waits for the comparison), and its page is checked whole."""
    from playground.speculative import GROUNDED_TOKENS
    from playground.ui.render import HEADLINE_LABELS
    from playground.ui.settings import comparisons

    demo, store = default_app
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(demo.local_url)
    said_before_run = []
    for name, comparison in comparisons().items():
        label = HEADLINE_LABELS[comparison.figure]
        page.get_by_role("button", name=name, exact=True).click()
        if name == EAGER:
            _run_and_wait(page, len(store.records()))
            _check_the_whole_page(page, name, tmp_path)
            continue
        note = page.locator("#comparison-note")
        page.wait_for_function("(n) => document.querySelector('#comparison-note').innerText.includes(n)", arg=name)
        assert f"The headline leads with {label}" in note.inner_text(), name
        if "cannot run on this host" in note.inner_text():  # say so before Run, in the column too
            side = note.inner_text().split(" cannot run on this host")[0][-1]
            page.wait_for_function(f"() => document.querySelector('#note-{side}').innerText.includes('cannot run here')")
            said_before_run.append(name)
            continue
        if "This host cannot show it:" in note.inner_text():
            said_before_run.append(name)
            continue
        # a short run; each comparison keeps its prompt and columns, and speculation the tokens its prompt grounds
        _set_number(page, "max new tokens", GROUNDED_TOKENS if comparison.b.spec != "none" else 8)
        _set_number(page, "repeats", 2)
        page.wait_for_function("() => ['A', 'B'].every(s => document.querySelector('#note-' + s).innerText.includes('runs as'))",
                               timeout=10_000)
        _run_and_wait(page, len(store.records()))
        _check_the_headline(page, name, label)
    from playground import capabilities

    shown = [name for name in comparisons() if name not in said_before_run]
    assert capabilities.host().cuda or shown == CPU_SHOWS, shown
    page.close()


def _check_the_headline(page, name: str, label: str) -> None:
    page.wait_for_selector("#summary .headline .lead", timeout=30_000)
    lead = page.inner_text("#summary .headline .lead")
    assert lead.startswith(label), (name, lead)
    assert any(words in lead for words in ("faster", "slower", "no clear difference")), (name, lead)


def _check_the_whole_page(page, name: str, tmp_path) -> None:
    """Panes, metrics and headline filled; screenshots at 1440 and 1024 px, where the metrics stay on screen."""
    from playground.ui.render import HEADLINE_LABELS
    from playground.ui.settings import comparisons

    assert name in page.inner_text("#comparison-note")
    _check_the_headline(page, name, HEADLINE_LABELS[comparisons()[name].figure])
    assert page.inner_text("#pane-A .tokens").strip(), "pane A shows the generated text"
    assert "TTFT" in page.inner_text("#metrics") and "tok/s" in page.inner_text("#metrics")
    assert page.inner_text("#pane-B .pane-head .cfg").startswith("transformers · sdpa · bf16")  # its run name
    screenshots = os.environ.get("PLAYGROUND_SCREENSHOTS")
    shot = ASSETS / "screenshot.png" if screenshots else tmp_path / "screenshot.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.set_viewport_size({"width": 1024, "height": 768})  # a small laptop: the B-vs-A column stays on screen
    page.wait_for_timeout(500)
    if screenshots:
        page.screenshot(path=str(ASSETS / "screenshot-laptop.png"), full_page=True)
    right = page.evaluate("() => document.querySelector('#metrics table.metrics').getBoundingClientRect().right")
    assert right <= page.viewport_size["width"], "the metrics table runs off the page: kernel names must wrap"
    page.set_viewport_size({"width": 1440, "height": 900})
