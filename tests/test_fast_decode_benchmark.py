"""benchmarks/fast_decode.py on CPU: the transformers and fast rows, the fast row naming its kernel choice, and a
kernel choice the config refuses said as the config says it."""

from __future__ import annotations

import subprocess
import sys

ARGS = [sys.executable, "-m", "benchmarks.fast_decode", "--prompt-tokens", "8", "--new-tokens", "6", "--repeats", "1"]


def test_the_cpu_smoke_run_prints_both_rows_and_the_fast_rows_kernel_choice():
    out = subprocess.run(ARGS, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| tiny-random-llama")]
    assert [row.split(" | ")[1] for row in rows] == ["transformers", "fast"]
    assert "compile=off, kernels fixed" in rows[1]


def test_a_kernel_choice_the_config_refuses_is_a_usage_error_with_its_reason():
    out = subprocess.run([*ARGS, "--kernels", "tuned"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "the playground times no launch config" in out.stderr
