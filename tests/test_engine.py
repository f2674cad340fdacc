"""The engine on the tiny preset: what users rely on, checked on real transformers generate paths."""

import re
import threading

import pytest

from playground import engine
from playground.config import RunConfig
from playground.engine import Phase, Result, Token, generate, run
from playground.loader import MODELS, matmul_shape
from playground.metrics import prefill_flops

TINY = dict(model="tiny-random-llama", device="cpu", new_tokens=12, repeats=2, warmup=1)


def events_of(config, stop=None):
    return list(generate(config, stop))


def test_benchmark_mode_generates_exactly_n_tokens_each_pass():
    events = events_of(RunConfig(prompt="Count these tokens", **TINY))
    tokens = [e for e in events if isinstance(e, Token)]
    passes = {}
    for t in tokens:
        passes.setdefault(t.pass_name, []).append(t.index)
    assert passes["warmup 1/1"] == list(range(12))
    assert passes["repeat 1/2"] == passes["repeat 2/2"] == list(range(12))
    record = events[-1].record
    assert isinstance(events[-1], Result) and record.status == "ok", record.reason
    assert record.tokens_generated == 12 and len(record.output_ids) == 12


def test_events_come_in_order_and_end_with_one_result():
    events = events_of(RunConfig(prompt="Order", **TINY))
    phases = [e.phase for e in events if isinstance(e, Phase)]
    phases = [p for i, p in enumerate(phases) if p == "repeat" or i == 0 or p != phases[i - 1]]  # a slow load repeats
    assert phases == ["loading", "warmup", "repeat", "repeat", "profiling"]
    assert sum(isinstance(e, Result) for e in events) == 1
    times = [e.t_ms for e in events if isinstance(e, Token) and e.pass_name == "repeat 1/2"]
    assert times == sorted(times) and times[0] > 0


def test_paired_repeats_take_turns_going_first():
    """A1 B1 B2 A2 ...: the second run of a pair, which a warmer cache or a busier core may favour, is each side's
    in turn, and both records say they were interleaved under one pair id."""
    a = RunConfig(prompt="Turns", **{**TINY, "repeats": 4, "new_tokens": 4})
    b = a.replace(use_cache=False)
    order, records = [], {}
    for side, event in engine.generate_sides({"A": a, "B": b}, extra_s=0.0):
        if isinstance(event, Phase) and event.phase == "repeat":
            order.append(side)
        elif isinstance(event, Result):
            records[side] = event.record
    assert order == list("ABBAABBA")
    assert {r.pairing for r in records.values()} == {"interleaved"} and len({r.pair_id for r in records.values()}) == 1


def test_a_draft_side_beside_a_plain_one_on_the_same_model_keeps_its_draft_run_after_run():
    """Seen with speculation off vs draft model clicked twice: the sides share the loaded target, and B's
    profiled pass ran with the draft that A's last pass had taken off."""
    from playground.speculative import GROUNDED_PROMPT

    a = RunConfig(model="stdlib-llama-tiny", prompt=GROUNDED_PROMPT, new_tokens=6, repeats=2, warmup=1, device="cpu")
    b = a.replace(spec="draft", draft_tokens=3)
    for _ in range(2):
        records = {side: event.record for side, event in engine.generate_sides({"A": a, "B": b}, extra_s=0.0)
                   if isinstance(event, Result)}
        assert [r.status for r in records.values()] == ["ok", "ok"], [r.reason for r in records.values()]
        assert records["B"].spec_effective == "draft" and records["B"].output_ids == records["A"].output_ids


def test_synthetic_prompt_has_exactly_the_requested_length():
    record = run(RunConfig(prompt_tokens=37, **TINY))
    assert record.status == "ok" and record.prompt_tokens == 37


@pytest.mark.parametrize("attn", ["eager", "sdpa", "sdpa:math", "sdpa:flash"])
def test_greedy_ids_identical_with_and_without_kv_cache(attn):
    base = dict(TINY, prompt_tokens=24, attn=attn, repeats=1, warmup=0, profile_kernels=False)
    with_cache = run(RunConfig(use_cache=True, **base))
    without = run(RunConfig(use_cache=False, **base))
    static = run(RunConfig(use_cache=True, cache_impl="static", **base))
    assert with_cache.status == without.status == static.status == "ok"
    assert with_cache.output_ids == without.output_ids == static.output_ids


def test_greedy_ids_identical_across_attention_paths():
    base = dict(TINY, prompt_tokens=24, repeats=1, warmup=0, profile_kernels=False)
    outputs = {attn: run(RunConfig(attn=attn, **base)).output_ids for attn in ("eager", "sdpa", "sdpa:math")}
    assert outputs["eager"] == outputs["sdpa"] == outputs["sdpa:math"]


def test_kv_cache_size_is_recorded_only_when_the_cache_is_used():
    base = dict(TINY, prompt_tokens=20, repeats=1, warmup=0, profile_kernels=False)
    on = run(RunConfig(use_cache=True, **base))
    off = run(RunConfig(use_cache=False, **base))
    # 4 layers x (K + V) x 2 kv heads x 64 dims x fp32, over prompt + generated - 1 positions
    assert on.kv_cache_mb == pytest.approx(4 * 2 * 2 * 64 * 4 * (20 + 12 - 1) / 2**20)
    assert off.kv_cache_mb == 0


@pytest.mark.parametrize("attn, family", [("eager", "eager"), ("sdpa:math", "sdpa-math"), ("sdpa:flash", "sdpa-flash")])
def test_profiler_names_the_attention_path_that_ran(attn, family):
    record = run(RunConfig(prompt="Which kernel?", attn=attn, **TINY))
    assert record.attn_families == {"prefill": [family], "decode": [family]}
    assert record.fallback is None
    assert record.attn_kernels["decode"]


def test_metrics_are_consistent():
    r = run(RunConfig(prompt="Numbers", **TINY))
    assert r.ttft_ms > 0 and r.decode_tok_s > 0 and r.e2e_ms > r.ttft_ms
    assert r.itl_ms_p50 <= r.itl_ms_p90 <= r.itl_ms_p99
    assert len(r.itl_ms) == 11
    assert r.peak_mem_mb > 0 and r.cold_e2e_ms > 0
    assert r.compile_s is None  # compile was off
    assert r.dtype_effective == "fp32" and r.device_effective == "cpu" and r.attn_effective == "sdpa"
    assert r.random_weights is True
    assert r.env["torch"] and r.env["transformers"]
    lm, _ = MODELS.get(r.model, "cpu", "fp32", "sdpa")
    flops = prefill_flops(matmul_shape(lm.model), r.prompt_tokens)
    assert r.prefill_tflop_s == pytest.approx(flops / (r.ttft_ms / 1e3) / 1e12)


def test_free_mode_may_stop_at_eos_but_benchmark_mode_may_not():
    # Make EOS the greedy choice by asking for it after it appeared: the tiny model repeats its last token.
    free = run(RunConfig(prompt="x", mode="free", **dict(TINY, new_tokens=40)))
    bench = run(RunConfig(prompt="x", mode="benchmark", **dict(TINY, new_tokens=40)))
    assert bench.tokens_generated == 40
    assert free.tokens_generated <= 40


def test_batch_runs_and_reports_row_zero():
    record = run(RunConfig(prompt="batch", batch_size=3, **TINY))
    assert record.status == "ok" and len(record.output_ids) == 12


def test_stop_ends_the_run_within_a_step_and_the_engine_serves_again():
    stop = threading.Event()
    seen = 0
    for event in generate(RunConfig(prompt="stop me", **dict(TINY, new_tokens=2000, repeats=1, warmup=0)), stop):
        if isinstance(event, Token):
            seen += 1
            if seen == 5:
                stop.set()
        if isinstance(event, Result):
            record = event.record
    assert record.status == "stopped" and seen < 60  # the stop check runs every step; tokens arrive in 20 ms batches
    assert run(RunConfig(prompt="again", **TINY)).status == "ok"


def test_closing_the_stream_stops_generation():
    stream = generate(RunConfig(prompt="walk away", **dict(TINY, new_tokens=2000, repeats=1, warmup=0)))
    for event in stream:
        if isinstance(event, Token):
            break
    stream.close()  # a client that disconnects
    assert run(RunConfig(prompt="next user", **TINY)).status == "ok"


def test_prompt_longer_than_the_context_is_refused():
    record = run(RunConfig(prompt_tokens=4090, **TINY))
    assert record.status == "invalid"
    assert "exceeds the model's context of 4096 tokens" in record.reason


def test_host_refusal_is_a_record_not_an_exception():
    record = run(RunConfig(prompt="x", attn="sdpa:cudnn", **TINY))
    assert record.status == "invalid" and "needs a CUDA GPU" in record.reason


def test_unknown_preset_and_offline_hub_give_clear_errors():
    missing = run(RunConfig(prompt="x", **dict(TINY, model="./no/such/dir")))
    assert missing.status == "error" and "no config.json" in missing.reason
    hub = run(RunConfig(prompt="x", **dict(TINY, model="someone/some-model")))
    assert hub.status == "error" and "Hugging Face Hub" in hub.reason


def test_compile_is_reported_and_timed_apart_from_steady_state(monkeypatch):
    monkeypatch.setattr(engine, "LOAD_POLL_S", 0.001)
    events = list(generate(RunConfig(prompt="compile", cache_impl="static", compile="default",
                                     **dict(TINY, new_tokens=8, profile_kernels=False))))
    record = events[-1].record
    assert record.status == "ok", record.reason
    phases = [e.phase for e in events if isinstance(e, Phase)]
    first_call = phases[phases.index("warmup"):phases.index("repeat")]  # the first call's pass, until the next
    assert first_call[0] == "warmup" and "compiling" in first_call  # a compile takes more than 1 ms
    assert "compiling" not in phases[phases.index("repeat"):]  # later calls compile nothing
    progress = [e.detail for e in events if isinstance(e, Phase) and e.phase == "compiling"]
    assert all(re.fullmatch(r"first call, \d+ s so far", d) for d in progress), progress
    assert "torch.compile" in record.compiled and "mode=default" in record.compiled
    assert record.compile_s > 0 and record.cold_e2e_ms > record.e2e_ms
    eager = run(RunConfig(prompt="compile", cache_impl="static", **dict(TINY, new_tokens=8, profile_kernels=False)))
    assert eager.compiled == "" and eager.output_ids == record.output_ids


FUSED_SDPA = {"sdpa-flash", "sdpa-efficient", "sdpa-cudnn"}


@pytest.mark.parametrize("backend, compile_mode", [
    ("transformers", "default"), pytest.param("fast", "reduce-overhead", marks=pytest.mark.gpu)])
def test_a_compiled_graph_is_not_replayed_under_another_sdpa_backend(backend, compile_mode):
    """torch.compile keys no cache on the SDPA flags: a forced math run must not replay torch's own choice.

    The decode step is compiled; under math its attention is plain matmul and softmax (fused by
    inductor), so no fused SDPA kernel may appear there, and the next run under torch's choice
    must get its fused kernel back.
    """
    device = "cuda" if backend == "fast" else "cpu"
    base = dict(TINY, new_tokens=4, repeats=1, prompt="compile", cache_impl="static", compile=compile_mode,
                backend=backend, device=device)

    def decode_families(**changes) -> set[str]:
        record = run(RunConfig(**dict(base, **changes)))
        assert record.status == "ok", record.reason
        return set(record.attn_families["decode"])

    assert decode_families() & FUSED_SDPA  # torch's own choice, compiled (and cached) first
    assert not decode_families(attn="sdpa:math") & FUSED_SDPA
    assert decode_families() & FUSED_SDPA


@pytest.mark.parametrize("prompt", ["😀 emoji ✨", "مرحبا بالعالم", "ctrl\x00\x07\x1b[31m", "<script>alert(1)</script>"])
def test_unusual_prompts_run(prompt):
    record = run(RunConfig(prompt=prompt, **dict(TINY, repeats=1)))
    assert record.status == "ok"


def test_fast_backend_streams_the_same_greedy_tokens_as_transformers():
    base = dict(TINY, prompt="same tokens, two backends", cache_impl="static", new_tokens=16)
    hf = run(RunConfig(backend="transformers", **base))
    fast = run(RunConfig(backend="fast", **base))
    assert hf.status == fast.status == "ok", fast.reason
    assert fast.output_ids == hf.output_ids and fast.backend == "fast"
    assert fast.attn_families["decode"] == ["sdpa-flash"] and fast.kv_cache_mb > 0


def test_fast_backend_refuses_what_it_cannot_run():
    record = run(RunConfig(backend="fast", prompt="x", cache_impl="static", compile="default", **TINY))
    assert record.status == "invalid" and "backend=fast cannot run this" in record.reason


def test_cpu_peak_memory_does_not_drift_with_what_the_process_already_holds():
    config = RunConfig(prompt_tokens=32, **dict(TINY, repeats=1, profile_kernels=False))
    first = run(config)
    ballast = bytearray(300 * 2**20)  # the process grows by 300 MB between two identical runs
    ballast[::4096] = b"x" * len(ballast[::4096])
    second = run(config)
    assert first.peak_mem_kind == second.peak_mem_kind == "weights_plus_rss_growth"
    assert second.peak_mem_mb >= second.weights_mb > 0
    assert abs(second.peak_mem_mb - first.peak_mem_mb) < 100, (first.peak_mem_mb, second.peak_mem_mb)
    del ballast


def test_a_profiled_run_prints_no_profiler_error(tmp_path):
    """Kineto's "External init callback must run in same thread" reads like a failure to a user."""
    import subprocess
    import sys

    code = ("from playground.config import RunConfig; from playground.engine import run; "
            "r = run(RunConfig(model='tiny-random-llama', device='cpu', prompt_tokens=8, new_tokens=4, repeats=1, "
            "warmup=0)); print(r.status, sorted(r.attn_families))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok ['decode', 'prefill']"), out.stdout + out.stderr
    assert "ERROR" not in out.stderr, out.stderr
