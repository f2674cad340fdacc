"""benchmarks/precompile_step.py on the CPU: the decode step compiled ahead of time, loaded by a new process."""

import subprocess
import sys


def test_every_process_decodes_the_eager_token_and_the_loaded_step_refuses_other_shapes():
    """The saving row and a loading one (each row is a new process that compiles; torch.compile's own route is
    tests/fast/test_precompile.py's, and the full table is results/cpu/)."""
    routes = {"precompile": "compiled", "load": "loaded"}
    out = subprocess.run([sys.executable, "-m", "benchmarks.precompile_step", "--steps", "2", "--rows", *routes],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in out.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) >= set(routes), rows
    for name, route in routes.items():
        cells = [cell.strip() for cell in rows[name].split("|")]
        token = cells[7].split()
        assert cells[3] == route and token[1] == "=" and token[0] == token[2], rows[name]  # the eager token
    assert "refused by its guards" in rows["load"] and "size mismatch" in rows["load"]


def test_a_row_is_refused_without_the_row_it_needs():
    out = subprocess.run([sys.executable, "-m", "benchmarks.precompile_step", "--rows", "load"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "'load' needs 'precompile'" in out.stderr
