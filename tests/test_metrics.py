import pytest

from playground.metrics import (NOISE_FLOOR, MatmulShape, paired_verdict, unpaired_verdict, PassTiming, StepCounts, aggregate_tok_s, attended_pairs,
                                first_difference, kv_bytes_per_token_measured, padding, percentile,
                                prefill_flops, speculation, speedup, summarize, t_critical)


def timing(tokens, prefill_start=10.0, call_start=9.5, end=None):
    return PassTiming(prefill_start, tuple(tokens), end if end is not None else tokens[-1], call_start)


def test_ttft_is_prefill_start_to_first_token():
    assert timing([10.25, 10.30]).ttft_ms == pytest.approx(250.0)


def test_decode_rate_excludes_prefill():
    # 5 tokens, the first at 11.0 after a long 1 s prefill; 4 intervals of 0.1 s after it
    t = timing([11.0, 11.1, 11.2, 11.3, 11.4])
    assert t.decode_tok_s == pytest.approx(10.0)  # (5 - 1) / 0.4, not 5 / 1.4


def test_decode_rate_leaves_the_first_steps_tokens_to_prefill():
    # speculative decoding: the prefill step emits 3 tokens at 11.0, then steps of 2 and 1 tokens
    t = timing([11.0, 11.0, 11.0, 11.1, 11.1, 11.3])
    assert t.decode_tok_s == pytest.approx(3 / 0.3)  # 3 tokens after the first step, not 5
    assert t.itl_ms == pytest.approx([0.0, 0.0, 100.0, 0.0, 200.0])


def test_speculation_figures_total_over_passes():
    one = StepCounts(drafted=(4, 4, 4), emitted=(5, 2, 1), draft_s=0.03, draft_calls=6, decode_s=0.1)
    two = StepCounts(drafted=(4, 2), emitted=(1, 3), draft_s=0.01, draft_calls=2, decode_s=0.1)
    assert (one.target_steps, one.accepted) == (3, 5)
    figures = speculation([one, two])
    assert figures.acceptance_rate == pytest.approx(7 / 18)
    assert figures.tokens_per_step == pytest.approx(12 / 5)
    assert figures.draft_share_pct == pytest.approx(20.0)
    assert figures.draft_step_ms == pytest.approx(5.0)
    assert figures.verify_step_ms is None  # neither pass timed its verify steps
    lookup = speculation([StepCounts(drafted=(0, 0), emitted=(1, 1), draft_s=0.0, draft_calls=0, decode_s=0.1)])
    assert lookup.acceptance_rate is None and lookup.draft_share_pct is None and lookup.tokens_per_step == 1.0


def test_a_verify_step_is_every_target_step_but_the_prefill():
    one = StepCounts(drafted=(0, 4, 4), emitted=(1, 5, 2), draft_s=0.03, draft_calls=8, decode_s=0.1, verify_s=0.02)
    two = StepCounts(drafted=(0, 4), emitted=(1, 3), draft_s=0.01, draft_calls=4, decode_s=0.1, verify_s=0.01)
    assert speculation([one, two]).verify_step_ms == pytest.approx(1e3 * 0.03 / 3)
    untimed = StepCounts(drafted=(0, 4), emitted=(1, 3), draft_s=0.01, draft_calls=4, decode_s=0.1)
    assert speculation([one, untimed]).verify_step_ms is None  # a mean over some passes would mislead


def test_inter_token_latency_is_positive_and_in_order():
    t = timing([11.0, 11.1, 11.3, 11.6])
    assert t.itl_ms == pytest.approx([100.0, 200.0, 300.0])


def test_single_token_has_no_decode_rate():
    assert timing([10.5]).decode_tok_s is None


def test_e2e_from_call_to_end():
    assert timing([10.5, 10.6], end=11.0).e2e_ms == pytest.approx(1500.0)


def test_summary_statistics():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.mean, s.p50, s.n) == (2.5, 2.5, 4)
    assert s.std == pytest.approx(1.2909944)  # sample standard deviation
    assert s.p90 == pytest.approx(3.7)
    assert summarize([]) is None
    assert summarize([5.0]).std == 0.0


def test_percentile_matches_linear_interpolation():
    assert percentile(list(range(101)), 99) == pytest.approx(99.0)
    assert percentile([1.0, 3.0], 50) == pytest.approx(2.0)


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_speedup_direction():
    assert speedup(100.0, 50.0, higher_is_better=False) == 2.0  # latency halved
    assert speedup(100.0, 200.0, higher_is_better=True) == 2.0  # throughput doubled
    assert speedup(None, 1.0, True) is None


def test_prefill_flops_count_weights_per_token_causal_attention_and_the_head_once():
    shape = MatmulShape(body_weights=1000, head_weights=50, layers=2, heads=3, head_dim=4)
    # linear 2*1000*10, attention 2 matmuls * 2 * 2 layers * 3 heads * 4 dims * (10*11/2 pairs), head 2*50
    assert prefill_flops(shape, 10) == 20_000 + 2 * 2 * 2 * 3 * 4 * 55 + 100
    assert prefill_flops(shape, 10, batch=4) == 4 * prefill_flops(shape, 10)


def test_a_sliding_window_caps_the_keys_each_query_attends_to():
    assert attended_pairs(4, None) == attended_pairs(4, 8) == 1 + 2 + 3 + 4
    assert attended_pairs(6, 3) == 1 + 2 + 3 + 3 + 3 + 3


def test_the_unpaired_verdict_needs_more_than_a_lucky_difference():
    assert unpaired_verdict(100.0, 1.0, 3, 50.0, 1.0, 3, higher_is_better=True).call == "worse"
    assert unpaired_verdict(57.4, 22.9, 3, 25.8, 3.61, 3, higher_is_better=False).call == "unsure"
    assert unpaired_verdict(57.4, 22.9, 30, 25.8, 3.61, 30, higher_is_better=False).call == "better"
    assert unpaired_verdict(10.0, 0.0, 3, 10.0, 0.0, 3, higher_is_better=True).call == "same"
    assert unpaired_verdict(10.0, 1.0, 1, 20.0, 1.0, 3, higher_is_better=True).call == "unknown"  # no noise estimate


def test_pairing_cancels_a_drift_that_lands_on_both_sides():
    """A host slowing down through the run: apart, B's repeats look slower; taken in turn, each pair agrees."""
    drift = [100.0, 80.0, 64.0, 51.2]
    a, b = drift, [x * 0.99 for x in drift]  # the same configuration, timed just after A each time
    paired = paired_verdict(a, b, higher_is_better=True)
    assert paired.call == "same" and paired.paired and paired.n == 4
    assert unpaired_verdict(100.0, 1.0, 3, 70.0, 1.0, 3, higher_is_better=True).call == "worse"  # blocks read drift


def test_a_difference_under_the_noise_floor_is_never_called():
    a, b = [100.0, 100.1, 99.9], [103.0, 103.1, 102.9]  # 3% apart, perfectly steady
    v = paired_verdict(a, b, higher_is_better=True)
    assert v.call != "better" and v.noise == NOISE_FLOOR
    noisy = paired_verdict([100.0, 100.0, 100.0], [130.0, 85.0, 120.0], higher_is_better=True)
    assert noisy.noise > 0.2 and noisy.call == "unsure"  # the pairs' own spread raises the floor
    drifting = paired_verdict([100.0, 60.0, 100.0, 80.0], [115.0, 70.0, 112.0, 92.0], higher_is_better=True)
    assert drifting.call == "better"  # each pair agrees, whatever the host did between pairs


def test_a_clear_speedup_is_called_in_its_direction_for_either_kind_of_figure():
    assert paired_verdict([20.0, 21.0, 19.0], [80.0, 85.0, 78.0], higher_is_better=True).call == "better"
    ttft = paired_verdict([20.0, 21.0, 19.0], [80.0, 85.0, 78.0], higher_is_better=False)
    assert ttft.call == "worse" and 0.2 < ttft.ratio < 0.3


def test_critical_t_never_drops_below_the_tabulated_value_for_fewer_dof():
    assert t_critical(2.9) == 9.925 and t_critical(30.5) == 2.750
    assert t_critical(45) == 2.704 and t_critical(100) == 2.660 and t_critical(5000) == 2.617


def test_aggregate_rate_counts_a_token_per_row_per_step():
    assert aggregate_tok_s(25.0, 8) == 200.0
    assert aggregate_tok_s(None, 8) is None


def test_padding_counts_the_positions_left_of_each_row():
    pad = padding([10, 7, 4, 1], width=10)  # 22 real tokens in 40 positions
    assert (pad.real_tokens, pad.padded_tokens) == (22, 18)
    assert pad.padding_pct == pytest.approx(45.0)
    assert padding([5, 5], width=5).padding_pct == 0.0


def test_kv_per_token_divides_by_the_positions_computed():
    # 2 rows, a 10-token prompt, 5 generated: the last token's keys and values were never computed
    assert kv_bytes_per_token_measured(2 * 14 * 4096, 2, 10, 5) == 4096
    assert kv_bytes_per_token_measured(0, 2, 10, 5) is None  # no cache


def test_an_a_a_pair_of_a_loaded_host_whose_interval_barely_excludes_no_change_is_not_called():
    """Seen with the same configuration on both sides and the host's CPUs 81% busy elsewhere: B/A 1.24x, its
    95% interval 1.00-1.54x. Its whole interval must clear half the noise floor, so it stays open."""
    v = paired_verdict([100.0] * 5, [100.0, 150.0, 110.0, 140.0, 125.0], higher_is_better=True)
    assert v.ratio > 1 + v.noise and v.call == "unsure"
