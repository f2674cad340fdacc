"""Plotly figures built from run records: timing, per-token latency, memory.

Figures hold plain Python lists (no numpy, which plotly would ship as base64 typed arrays) and
only attributes plotly.js 3 understands, since Gradio draws them with plotly.js 3.3.1.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.record import RunRecord
from playground.ui.render import num

COLORS = ("#4f46e5", "#f97316", "#10b981", "#e11d48", "#0ea5e9", "#a855f7", "#eab308", "#64748b", "#14b8a6",
          "#be185d", "#84cc16", "#7c2d12")
FONT = dict(family="Inter, system-ui, sans-serif", size=13)
LEGEND_ROW_PX = 24


def run_label(rec: RunRecord) -> str:
    return f"#{rec.run_id} {rec.name}" if rec.run_id is not None else rec.name


def _tag(rec: RunRecord, i: int) -> str:
    """The short id a bar or line carries on the chart itself; the legend pairs it with the full label."""
    return f"#{rec.run_id}" if rec.run_id is not None else f"run {i + 1}"


def _names(records: list[RunRecord]) -> list[str]:
    """Legend labels: the run label, plus the model when the runs are not all of one model."""
    several = len({r.model for r in records}) > 1
    return [run_label(r) + (f" · {r.model}" if several else "") for r in records]


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _legend_rows(entries: int, per_row: int) -> int:
    return -(-entries // per_row)


def _layout(fig: go.Figure, title: str, height: int, legend_rows: int = 0) -> go.Figure:
    """Shared look; the legend sits in a bottom margin sized for `legend_rows` rows, under the axis labels."""
    fig.update_layout(
        title=dict(text=title, x=0.01, font=dict(size=15)), template="plotly_white", font=FONT,
        height=height + LEGEND_ROW_PX * legend_rows,
        margin=dict(l=60, r=20, t=80, b=50 + LEGEND_ROW_PX * legend_rows), barmode="overlay", bargap=0.3,
        showlegend=legend_rows > 0,
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0),
    )
    return fig


def _empty(title: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text="Run something, or select runs in History, to fill this chart.", showarrow=False,
                       font=dict(size=14, color="#64748b"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, height=260)


def _bars(fig: go.Figure, records: list[RunRecord], panels: list[tuple[str, str | None, str]],
          legend: bool) -> go.Figure:
    """One bar per run per panel, each at its own run id on the x axis, so ten runs stay readable.

    Each y axis gets 20% headroom so the value labels above the bars never meet the panel title.
    """
    for col, (field, std_field, _) in enumerate(panels, start=1):
        tops = [(getattr(r, field) or 0) + ((getattr(r, std_field) or 0) if std_field else 0) for r in records]
        fig.update_yaxes(range=[0, max(max(tops) * 1.2, 1e-9)], row=1, col=col)
        fig.update_xaxes(type="category", categoryorder="array",
                         categoryarray=[_tag(r, i) for i, r in enumerate(records)], row=1, col=col)
    for i, (rec, name) in enumerate(zip(records, _names(records))):
        for col, (field, std_field, unit) in enumerate(panels, start=1):
            value = getattr(rec, field)
            std = getattr(rec, std_field) if std_field else None
            fig.add_trace(go.Bar(
                x=[_tag(rec, i)], y=[value], name=name, legendgroup=str(i), showlegend=legend and col == 1,
                marker_color=_color(i), error_y=dict(type="data", array=[std or 0.0], visible=bool(std)),
                hovertemplate=f"{name}<br>%{{y:,.4g}} {unit}<extra></extra>",
            ), row=1, col=col)
            # the value sits above the error bar (a bar's own text would sit on it), unit on the axis
            fig.add_trace(go.Scatter(
                x=[_tag(rec, i)], y=[(value or 0) + (std or 0)], mode="text", textposition="top center",
                text=[num(value) if value is not None else "n/a"], textfont=dict(size=11), cliponaxis=False,
                legendgroup=str(i), showlegend=False, hoverinfo="skip",
            ), row=1, col=col)
    return fig


def timing_figure(records: list[RunRecord]) -> go.Figure:
    """TTFT (ms, lower is better) and decode throughput (tok/s, higher is better), mean ± std over repeats."""
    title = "Prefill and decode (mean ± std over repeats)"
    if not records:
        return _empty(title)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("TTFT, prefill (ms) · lower is better",
                                        "Decode (tok/s) · higher is better"))
    _bars(fig, records, [("ttft_ms", "ttft_ms_std", "ms"), ("decode_tok_s", "decode_tok_s_std", "tok/s")],
          legend=True)
    fig.update_yaxes(title_text="ms", row=1, col=1)
    fig.update_yaxes(title_text="tok/s", row=1, col=2)
    return _layout(fig, title, height=380, legend_rows=_legend_rows(len(records), 2))


def latency_figure(records: list[RunRecord]) -> go.Figure:
    """Inter-token latency at each output position of the last repeat: no-cache decoding grows here."""
    title = "Per-token latency by output position (ms)"
    runs = [r for r in records if r.itl_ms]
    if not runs:
        return _empty(title)
    fig = go.Figure()
    for i, (rec, name) in enumerate(zip(records, _names(records))):
        if rec.itl_ms:
            fig.add_trace(go.Scatter(
                x=list(range(1, len(rec.itl_ms) + 1)), y=[float(v) for v in rec.itl_ms], mode="lines",
                name=_tag(rec, i), line=dict(color=_color(i), width=2),
                hovertemplate=f"{name}<br>token %{{x}}: %{{y:.3f}} ms<extra></extra>",
            ))
    fig.update_xaxes(title_text="output token position")
    fig.update_yaxes(title_text="ms per token", rangemode="tozero")
    # lines carry their run ids (full labels on hover and in the timing chart's legend), so the legend stays short
    return _layout(fig, title, height=360, legend_rows=_legend_rows(len(runs), 8))


def memory_figure(records: list[RunRecord]) -> go.Figure:
    """Peak memory and KV cache size (MB) per run; separate panels because their scales differ by orders."""
    title = "Memory (MB)"
    if not records:
        return _empty(title)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("Peak memory", "KV cache after generation"))
    _bars(fig, records, [("peak_mem_mb", None, "MB"), ("kv_cache_mb", None, "MB")], legend=False)
    fig.update_yaxes(title_text="MB", row=1, col=1)
    return _layout(fig, title, height=360)


def _by_setting(records: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """A batch sweep's finished runs, one series per setting apart from the batch size, in batch order."""
    series: dict[str, list[RunRecord]] = {}
    for rec in sorted((r for r in records if r.status == "ok" and r.decode_tok_s), key=lambda r: r.batch_size):
        series.setdefault(rec.setting_name, []).append(rec)
    return series


def batch_throughput_figure(records: list[RunRecord]) -> go.Figure:
    """Every row's decode tok/s against one sequence's inter-token latency, a point per batch size: batching
    buys throughput with each user's latency."""
    title = "Batching: throughput against latency"
    series = _by_setting(records)
    if not series:
        return _empty(title)
    fig = go.Figure()
    for i, (name, runs) in enumerate(series.items()):
        fig.add_trace(go.Scatter(
            x=[r.itl_ms_p50 for r in runs], y=[r.aggregate_decode_tok_s for r in runs], mode="lines+markers+text",
            text=[f"batch {r.batch_size}" for r in runs], textposition="top left", name=name,
            line=dict(color=_color(i), width=2),
            hovertemplate=f"{name}<br>%{{text}}: %{{y:,.0f}} tok/s, %{{x:.2f}} ms per token<extra></extra>",
        ))
    fig.update_xaxes(title_text="inter-token latency p50 (ms), each sequence", rangemode="tozero")
    fig.update_yaxes(title_text="decode tok/s, all sequences", rangemode="tozero")
    return _layout(fig, title, height=400, legend_rows=len(series))


def batch_memory_figure(records: list[RunRecord]) -> go.Figure:
    """Peak memory and KV cache (MB) against batch size: the KV cache grows with every sequence until memory
    runs out; the largest batch predicted to fit is in the hover."""
    title = "Batching: memory against batch size"
    series = _by_setting(records)
    if not series:
        return _empty(title)
    fig = go.Figure()
    for i, (name, runs) in enumerate(series.items()):
        for field, label, dash in (("peak_mem_mb", "peak", "solid"), ("kv_cache_mb", "KV cache", "dot")):
            fig.add_trace(go.Scatter(
                x=[r.batch_size for r in runs], y=[getattr(r, field) for r in runs], mode="lines+markers",
                name=f"{name} · {label}", line=dict(color=_color(i), width=2, dash=dash),
                customdata=[r.max_batch_predicted for r in runs],
                hovertemplate=f"{name}<br>batch %{{x}}: {label} %{{y:,.1f}} MB · predicted to fit: batch "
                              "%{customdata:,}<extra></extra>",
            ))
    sizes = sorted({r.batch_size for runs in series.values() for r in runs})
    fig.update_xaxes(title_text="batch size", type="log", tickvals=sizes, ticktext=[f"{b:,}" for b in sizes])
    fig.update_yaxes(title_text="MB", rangemode="tozero")
    return _layout(fig, title, height=400, legend_rows=2 * len(series))
