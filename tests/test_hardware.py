"""The measured bandwidth is cached in the data directory, and a directory that cannot be written costs nothing;
the other load on the host counts other processes, not this one."""

import subprocess
import sys
import time

import psutil

from playground import hardware
from playground.record import BUSY_HOST_PCT


def fake_gpu(monkeypatch, rate: float) -> None:
    monkeypatch.setattr(hardware.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(hardware.torch.cuda, "get_device_name", lambda index=0: "Test GPU")
    monkeypatch.setattr(hardware, "_copy_bandwidth_gb_s", lambda: rate)


def test_bandwidth_is_measured_once_and_kept(monkeypatch):
    fake_gpu(monkeypatch, 4200.04)
    assert hardware.memory_bandwidth_gb_s() == 4200.0
    fake_gpu(monkeypatch, 1.0)  # a second call reads the file, not the device
    assert hardware.memory_bandwidth_gb_s() == 4200.0


def test_an_uncreatable_data_dir_still_gives_the_figure(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PLAYGROUND_DATA_DIR", str(blocker / "data"))
    fake_gpu(monkeypatch, 3000.0)
    assert hardware.memory_bandwidth_gb_s() == 3000.0


def _measured_while(work) -> float:
    load = hardware.OtherCpuLoad()
    load.start()
    work()
    return load.stop()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_another_process_taking_a_core_shows_as_other_load():
    one_core = 100 / psutil.cpu_count()
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the child is running
        pct = _measured_while(lambda: time.sleep(1.5))
    finally:
        burner.kill()
        burner.wait()
    assert pct > 0.6 * one_core


def test_this_process_own_work_is_not_other_load():
    """Against the same span idle, so whatever else the host runs meanwhile cancels."""
    idle = _measured_while(lambda: time.sleep(1.5))
    assert _measured_while(lambda: _spin(1.5)) - idle < 0.5 * 100 / psutil.cpu_count()


def test_a_run_records_the_other_load_and_the_page_flags_a_busy_host():
    from playground.config import RunConfig
    from playground.engine import run
    from playground.ui.render import _other_load

    record = run(RunConfig(prompt="The function returns", new_tokens=4, repeats=1))
    assert record.status == "ok" and 0 <= record.host_other_cpu_pct <= 100
    record.host_other_cpu_pct = BUSY_HOST_PCT + 1
    assert _other_load(record).startswith("⚠")
    record.host_other_cpu_pct = BUSY_HOST_PCT - 1
    assert "⚠" not in _other_load(record)
