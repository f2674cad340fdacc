"""Device-level facts measured here rather than taken from a datasheet: memory bandwidth, sync, and what
else the host was busy with while a run was timed."""

from __future__ import annotations

import json
import time

import psutil
import torch

from playground.store import data_path

BANDWIDTH_FILE = "bandwidth.json"


def synchronize(device: str) -> None:
    """Wait for queued device work, so a clock read after it is true."""
    if device == "cuda":
        torch.cuda.synchronize()


def _copy_bandwidth_gb_s(gib: float = 1.0, iters: int = 10) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written (the practical roofline)."""
    n = int(gib * 2**30) // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        dst.copy_(src)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 * iters / elapsed / 1e9


def memory_bandwidth_gb_s() -> float | None:
    """Measured once per GPU model and kept in the data directory; None on CPU."""
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    path = data_path() / BANDWIDTH_FILE
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if name not in known:
        known[name] = round(_copy_bandwidth_gb_s(), 1)
        try:  # an unwritable data directory only costs a re-measurement next time
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(known, indent=1))
        except OSError:
            pass
    return float(known[name])


def _host_busy_s() -> float:
    """CPU seconds the host's processes have spent busy: idle and I/O wait left out, a guest's time (already
    inside user time) and a VM's stolen time (other machines on its hypervisor, not processes here) too."""
    t = psutil.cpu_times()
    return sum(t) - sum(getattr(t, name, 0.0) for name in ("idle", "iowait", "steal", "guest", "guest_nice"))


def _own_s() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


class OtherCpuLoad:
    """Other processes' share of the host's CPUs over a span: the host's busy CPU time less this process's own,
    over the span's wall time times the CPU count.

    CPU decode, and the host side of GPU decode, slow down when another process takes cores: on a small
    host a browser drawing the streamed tokens is enough. The figure says a run was timed on a busy host,
    so its numbers are not mistaken for what the model does on a quiet one."""

    def start(self) -> None:
        self._host, self._own, self._t = _host_busy_s(), _own_s(), time.perf_counter()

    def stop(self) -> float:
        wall = time.perf_counter() - self._t
        other = (_host_busy_s() - self._host) - (_own_s() - self._own)
        return max(0.0, min(100.0, 100 * other / (wall * (psutil.cpu_count() or 1)))) if wall > 0 else 0.0
