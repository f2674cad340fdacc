"""benchmarks/decode_kernels.py: each kernel's launch settings from the profiler, and its CPU smoke run."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from benchmarks.decode_kernels import launch_shape

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


def test_the_cpu_smoke_run_lists_a_decode_step():
    out = subprocess.run([sys.executable, "-m", "benchmarks.decode_kernels", "--new-tokens", "4", "--prompt-tokens",
                          "8"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "kernels per step" in out.stdout and "by kernel, costliest first" in out.stdout


def test_the_cpu_smoke_run_lists_a_verify_step_on_request():
    args = ["--new-tokens", "4", "--prompt-tokens", "8"]
    runs = {verify: subprocess.run([sys.executable, "-m", "benchmarks.decode_kernels", *args, *verify],
                                   capture_output=True, text=True, timeout=600) for verify in ((), ("--verify", "3"))}
    for out in runs.values():
        assert out.returncode == 0, out.stderr[-2000:]
    assert "verify step of 3 drafts" in runs[("--verify", "3")].stdout and "decode step" in runs[()].stdout
    ops = {verify: int(out.stdout.split(" kernels per step")[0].rsplit(" ", 1)[-1]) for verify, out in runs.items()}
    assert ops[("--verify", "3")] != ops[()]  # another step was profiled, not the decode step again
