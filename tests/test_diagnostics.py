"""The speed checklist and the A-vs-B verdicts, on hand-made records."""

from __future__ import annotations

from playground import diagnostics
from ui.records import make_record


def test_numbers_have_units_and_std():
    assert diagnostics.num(1234.5, "ms", 12.0) == "1,234 ± 12.0 ms"
    assert diagnostics.num(3.14159, "tok/s") == "3.14 tok/s"
    assert diagnostics.num(None, "MB") == "—"


def test_checklist_catches_unused_cache_and_missing_flash():
    rows = {check: mark for mark, check, _ in diagnostics.checklist(make_record(use_cache=True, kv_cache_mb=0.0))}
    assert rows["KV cache really used"] == "✗"
    flash = make_record(attn="flash_attention_2", attn_families={"prefill": ["sdpa-math"], "decode": ["sdpa-math"]},
                        fallback="decode: requested flash_attention_2 but sdpa-math ran")
    rows = {check: mark for mark, check, _ in diagnostics.checklist(flash)}
    assert rows["FlashAttention really active"] == "✗" and rows["No fallback"] == "✗"
    assert rows["Warm-up done"] == "✓"


def test_checklist_reads_eval_and_inference_mode_from_the_run():
    good = {check: mark for mark, check, _ in diagnostics.checklist(make_record(model_training=False, inference_mode=True))}
    assert good["Eval mode"] == "✓" and good["Inference mode"] == "✓"
    bad = {check: mark for mark, check, _ in diagnostics.checklist(make_record(model_training=True, inference_mode=False))}
    assert bad["Eval mode"] == "✗" and bad["Inference mode"] == "✗"


def test_comparison_gives_identical_tokens_speedups_and_noise_verdicts():
    a = make_record(ttft_ms=20.0, ttft_ms_std=0.1, decode_tok_s=100.0, decode_tok_s_std=1.0,
                    aggregate_decode_tok_s=100.0, aggregate_decode_tok_s_std=1.0)
    b = make_record(ttft_ms=10.0, ttft_ms_std=0.1, decode_tok_s=50.0, decode_tok_s_std=1.0, output_ids=[5, 6, 9],
                    batch_size=8, aggregate_decode_tok_s=400.0, aggregate_decode_tok_s_std=4.0)
    verdict = diagnostics.comparison(a, b)
    assert (verdict["comparable"], verdict["identical"], verdict["first_difference"]) == (True, False, 2)
    assert not verdict["interleaved"]  # runs measured apart: each side's mean and spread
    assert (verdict["ttft_speedup_b_over_a"], verdict["ttft_call"]) == (2.0, "better")
    assert (verdict["decode_speedup_b_over_a"], verdict["decode_call"]) == (0.5, "worse")  # each sequence slower,
    assert (verdict["throughput_speedup_b_over_a"], verdict["throughput_call"]) == (4.0, "better")  # the batch faster
    one = make_record(repeats=1)
    assert diagnostics.verdict(one, one, "decode").call == "unknown"  # one repeat: no noise estimate


def test_interleaved_runs_are_compared_pair_by_pair():
    runs = dict(pairing="interleaved", pair_id="p1")
    a = make_record(decode_tok_s=80.0, decode_tok_s_std=20.0, decode_tok_s_runs=[100.0, 80.0, 60.0], **runs)
    b = make_record(decode_tok_s=82.0, decode_tok_s_std=20.0, decode_tok_s_runs=[101.0, 82.0, 61.0], **runs)
    v = diagnostics.verdict(a, b, "decode")
    assert v.paired and v.n == 3 and v.call != "better"
    assert diagnostics.verdict_words(v) == "no clear difference on this host"
    apart = diagnostics.verdict(a, make_record(**{**vars(b), "pair_id": "p2"}), "decode")
    assert not apart.paired  # another run's record is not its pair
    words = diagnostics.noise_words(v, 35.0)
    assert "3 interleaved pairs" in words and "noise floor ±" in words and "35% of the host's CPUs" in words


def test_outputs_are_compared_only_for_the_same_prompt_and_greedy_sampling():
    a = make_record()
    b = make_record(config={**a.config, "temperature": 0.7})
    assert diagnostics.compare_outputs(a, a)["identical"] and not diagnostics.compare_outputs(a, b)["comparable"]
