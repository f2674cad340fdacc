"""benchmarks/precompile_step.py on the CPU: the decode step compiled ahead of time, loaded by a new process."""

import subprocess
import sys


def test_every_process_decodes_the_eager_token_and_the_loaded_step_refuses_other_shapes():
    out = subprocess.run([sys.executable, "-m", "benchmarks.precompile_step", "--steps", "2"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in out.stdout.splitlines() if line.startswith("| ")}
    for name in ("plain, cold", "plain, warm", "precompile", "load", "load, no cache"):
        token = rows[name].split("|")[6].split()
        assert token[1] == "=" and token[0] == token[2], rows[name]  # the eager step's token, no row failed
    assert "refused by its guards" in rows["load"] and "size mismatch" in rows["load"]
