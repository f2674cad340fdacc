"""The bench command line: sweeps, formats and refusals, run as a user would."""

import json
import re
import subprocess
import sys

import pytest

from playground.bench import build_parser, run_set
from playground.store import RunStore

REQUIRED = ("name", "model", "attn", "use_cache", "cache_impl", "cache_impl_effective", "dtype", "compile", "device",
            "prompt_tokens", "new_tokens", "repeats", "status", "reason", "ttft_ms", "ttft_ms_std", "decode_tok_s",
            "decode_tok_s_std", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "e2e_ms", "ttft_speedup", "decode_speedup",
            "peak_mem_mb", "kv_cache_mb", "compile_s", "attn_kernels", "fallback", "output_ids", "env")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "playground", *args], capture_output=True, text=True, timeout=600)


def test_json_sweep_has_every_field_and_an_invalid_row():
    out = cli("bench", "--model", "tiny-random-llama", "--attn", "eager,sdpa:efficient", "--cache", "on,off",
              "--prompt-tokens", "16", "--new-tokens", "8", "--repeats", "2", "--device", "cpu", "--format", "json")
    assert out.returncode == bench.FAILED, out.stderr  # a row that did not run fails the command
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("2 of 4 row(s) failed: row 3 (transformers · sdpa:efficient · dtype auto) invalid: ")
    assert "row 4 (transformers · sdpa:efficient · dtype auto · no cache) invalid: " in last and "CUDA GPU" in last
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
    assert "decode ×" in header and "TTFT ×" in header  # against the first row


def test_the_fast_backend_runs_on_its_own_static_cache_and_refuses_a_dynamic_one():
    out = cli("bench", "--backend", "fast", "--cache-impl", "auto,dynamic", "--new-tokens", "2", "--repeats", "1",
              "--no-profile", "--device", "cpu", "--format", "json")
    assert out.returncode == bench.FAILED, out.stderr
    ran, refused = json.loads(out.stdout)
    assert ran["status"] == "ok" and ran["cache_impl"] == "auto" and ran["cache_impl_effective"] == "static"
    assert refused["status"] == "invalid" and "own static KV cache" in refused["reason"]
    assert "1 of 2 row(s) failed: row 2 (fast · sdpa · dtype auto · dynamic cache) invalid:" in out.stderr


# ---- help, refusals before the sweep, and Ctrl-C ------------------------------------------------------

import os  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402

from playground import bench, config  # noqa: E402
from playground.printers import PRINTERS  # noqa: E402


def test_every_option_has_help_with_its_allowed_values():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, bench.argparse._SubParsersAction)).choices["bench"]
    text = " ".join(sub.format_help().split())
    for action in sub._actions:
        assert action.help, f"{action.option_strings} has no help"
    for choices in (config.ATTENTIONS, config.BACKENDS, config.CACHE_IMPLS, config.DTYPES, config.COMPILE_MODES,
                    config.DEVICES, config.MODES, tuple(PRINTERS)):
        assert ", ".join(choices) in text, choices


@pytest.mark.parametrize("args, words", [
    (["--prompt", ""], "argument --prompt: prompt is empty"),
    (["--prompt", "  \n"], "argument --prompt: prompt is empty or only whitespace"),
    (["--output", "/no/such/directory/t.md"], "the directory /no/such/directory does not exist"),
])
def test_refused_before_the_sweep_runs(args, words):
    out = cli("bench", "--model", "tiny-random-llama", "--new-tokens", "2", "--repeats", "1", *args)
    assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr
    assert RunStore().records() == [] and not re.search(r"bench:\s+\d+%", out.stderr)  # no sweep's progress bar


@pytest.mark.parametrize("fmt", list(PRINTERS))
def test_ctrl_c_keeps_the_finished_rows_in_every_format_and_exits_130(fmt, tmp_path, monkeypatch, capsys):
    from playground import engine

    real_run, calls = engine.run, []

    def interrupted_on_the_second(config, stop=None, on_phase=None):
        calls.append(config)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(config, stop, on_phase=on_phase)

    monkeypatch.setattr(engine, "run", interrupted_on_the_second)
    output = tmp_path / f"rows.{fmt}"
    code = bench.main(["bench", "--model", "tiny-random-llama", "--attn", "eager,sdpa,sdpa:math", "--new-tokens", "2",
                       "--repeats", "1", "--no-profile", "--device", "cpu", "--format", fmt, "--output", str(output)])
    text = output.read_text()
    assert code == bench.INTERRUPTED and "interrupted: 1 of 3 run(s) finished" in capsys.readouterr().err
    assert "eager" in text and "sdpa:math" not in text  # the finished row, and nothing after the interrupt


def _stderr_until(proc: subprocess.Popen, marker: str) -> tuple[threading.Event, threading.Thread, list[str]]:
    """Read `proc`'s stderr in the background (a progress bar ends its lines with \\r): the event is set once a
    line holds `marker`, or at the end of the stream; join the thread for all of it."""
    seen, chunks = threading.Event(), []

    def read():
        segment = ""
        while char := proc.stderr.read(1):
            chunks.append(char)
            segment = "" if char in "\r\n" else segment + char
            if marker in segment:
                seen.set()
        seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return seen, reader, chunks


def test_a_real_sigint_exits_130_without_a_traceback(tmp_path):
    output = tmp_path / "rows.jsonl"
    # SIGINT as a terminal delivers it: a parent started in the background (no job control) ignores SIGINT, and
    # a child would inherit that and finish the sweep
    proc = subprocess.Popen([sys.executable, "-m", "playground", "bench", "--model", "tiny-random-llama",
                             "--new-tokens", "64,2000", "--repeats", "1", "--warmup", "0", "--no-profile",
                             "--device", "cpu", "--format", "jsonl", "--output", str(output)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # the progress bar counts a run once its row is written and kept: from then on the long second run is under way
    first_run_done, reader, err = _stderr_until(proc, " 1/2 [")
    assert first_run_done.wait(timeout=300) and proc.poll() is None, "".join(err)
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=60)
    err = "".join(err)
    assert proc.returncode == bench.INTERRUPTED and "Traceback" not in err and "interrupted: 1 of 2" in err, err
    assert [json.loads(line)["new_tokens"] for line in output.read_text().splitlines()] == [64]
