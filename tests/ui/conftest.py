"""UI fixtures: a private run store, and one launched app per module for end-to-end tests.

The root conftest already points PLAYGROUND_DATA_DIR at a temporary directory for every test.
"""

from __future__ import annotations

import os

import pytest

os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"  # launch() HEAD-checks its local URL

TINY = "tiny-random-llama"


@pytest.fixture
def store():
    from playground.store import RunStore

    s = RunStore()
    yield s
    s.close()


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The real app (theme and CSS included) on a free port with its own store; yields (demo, store)."""
    from playground.store import RunStore
    from playground.ui import build_demo, launch

    store = RunStore(tmp_path_factory.mktemp("ui-data") / "runs.sqlite3")
    demo = build_demo(store=store, default_model=TINY)
    launch(demo, prevent_thread_lock=True, quiet=True)
    yield demo, store
    demo.close()
    store.close()


FIGURES = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def figures(request):
    """Reliability figures (requests held, faults survived, bad inputs tried, runs lost) printed after the run."""
    return request.config.stash.setdefault(FIGURES, {})


def pytest_terminal_summary(terminalreporter, config):
    found = config.stash.get(FIGURES, {})
    if found:
        terminalreporter.section("reliability figures")
        for name, value in found.items():
            terminalreporter.write_line(f"{name}: {value}")
