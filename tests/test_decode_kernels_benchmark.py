"""benchmarks/decode_kernels.py: each kernel's launch settings from the profiler, its bandwidth from inductor's byte
count, and its CPU smoke run."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from types import ModuleType, SimpleNamespace

import pytest
from torch._inductor.codecache import PyCodeCache

from benchmarks.decode_kernels import (bandwidth, inductor_kernel_gb, launch_shape, print_bandwidth_summary,
                                      roofline_step_us)

# what the profiler's Kineto layer writes for a CUDA kernel (torch.profiler's `metadata_json`, chrome trace args)
KERNEL_METADATA = ('"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 1432, '
                   '"registers per thread": 40, "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2, '
                   '"grid": [66, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 3')


def test_a_kernels_grid_and_block_are_read_from_its_metadata():
    assert launch_shape(SimpleNamespace(metadata_json=KERNEL_METADATA)) == "grid 66x1x1 block 128"
    two_d = KERNEL_METADATA.replace('"block": [128, 1, 1]', '"block": [32, 4, 1]')
    assert launch_shape(SimpleNamespace(metadata_json=two_d)) == "grid 66x1x1 block 32x4x1"
    assert launch_shape(SimpleNamespace(metadata_json="")) == ""  # a CPU op
    assert launch_shape(SimpleNamespace()) == ""  # a torch whose events carry no metadata


def test_each_kernel_inductor_counted_bytes_for_gets_a_bandwidth(monkeypatch, capsys):
    """A loaded kernel module binds each Triton kernel to its autotuner, whose metadata holds the byte count."""
    module = ModuleType("kernels")
    module.qkv = SimpleNamespace(inductor_meta={"kernel_name": "triton_red_fused_mm_0", "kernel_num_gb": 0.0126})
    module.uncounted = SimpleNamespace(inductor_meta={"kernel_name": "triton_poi_fused_1"})
    module.not_a_kernel = 3
    monkeypatch.setattr(PyCodeCache, "modules", [module])
    gb = inductor_kernel_gb()
    assert gb == {"triton_red_fused_mm_0": 0.0126}
    assert bandwidth(gb["triton_red_fused_mm_0"], 6.3).strip() == "2.00 TB/s"  # 12.6 MB in 6.3 µs
    assert bandwidth(None, 6.3).strip() == "-"
    us = Counter({"triton_red_fused_mm_0": 16 * 6.3, "triton_poi_fused_1": 16 * 1.0, "flash_fwd": 16 * 9.0})
    launches = Counter({"triton_red_fused_mm_0": 16, "triton_poi_fused_1": 16, "flash_fwd": 16})
    print_bandwidth_summary(us, launches, gb, 250.0, None)
    out = capsys.readouterr().out
    assert "100.8 of 260.8 µs a step, 201.6 MB a step, 2.00 TB/s together" in out
    assert "copy bandwidth" not in out  # no measured bandwidth (a CPU run): no ceiling made up
    # at 4 TB/s the counted kernel's 201.6 MB take 50.4 µs in place of 100.8; the rest of the 250 µs span stays
    assert roofline_step_us(250.0, us, launches, gb, 4000.0) == pytest.approx(250.0 - 100.8 + 50.4)
    print_bandwidth_summary(us, launches, gb, 250.0, 4000.0)
    assert "(4.00 TB/s) they would take 50.4 µs: the step, every other kernel and gap as measured, 199.6 µs (5010 " \
           "steps/s)" in capsys.readouterr().out


def test_the_cpu_smoke_run_lists_a_decode_step():
    out = subprocess.run([sys.executable, "-m", "benchmarks.decode_kernels", "--new-tokens", "4", "--prompt-tokens",
                          "8"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "kernels per step" in out.stdout and "by kernel, costliest first" in out.stdout
    assert "kernels=fixed" in out.stdout  # the kernel choice's default, named in the header
    assert "no kernel has inductor's byte count" in out.stdout  # eager CPU ops: no bandwidth is made up


def test_the_cpu_smoke_run_lists_a_verify_step_on_request():
    args = ["--new-tokens", "4", "--prompt-tokens", "8", "--kernels", "tuned"]
    runs = {verify: subprocess.run([sys.executable, "-m", "benchmarks.decode_kernels", *args, *verify],
                                   capture_output=True, text=True, timeout=600) for verify in ((), ("--verify", "3"))}
    for out in runs.values():
        assert out.returncode == 0, out.stderr[-2000:]
    assert "verify step of 3 drafts" in runs[("--verify", "3")].stdout and "decode step" in runs[()].stdout
    assert all("kernels=tuned" in out.stdout for out in runs.values())
    ops = {verify: int(out.stdout.split(" kernels per step")[0].rsplit(" ", 1)[-1]) for verify, out in runs.items()}
    assert ops[("--verify", "3")] != ops[()]  # another step was profiled, not the decode step again
