"""A model split across devices: tensor parallel over CPU processes (gloo), and the refusals of what a host lacks."""

from __future__ import annotations

import sys
import threading

import pytest

from playground import capabilities, parallel
from playground.config import ConfigError, RunConfig
from playground.engine import Phase, Result, Token, generate, run
from playground.hosting import HostingPolicy

BASE = RunConfig(prompt="def main():\n    parser = ", new_tokens=12, repeats=1)


def test_tensor_parallel_over_two_processes_streams_rank_zeros_tokens_and_keeps_the_greedy_ids():
    one = run(BASE)
    events = list(generate(BASE.replace(parallel="tp", devices=2)))
    record = events[-1].record
    assert isinstance(events[-1], Result) and record.status == "ok", record.reason
    assert record.output_ids == one.output_ids
    repeat = [e.token_id for e in events if isinstance(e, Token) and e.pass_name == "repeat 1/1"]
    assert repeat == record.output_ids  # every token streamed from rank 0 as it came
    assert any(isinstance(e, Phase) and "rank 0 of 2" in e.detail for e in events)
    assert 0.4 < record.weights_mb / one.weights_mb < 0.6  # each rank holds about half the weights
    assert record.comm_ms_per_step > 0 and "tp ×2" in record.name
    assert len(record.rank_peak_mem_mb) == 2 and all(record.rank_peak_mem_mb)  # rank 1 reported its record too
    assert record.rank_weights_mb[0] == record.weights_mb and abs(record.rank_weights_mb[1] - record.weights_mb) < 1


def test_stopping_a_tensor_parallel_run_ends_it_and_says_so():
    stop = threading.Event()
    record = None
    for event in generate(BASE.replace(parallel="tp", devices=2, new_tokens=400, repeats=3), stop):
        if isinstance(event, Token):
            stop.set()
        if isinstance(event, Result):
            record = event.record
    assert record.status == "stopped" and "rank" in record.reason


def test_a_rank_that_fails_is_an_error_with_its_last_words(monkeypatch, tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no interpreter here' >&2\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(broken))  # every rank's process fails at once
    record = run(BASE.replace(parallel="tp", devices=2))
    assert record.status == "error"
    assert "rank 0 of 2 ended with status 3: no interpreter here" in record.reason


@pytest.mark.parametrize("changes, reason", [
    (dict(parallel="tp", devices=4), "6 query and 6 key/value heads do not split 4 ways"),
    (dict(parallel="device_map"), "places layers on GPUs"),
])
def test_what_this_host_cannot_split_is_refused_with_the_reason(changes, reason):
    record = run(BASE.replace(**changes))
    assert record.status == "invalid" and reason in record.reason


def test_a_host_with_fewer_gpus_than_asked_refuses(monkeypatch):
    one_gpu = capabilities.Host(cuda=True, device_name="NVIDIA H200", capability=(9, 0), bf16=True, packages={},
                                gpus=1)
    monkeypatch.setattr(capabilities, "host", lambda: one_gpu)
    record = run(BASE.replace(parallel="tp", devices=2, device="cuda"))
    assert record.status == "invalid" and "needs 2 GPUs and this host has 1" in record.reason
    assert parallel.unavailable("device_map", 2, "cuda", 1) == "it needs 2 GPUs and this host has 1"
    assert parallel.unavailable("tp", 4, "cuda", 4) is None and parallel.unsplittable("tp", 4, (32, 8)) is None


@pytest.mark.parametrize("changes", [dict(backend="fast", cache_impl="static"), dict(spec="prompt_lookup"),
                                     dict(quant="int8")])
def test_splitting_refuses_what_it_cannot_carry(changes):
    with pytest.raises(ConfigError, match="parallel=tp runs on backend transformers"):
        BASE.replace(parallel="tp", **changes)


def test_a_hosted_app_refuses_splitting_and_a_local_one_does_not():
    with pytest.raises(ConfigError, match="one device"):
        HostingPolicy.from_env({"PLAYGROUND_HOSTED": "1"}).check(BASE.replace(parallel="tp"))
    HostingPolicy.from_env({}).check(BASE.replace(parallel="tp"))


def test_the_benchmark_prints_one_device_and_tensor_parallel_with_the_same_ids(capsys):
    from benchmarks.parallel import main

    main(["--prompt-tokens", "8", "--new-tokens", "4", "--repeats", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| none", "| tp x2"))]
    assert len(rows) == 2 and all(row.endswith("| identical |") for row in rows)


def test_a_random_weight_preset_is_written_once_as_a_checkpoint_the_ranks_load(monkeypatch, tmp_path):
    from playground.checkpoint import INDEX

    monkeypatch.setenv("PLAYGROUND_CHECKPOINTS", str(tmp_path))
    config = BASE.replace(model="tiny-random-llama", parallel="tp", devices=2)
    record = run(config)
    assert record.status == "ok", record.reason
    written = tmp_path / "tiny-random-llama-float32"
    assert (written / INDEX).is_file() and (written / "tokenizer.json").is_file()
    stamp = (written / INDEX).stat().st_mtime_ns
    again = run(config)
    assert again.output_ids == record.output_ids and (written / INDEX).stat().st_mtime_ns == stamp  # reused
