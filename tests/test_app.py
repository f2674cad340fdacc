"""`python app.py` as a user starts it: the page serves, a run finishes, and the console shows no profiler ERROR."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_app_runs_a_request_and_prints_no_profiler_error(tmp_path):
    from gradio_client import Client

    port = free_port()
    log = tmp_path / "app.log"
    with log.open("w") as out:
        app = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, stdout=out,
                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    client = None
    try:
        deadline = time.time() + 120
        while time.time() < deadline and app.poll() is None:  # an app that exited will not serve
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
                break
            except Exception:
                time.sleep(1)
        assert client is not None, (f"the app did not serve within 120 s (exit code {app.poll()}): "
                                    + log.read_text()[-2000:])
        result = client.predict("Explain the KV cache.", "stdlib-llama-tiny", "sdpa", True, "auto", "off", 8,
                                api_name="/run")
        assert result["record"]["status"] == "ok", result["message"]
        assert result["record"]["attn_families"], "the profiled pass named the kernels"
    finally:
        app.terminate()
        app.wait(timeout=30)
    assert "External init callback" not in log.read_text(), log.read_text()[-2000:]
