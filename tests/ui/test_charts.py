"""Charts: plain lists, error bars from repeats, one colour per run across figures, empty states."""

from __future__ import annotations

from playground.ui import charts
from records import make_record


def test_timing_figure_has_both_panels_with_error_bars():
    records = [make_record(1), make_record(2, attn="eager", ttft_ms=30.0, ttft_ms_std=3.0)]
    fig = charts.timing_figure(records)
    ttft = [t for t in fig.data if t.xaxis == "x" and t.type == "bar"]
    decode = [t for t in fig.data if t.xaxis == "x2" and t.type == "bar"]
    assert [list(t.y) for t in ttft] == [[10.0], [30.0]] and [list(t.y) for t in decode] == [[200.0], [200.0]]
    assert list(ttft[1].error_y.array) == [3.0]
    assert ttft[1].name == "#2 transformers · eager · fp32"
    assert ttft[0].marker.color == decode[0].marker.color  # the same run keeps its colour
    assert "bdata" not in fig.to_json()  # plain lists, not numpy typed arrays


def test_latency_figure_plots_positions_and_memory_figure_two_panels():
    fig = charts.latency_figure([make_record(1)])
    assert list(fig.data[0].x) == [1, 2, 3] and list(fig.data[0].y) == [5.0, 6.0, 7.0]
    mem = charts.memory_figure([make_record(1)])
    assert [list(t.y) for t in mem.data if t.type == "bar"] == [[500.0], [0.1]]


def test_empty_figures_explain_themselves():
    for build in (charts.timing_figure, charts.latency_figure, charts.memory_figure):
        fig = build([])
        assert not fig.data and "Run something" in fig.layout.annotations[0].text


def test_ten_runs_carry_their_ids_on_the_axis_and_labels_sit_above_error_bars():
    records = [make_record(i, attn=("eager", "sdpa")[i % 2], ttft_ms=10.0 + i) for i in range(1, 11)]
    fig = charts.timing_figure(records)
    assert list(fig.layout.xaxis.categoryarray) == [f"#{i}" for i in range(1, 11)]
    names = [t.name for t in fig.data if t.type == "bar" and t.showlegend]
    assert len(names) == len(set(names)) == 10  # one legend entry per run, none repeated
    labels = [t for t in fig.data if t.type == "scatter" and t.xaxis == "x"]
    assert [(t.text[0], t.y[0]) for t in labels][:2] == [("11.0", 12.0), ("12.0", 13.0)]  # value + std: above the bar
    latency = charts.latency_figure(records)
    assert [t.name for t in latency.data] == [f"#{i}" for i in range(1, 11)]


def test_batch_figures_draw_a_line_per_setting_with_a_point_per_batch_size():
    records = [make_record(i, batch_size=b, aggregate_decode_tok_s=100.0 * b, itl_ms_p50=5.0 + b,
                           peak_mem_mb=500.0 + b, kv_cache_mb=0.1 * b, max_batch_predicted=900)
               for i, b in enumerate((4, 1, 2), start=1)]
    records.append(make_record(4, status="error", batch_size=8))  # a failed run draws nothing
    throughput = charts.batch_throughput_figure(records)
    assert len(throughput.data) == 1
    assert list(throughput.data[0].x) == [6.0, 7.0, 9.0] and list(throughput.data[0].y) == [100.0, 200.0, 400.0]
    memory = charts.batch_memory_figure(records)
    assert [list(t.y) for t in memory.data] == [[501.0, 502.0, 504.0], [0.1, 0.2, 0.4]]
    assert list(memory.data[0].x) == [1, 2, 4] and list(memory.data[0].customdata) == [900, 900, 900]
    for build in (charts.batch_throughput_figure, charts.batch_memory_figure):
        assert "Run something" in build([]).layout.annotations[0].text
