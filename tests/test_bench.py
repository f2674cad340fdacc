"""The bench command line: sweeps, formats and refusals, run as a user would."""

import json
import subprocess
import sys

import pytest

from playground.bench import build_parser, run_set
from playground.printers import to_markdown
from playground.store import RunStore

REQUIRED = ("model", "attn", "use_cache", "cache_impl", "dtype", "compile", "device", "prompt_tokens", "new_tokens",
            "repeats", "status", "reason", "ttft_ms", "ttft_ms_std", "decode_tok_s", "decode_tok_s_std", "itl_ms_p50",
            "itl_ms_p90", "itl_ms_p99", "e2e_ms", "peak_mem_mb", "kv_cache_mb", "compile_s", "attn_kernels",
            "fallback", "output_ids", "env")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "playground", *args], capture_output=True, text=True, timeout=600)


def test_json_sweep_has_every_field_and_an_invalid_row():
    out = cli("bench", "--model", "tiny-random-llama", "--attn", "eager,sdpa:efficient", "--cache", "on,off",
              "--prompt-tokens", "16", "--new-tokens", "8", "--repeats", "2", "--device", "cpu", "--format", "json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == 4
    for row in rows:
        assert set(REQUIRED) <= set(row)
    ok = [r for r in rows if r["attn"] == "eager"]
    bad = [r for r in rows if r["attn"] == "sdpa:efficient"]
    assert all(r["status"] == "ok" and len(r["output_ids"]) == 8 and r["prompt_tokens"] == 16 for r in ok)
    assert all(r["status"] == "invalid" and "needs a CUDA GPU" in r["reason"] for r in bad)
    assert "bench" in out.stderr  # the progress bar goes to stderr, never into the data
    assert len(RunStore().records()) == 2  # ok runs land in the shared history


@pytest.mark.parametrize("args", [["bench", "--attn", "nope"], ["bench", "--cache", "maybe"],
                                  ["bench", "--new-tokens", "0"], ["bench", "--repeats", "x"], ["explode"]])
def test_malformed_arguments_exit_2_with_usage(args):
    out = cli(*args)
    assert out.returncode == 2 and "usage:" in out.stderr


def test_models_lists_the_presets():
    out = cli("models")
    assert out.returncode == 0 and "tiny-random-llama" in out.stdout and "llama-3.1-8b-shape" in out.stdout


def test_run_set_is_the_cartesian_product_with_load_settings_outermost():
    args = build_parser().parse_args(["bench", "--attn", "eager,sdpa", "--cache", "on,off", "--dtype", "fp32,bf16"])
    combos = run_set(args)
    assert len(combos) == 8
    assert [c["dtype"] for c in combos] == ["fp32"] * 4 + ["bf16"] * 4


def test_markdown_shows_mean_std_and_only_varying_settings(tmp_path):
    out = cli("bench", "--attn", "eager,sdpa", "--new-tokens", "6", "--repeats", "2", "--device", "cpu",
              "--no-profile", "--output", str(tmp_path / "t.md"))
    assert out.returncode == 0, out.stderr
    table = (tmp_path / "t.md").read_text()
    header = table.splitlines()[0]
    assert "attn" in header and "dtype" not in header and "±" in table
    assert "Same for all rows:" in table and "dtype=fp32" in table
