"""Device-level facts measured here rather than taken from a datasheet: memory bandwidth and sync."""

from __future__ import annotations

import json
import time

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
