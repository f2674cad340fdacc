"""Rendering: model text stays text, speedups and the tokens' comparison read as the verdicts say."""

from __future__ import annotations

from playground.ui import render
from playground.ui.streaming import Pane
from records import make_record


def test_model_text_is_escaped_not_interpreted():
    span = render.token_span("<script>alert(1)</script> ${x} `y` {{z}} & **b**", 0)
    assert "<script>" not in span and "&lt;script&gt;" in span
    assert "${" not in span and "`" not in span and "{{" not in span
    assert "**b**" in span  # Markdown is not rendered either: it stays literal text


def test_token_boundaries_alternate_shading():
    assert 'class="tk tk0"' in render.token_span("a", 0)
    assert 'class="tk tk1"' in render.token_span("b", 7)


def test_speedup_direction_and_noise():
    a = make_record(ttft_ms=20.0, ttft_ms_std=0.1, decode_tok_s=100.0, decode_tok_s_std=1.0)
    b = make_record(ttft_ms=10.0, ttft_ms_std=0.1, decode_tok_s=50.0, decode_tok_s_std=1.0)
    assert "B 2.00× faster" in render.speedup_text(a, b, "ttft")
    assert "B 2.00× slower" in render.speedup_text(a, b, "decode")
    noisy = make_record(ttft_ms=11.0, ttft_ms_std=5.0)
    assert "no clear difference on this host" in render.speedup_text(b, noisy, "ttft")


def test_a_same_config_pair_with_one_wild_repeat_is_not_called_faster():
    """Seen in this repo's browser test: identical configs, A's TTFT 57.4 ± 22.9 ms vs B's 25.8 ± 3.61 (3 repeats)."""
    a, b = make_record(ttft_ms=57.4, ttft_ms_std=22.9), make_record(ttft_ms=25.8, ttft_ms_std=3.61)
    assert "no clear difference on this host" in render.speedup_text(a, b, "ttft")
    steady_a, steady_b = make_record(ttft_ms=57.4, ttft_ms_std=2.0), make_record(ttft_ms=25.8, ttft_ms_std=1.0)
    assert 'class="good"' in render.speedup_text(steady_a, steady_b, "ttft")


def test_one_repeat_says_its_noise_is_unknown():
    a, b = make_record(repeats=1, decode_tok_s=100.0), make_record(repeats=1, decode_tok_s=300.0)
    assert "B/A 3.00× (1 repeat: noise unknown)" in render.speedup_text(a, b, "decode")


def test_metrics_table_shows_units_kernels_and_speedup_column():
    html = render.metrics_table({"A": make_record(1), "B": make_record(2, decode_tok_s=400.0)})
    for text in ("ms", "tok/s", "MB", "B vs A", "aten::_scaled_dot_product_flash_attention_for_cpu", "B 2.00× faster"):
        assert text in html


def test_a_batch_shows_its_throughput_against_one_sequence_its_padding_and_kv_bytes():
    one = make_record(1, aggregate_decode_tok_s=200.0, aggregate_decode_tok_s_std=5.0, prompt_real_tokens=8,
                      prompt_padded_tokens=0, padding_pct=0.0, kv_bytes_per_token=4096,
                      kv_bytes_per_token_measured=4096.0)
    eight = make_record(2, batch_size=8, decode_tok_s=150.0, aggregate_decode_tok_s=1200.0,
                        aggregate_decode_tok_s_std=40.0, prompt_real_tokens=40, prompt_padded_tokens=24,
                        padding_pct=37.5, kv_bytes_per_token=4096, kv_bytes_per_token_measured=4096.0,
                        max_batch_predicted=900, config={**one.config, "length_spread_pct": 60})
    html = render.metrics_table({"A": one, "B": eight})
    assert "B 6.00× faster" in html and "B 1.33× slower" in html  # the batch is faster, each sequence slower
    assert "24 of 64 prompt positions are left padding (37.5 %)" in html and "1 sequence · no padding" in html
    assert "4,096 B by the config / 4,096 B held" in html
    assert "about 900 sequences of this length fit" in html
    assert eight.name.endswith("fp32 · batch 8 · spread 60%") and eight.setting_name.endswith("fp32 · spread 60%")


def test_summary_reports_identical_tokens_and_first_difference():
    panes = {s: Pane(s, "t") for s in "AB"}
    panes["A"].finish(make_record(1))
    panes["B"].finish(make_record(2))
    assert "identical tokens (4 of 4)" in render.summary_html(panes)
    panes["B"].finish(make_record(2, output_ids=[5, 6, 9, 9]))
    assert "first differ at token 2" in render.summary_html(panes)


def test_a_compiled_side_shows_its_first_call_beside_the_steady_state():
    panes = {s: Pane(s, "t") for s in "AB"}
    panes["A"].finish(make_record(1, cold_e2e_ms=420.0))
    panes["B"].finish(make_record(2, compile="default", cold_e2e_ms=31_000.0))
    html = render.summary_html(panes)
    assert "First call" in html and "A 0.42 s" in html and "B 31.0 s (compiles)" in html
    panes["B"].finish(make_record(2, cold_e2e_ms=400.0))
    assert "First call" not in render.summary_html(panes)  # nothing compiled: no first-call cell


def test_fallback_is_a_visible_warning_in_the_pane():
    pane = Pane("A", "t")
    pane.finish(make_record(fallback="prefill: requested sdpa:flash but sdpa-math ran"))
    html = pane.html()
    assert "note warn" in html and "sdpa-math ran" in html and "text is noise" in html


def test_live_pane_resends_a_bounded_window():
    pane = Pane("A", "t", state="running", chunks=[render.token_span("x", i) for i in range(5000)])
    live = render.pane_html(pane, live=True)
    assert live.count('class="tk ') == render.LIVE_WINDOW_TOKENS
    assert "4,600 earlier tokens not shown" in live


def test_top_decode_kernels_show_their_share_of_the_step():
    gpu = make_record(device_effective="cuda", itl_ms_mean=2.0,
                      decode_top_kernels=[["nvjet_gemv<bf16>", 500.0], ["cudnn_sdpa", 100.0], ["norm", 50.0], ["fourth", 1.0]])
    html = render.metrics_table({"A": gpu, "B": make_record()})
    assert "500 µs (25% of the step) <code>nvjet_gemv&lt;bf16&gt;</code>" in html
    assert "cudnn_sdpa" in html and "fourth" not in html  # three shown
    assert "— (CPU)" in html  # B ran on the CPU: no GPU kernels to list


def _fake_engine(outputs: dict[str, list[int]]):
    """An engine stand-in that streams the given ids as tokens and then a finished record."""
    from playground import engine

    def generate(configs, stop, figure):
        for side, config in configs.items():
            ids = outputs[config.attn]
            for i, token_id in enumerate(ids):
                yield side, engine.Token("repeat", i, token_id, f"w{token_id} ", float(i))
        for side, config in configs.items():
            yield side, engine.Result(make_record(output_ids=outputs[config.attn], attn=config.attn))
    return generate


def test_first_difference_is_marked_in_both_panes_once_both_finished(store):
    import threading

    from playground.config import RunConfig
    from playground.ui.streaming import run_sides

    configs = {"A": RunConfig(prompt="hi", attn="eager"), "B": RunConfig(prompt="hi", attn="sdpa")}
    updates = [{s: p.html() for s, p in panes.items()}
               for panes in run_sides(configs, store, threading.Event(), _fake_engine({"eager": [5, 6, 7, 8],
                                                                                         "sdpa": [5, 6, 9, 9]}))]
    assert not any("tk-diff" in html for update in updates[:-1] for html in update.values())  # not before B ends
    for side, token in (("A", "w7"), ("B", "w9")):
        html = updates[-1][side]
        assert html.count('class="tk-diff"') == 1
        assert f'title="A and B first differ here, at token 2"><span class="tk tk0">{token} </span></mark>' in html


def test_identical_outputs_mark_nothing(store):
    import threading

    from playground.config import RunConfig
    from playground.ui.streaming import run_sides

    configs = {"A": RunConfig(prompt="hi", attn="eager"), "B": RunConfig(prompt="hi", attn="sdpa")}
    panes = list(run_sides(configs, store, threading.Event(), _fake_engine({"eager": [5, 6], "sdpa": [5, 6]})))[-1]
    assert "tk-diff" not in panes["A"].html() + panes["B"].html()


def test_pane_header_names_the_backend():
    from playground.config import RunConfig

    assert render.config_title(RunConfig(prompt="hi", backend="fast")) == "fast · sdpa · dtype auto"
    assert render.config_title(RunConfig(prompt="hi", label="mine")) == "mine"  # the user's label wins
    assert render.config_title(RunConfig(prompt="hi", compile="default")) == "transformers · sdpa · dtype auto · compile default"


def test_speculation_row_shows_the_verify_step_where_the_backend_timed_it():
    spec = dict(spec="draft", spec_effective="draft", target_steps=3, tokens_per_step=1.33, acceptance_rate=0.5,
                draft_share_pct=20.0)
    timed = render.metrics_table({"A": make_record(**spec, verify_step_ms=0.8)})
    untimed = render.metrics_table({"A": make_record(**spec)})
    assert "verify step 0.80 ms" in timed and "verify step" not in untimed


def test_a_compiles_progress_shows_after_the_pass_and_keeps_its_tokens():
    from playground.engine import Phase, Token

    pane = Pane("A", "t")
    pane.phase(Phase("warmup", "first call: compiling", 1, 1))
    assert pane.status == "warm-up 1/1 · first call: compiling · prefill"
    pane.add(Token("warmup 1/1", 0, 7, "x", 120.0))  # the prefill compiled; the decode step compiles next
    pane.phase(Phase("compiling", "first call, 3 s so far"))
    assert pane.status == "warm-up 1/1 · compiling: first call, 3 s so far" and pane.text == "x"
    pane.add(Token("warmup 1/1", 1, 8, "y", 3100.0))
    assert pane.status == "warm-up 1/1 · decode" and pane.text == "xy" and pane.first_ms == 120.0
