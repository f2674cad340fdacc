"""Load, faults and durability against the real app started as `python app.py` on a loopback port.

- 16 concurrent gradio_client `/run` requests: all finish, in queue order, one at a time on the device
  (device windows never overlap), and the server's memory returns near its baseline. Their decode tok/s
  against solo runs is printed as a figure, not asserted: on a shared 2-core CI machine the 17 client
  streams this test polls compete with the server for the CPU, so the rate measures the harness too.
- SIGKILL during a run: on restart the store opens, every run finished before the kill is there, and
  the app serves again.
- A corrupt store file: the app starts, says so on the page, and keeps the damaged file.
- A save that fails (the history locked by another process for too long): the client still gets the
  run with "not saved to the history: <reason>", and the next save stores it.
- No HF token given to the server shows up in its logs, its page or its records.

Everything is bounded by timeouts; the figures are printed in the "reliability figures" section.
Reproduce: `python -m pytest tests/ui/test_reliability.py tests/ui/test_hosted.py -q`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from conftest import TINY
from playground.store import STORE_NAME, RunStore

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hf_reliabilityTestSecret0003"
CONCURRENT = 16
NEW_TOKENS = 96  # enough decode steps (~0.3 s) to average out a busy 2-core machine's jitter
BLOCKER_TOKENS = 1500  # ~5 s on 2 busy CPU cores: longer than submitting 16 requests (2-4 s)
# Only for the printed figure: how many concurrent runs decode within 25% of the solo median.
TOLERANCE = 0.25
LOOPBACK = "127.0.0.1,localhost"
POLL_SLACK_S = 0.1  # two 20 ms polls plus delivery over two loopback streams
RSS_MARGIN_MB = 150
START_TIMEOUT_S, RUN_TIMEOUT_S = 90, 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppProcess:
    """`python app.py` on a free loopback port with its own data directory; its output goes to a log file."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir, self.port = data_dir, _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = data_dir / f"app-{self.port}.log"
        self.finished: list[int] = []  # ids of the runs this server reported finished (and so saved)
        # One torch thread: with two, any other busy process on a 2-core machine stalls every parallel loop.
        env = {**os.environ, "PLAYGROUND_DATA_DIR": str(data_dir), "HF_TOKEN": SECRET, "HF_HUB_OFFLINE": "1",
               "OMP_NUM_THREADS": "1", "GRADIO_ANALYTICS_ENABLED": "False", "NO_PROXY": LOOPBACK, "no_proxy": LOOPBACK}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "app.py", "--port", str(self.port), "--model", TINY],
                                         cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"app exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
            try:
                if httpx.get(self.url + "config", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"app not ready after {START_TIMEOUT_S} s:\n{self.log.read_text()[-3000:]}")

    def client(self):
        from gradio_client import Client

        return Client(self.url, verbose=False, download_files=False)

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill9()


def run(client, prompt: str, new_tokens: int = NEW_TOKENS) -> dict:
    """One measured pass, no warm-up (the model stays loaded between runs)."""
    final = client.predict(prompt, TINY, max_new_tokens=new_tokens, mode="benchmark", repeats=1, warmup=0,
                           api_name="/run")
    assert final["state"] == "ok", final["message"]
    return final["record"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One app for the load test and the kill test (which kills it; stop() then has nothing to do)."""
    app = AppProcess(tmp_path_factory.mktemp("reliability"))
    yield app
    app.stop()


def _submit(client, prompt: str, new_tokens: int = NEW_TOKENS):
    """Submit a run and return once the server has queued it, so submission order is queue order."""
    from gradio_client.utils import Status

    job = client.submit(prompt, TINY, max_new_tokens=new_tokens, mode="benchmark", repeats=1, warmup=0,
                        api_name="/run")
    deadline = time.monotonic() + 30
    while job.status().code in (Status.STARTING, Status.JOINING_QUEUE) and time.monotonic() < deadline:
        time.sleep(0.05)
    return job


def _watch(jobs: list, timeout_s: float = RUN_TIMEOUT_S) -> list[tuple[float, float]]:
    """(first output, finished) receipt times of each job, polled every 20 ms from one thread.

    A job's first output is sent when the server starts it, so on a one-at-a-time device job i
    starts only after job i-1 finished; two jobs sharing the device would overlap by a whole run.
    """
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(end) < len(jobs) and time.monotonic() < deadline:
        now = time.monotonic()
        for i, job in enumerate(jobs):
            if i not in start and job.outputs():
                start[i] = now
            if i not in end and job.done():
                end[i] = now
        time.sleep(0.02)
    return [(start.get(i, float("nan")), end.get(i, float("nan"))) for i in range(len(jobs))]


def test_concurrent_requests_finish_in_queue_order_one_at_a_time(server, figures):
    client = server.client()
    before = [run(client, "warm-up: load the model")] + [run(client, f"solo {i}") for i in range(3)]
    baseline_mb = server.rss_mb()
    clients = [server.client() for _ in range(CONCURRENT)]
    started = time.monotonic()
    # A long run holds the device while the 16 join the queue, so none is timed while this process is busy submitting.
    blocker = _submit(client, "holds the device while the others queue", new_tokens=BLOCKER_TOKENS)
    jobs = [_submit(c, f"request {i:02d}") for i, c in enumerate(clients)]
    held = not blocker.done()
    windows = _watch([blocker, *jobs])
    finals = [job.result(timeout=RUN_TIMEOUT_S) for job in jobs]
    elapsed = time.monotonic() - started
    after = [run(client, f"solo after {i}") for i in range(3)]
    records = [f["record"] for f in finals]
    assert held, "the blocker finished before all requests were queued: raise BLOCKER_TOKENS"
    assert [f["state"] for f in finals] == ["ok"] * CONCURRENT
    assert [r["config"]["prompt"] for r in records] == [f"request {i:02d}" for i in range(CONCURRENT)]
    ids = [r["run_id"] for r in records]
    assert ids == sorted(ids) and len(set(ids)) == CONCURRENT  # saved in submission order: the queue is FIFO
    overlaps = [i for i in range(1, len(windows)) if windows[i][0] < windows[i - 1][1] - POLL_SLACK_S]
    assert not overlaps, f"requests started before the previous one finished: {overlaps}"
    solo = [r["decode_tok_s"] for r in before[1:] + after]
    reference, rates = statistics.median(solo), [r["decode_tok_s"] for r in records]
    batch = statistics.median(rates)
    # No rate assertion: a CI run saw the batch median at 69% of solo with no overlap on the device, the
    # polling clients sharing 2 cores with the server; overlap itself is asserted from the windows above.
    growth_mb = server.rss_mb() - baseline_mb
    assert growth_mb < RSS_MARGIN_MB, f"server RSS grew by {growth_mb:.0f} MB"
    server.finished += [r["run_id"] for r in before + [blocker.result()["record"]] + records + after]
    within = sum(rate >= (1 - TOLERANCE) * reference for rate in rates)
    figures.update({"requests held": CONCURRENT, "requests overlapping on the device": len(overlaps),
                    "concurrent wall s": round(elapsed, 1),
                    "decode tok/s solo min/median/max": f"{min(solo):.0f}/{reference:.0f}/{max(solo):.0f}",
                    "decode tok/s concurrent min/median/max": f"{min(rates):.0f}/{batch:.0f}/{max(rates):.0f}",
                    "concurrent runs no more than 25% below the solo median": f"{within}/{CONCURRENT}",
                    "server RSS growth MB": round(growth_mb, 1)})


def test_no_token_reaches_the_logs_the_page_or_the_records(server):
    client = server.client()
    record = run(client, "secret check", new_tokens=4)
    shown = [server.log.read_text(errors="replace"), httpx.get(server.url + "config", timeout=30).text,
             json.dumps(record), json.dumps(client.predict(api_name="/history"))]
    assert record["env"]["python"] and not any(SECRET in text for text in shown)
    server.finished.append(record["run_id"])


def _wait_for_tokens(job, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        outputs = job.outputs()
        if outputs and outputs[-1]["tokens"] > 0:
            return
        time.sleep(0.05)
    raise TimeoutError("the long run never streamed a token")


def test_sigkill_mid_run_loses_no_finished_run(server, figures):
    client = server.client()
    server.finished += [run(client, f"before the kill {i}", new_tokens=4)["run_id"] for i in range(2)]
    job = client.submit("the run that is killed", TINY, max_new_tokens=3000, mode="benchmark", repeats=1, warmup=0,
                        api_name="/run")
    _wait_for_tokens(job)
    server.kill9()
    restarted = AppProcess(server.data_dir)
    try:
        store = RunStore(server.data_dir / STORE_NAME)
        saved = {r.run_id: r.config.get("prompt") for r in store.records()}
        store.close()
        lost = sorted(set(server.finished) - set(saved))
        assert not lost and "the run that is killed" not in saved.values()
        fresh = run(restarted.client(), "after the restart", new_tokens=4)
        assert fresh["run_id"] > max(saved)
    finally:
        restarted.stop()
    figures.update({"faults survived": figures.get("faults survived", 0) + 1,
                    "runs finished before SIGKILL": len(server.finished), "runs lost": len(lost)})


def test_a_corrupt_store_is_kept_aside_and_the_app_says_so(tmp_path, figures):
    garbage = b"this is not an SQLite database\x00\xff" * 64
    (tmp_path / STORE_NAME).write_bytes(garbage)
    app = AppProcess(tmp_path)
    try:
        damaged = list(tmp_path.glob(f"{STORE_NAME}.damaged-*"))
        assert len(damaged) == 1 and damaged[0].read_bytes() == garbage
        page = httpx.get(app.url + "config", timeout=30).text
        assert "The run history could not be read" in page and damaged[0].name in page
        client = app.client()
        run(client, "after the recovery", new_tokens=4)
        assert "moved aside" in client.predict(api_name="/history")["note"]
    finally:
        app.stop()
    figures["faults survived"] = figures.get("faults survived", 0) + 1


def test_a_run_whose_save_fails_is_returned_with_the_reason_and_saved_later(tmp_path, figures, monkeypatch):
    """Another process holds the history's write lock for longer than a save waits: the client still gets
    the run, told it was not saved, and the next save stores it."""
    import sqlite3

    from playground import store as store_module
    from playground.ui import events
    from playground.ui.api import make_endpoints

    monkeypatch.setattr(store_module, "LOCK_WAIT_S", 0.3)
    store = RunStore(tmp_path / STORE_NAME)
    other = sqlite3.connect(tmp_path / STORE_NAME, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # in WAL mode: writers wait, readers go on
    run_endpoint, _, history = make_endpoints(events.Playground(store, TINY))
    final = list(run_endpoint("saved later", TINY, max_new_tokens=2, repeats=1, warmup=0))[-1]
    assert final["state"] == "ok" and final["record"]["output_ids"]
    assert final["message"] == "not saved to the history: database is locked"
    assert "1 finished run(s) could not be saved yet" in history()["note"]
    other.execute("ROLLBACK")
    other.close()
    list(run_endpoint("the next run", TINY, max_new_tokens=2, repeats=1, warmup=0))
    assert [r["config"]["prompt"] for r in history()["runs"]] == ["the next run", "saved later"]
    store.close()
    figures["faults survived"] = figures.get("faults survived", 0) + 1
