"""benchmarks/compile_spread.py: what it keeps of each cold process's record, the spread per kernel choice, and its
CPU smoke run (separate processes, a refused choice shown as such)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.compile_spread import figures, summary


def record(**changes) -> dict:
    return {"status": "ok", "reason": None, "decode_tok_s": 780.0, "decode_tok_s_std": 10.0, "itl_ms_p50": 1.28,
            "cold_e2e_ms": 46000.0, "compiled": "decode step: ...; kernels fixed", "fallback": None, **changes}


def test_a_process_keeps_its_rate_median_step_and_first_call_or_says_why_it_failed():
    assert figures(record()) == {"decode_tok_s": 780.0, "decode_tok_s_std": 10.0, "median_step_ms": 1.28,
                                 "first_call_s": 46.0, "compiled": "decode step: ...; kernels fixed", "fallback": None}
    refused = figures(record(status="invalid", reason="kernels=tuned applies to ..."))
    assert refused == {"failed": "invalid: kernels=tuned applies to ..."}


def test_the_spread_is_over_the_finished_processes_of_each_choice():
    fixed = [figures(record(itl_ms_p50=1.2780, decode_tok_s=770.5)),
             figures(record(itl_ms_p50=1.2837, decode_tok_s=773.3)), {"failed": "no result within 600 s"}]
    tuned = [figures(record(itl_ms_p50=1.4099, decode_tok_s=706.0)),
             figures(record(itl_ms_p50=1.2511, decode_tok_s=783.3))]
    rows = summary({"fixed": fixed, "tuned": tuned, "lonely": fixed[:1]})
    assert set(rows) == {"fixed", "tuned"}  # one finished process has nothing to be apart from
    assert rows["fixed"]["processes"] == 2
    assert rows["fixed"]["median_step_spread"] == pytest.approx(1.2837 / 1.2780 - 1)
    assert rows["tuned"]["median_step_spread"] == pytest.approx(0.127, abs=1e-3)
    assert rows["tuned"]["rate_spread"] == pytest.approx(783.3 / 706.0 - 1)


def test_the_cpu_smoke_run_times_each_process_apart_and_shows_a_refused_choice(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks.compile_spread", "--kernels", "fixed,tuned",
                          "--prompt-tokens", "8", "--new-tokens", "6", "--repeats", "1", "--output",
                          str(tmp_path / "spread.json")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("kernels=fixed: ") == 2 and "median step" in out.stdout
    assert out.stdout.count("kernels=tuned: invalid: kernels=tuned applies to") == 2  # compile=off times nothing
    assert "| fixed | 2 |" in out.stdout and "| tuned |" not in out.stdout
    saved = json.loads((tmp_path / "spread.json").read_text())
    assert len(saved["results"]["fixed"]) == 2 and "fixed" in saved["summary"]
