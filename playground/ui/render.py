"""HTML for the panes, the metrics table, the A-vs-B summary and the diagnostics checklist; the verdicts
themselves come from `playground.diagnostics`.

Model output and every other string that did not come from this module go through `escape`, so
text a model writes is shown as text and never runs as HTML, Markdown or a template.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from playground.diagnostics import (checklist, compare_outputs, host_load, noise_words, num, verdict,
                                    verdict_words)
from playground.record import BUSY_HOST_PCT, RunRecord, config_name

if TYPE_CHECKING:
    from playground.config import RunConfig
    from playground.ui.streaming import Pane

LIVE_WINDOW_TOKENS = 400  # a streaming pane re-sends only its tail, so an update costs the same at any length
FINAL_MAX_TOKENS = 8000  # a finished pane shows at most this many tokens; the full text is in the record
# `$`, backticks and braces are escaped too: gr.HTML fills a JS/Handlebars template with its value.
_EXTRA = str.maketrans({"$": "&#36;", "`": "&#96;", "{": "&#123;", "}": "&#125;"})


def escape(text: object) -> str:
    return html.escape(str(text), quote=True).translate(_EXTRA)


def config_title(config: RunConfig | Exception) -> str:
    """A pane's title before its run: the run's name (`playground.record.run_name`)."""
    return "cannot run" if isinstance(config, Exception) else config_name(config)


def token_span(text: str, index: int, draft: bool = False) -> str:
    """One token, shaded by parity so token boundaries show; an empty token (partial character) stays invisible.
    An accepted draft (speculative decoding) is underlined: it cost no target step of its own."""
    if draft:
        return f'<span class="tk tk{index % 2} tk-draft" title="accepted draft">{escape(text)}</span>'
    return f'<span class="tk tk{index % 2}">{escape(text)}</span>'


# ---- panes -------------------------------------------------------------------------------------

def _pane_stats(pane: Pane) -> str:
    rec = pane.record
    if rec is not None and rec.status == "ok":
        return (f"<b>{rec.tokens_generated}</b> tokens · TTFT <b>{num(rec.ttft_ms, 'ms', rec.ttft_ms_std)}</b> · "
                f"decode <b>{num(rec.decode_tok_s, 'tok/s', rec.decode_tok_s_std)}</b> "
                f"<span class='dim'>(mean ± std of {rec.repeats} repeat{'s' * (rec.repeats != 1)})</span>")
    ttft = f" · TTFT <b>{num(pane.first_ms, 'ms')}</b>" if pane.first_ms is not None else ""
    rate = num(pane.live_tok_s, "tok/s") if pane.live_tok_s else "—"
    return f"<b>{pane.tokens}</b> tokens · live <b>{rate}</b>{ttft}"


def _pane_tokens(pane: Pane, live: bool) -> str:
    limit = LIVE_WINDOW_TOKENS if live else FINAL_MAX_TOKENS
    shown = pane.chunks[-limit:] if pane.tokens > limit else list(pane.chunks)
    hidden = pane.tokens - len(shown)
    note = f'<span class="dim">… {hidden:,} earlier tokens not shown{" while streaming" if live else ""}</span>' if hidden else ""
    at = None if pane.first_difference is None else pane.first_difference - hidden
    if at is not None and 0 <= at < len(shown):
        tip = f"A and B first differ here, at token {pane.first_difference}"
        shown[at] = f'<mark class="tk-diff" title="{tip}">{shown[at]}</mark>'
    return note + "".join(shown)


def _pane_notes(pane: Pane) -> str:
    notes = []
    if pane.message:
        notes.append(f'<div class="note bad">{escape(pane.message)}</div>')
    rec = pane.record
    if rec is not None and rec.fallback:
        notes.append(f'<div class="note warn">⚠ Fallback: {escape(rec.fallback)}</div>')
    if rec is not None and rec.random_weights:
        notes.append('<div class="note dim">Random weights: the timings are real, the text is noise.</div>')
    return "".join(notes)


def pane_html(pane: Pane, live: bool) -> str:
    return (
        f'<div class="pane state-{pane.state}" data-side="{pane.side}" data-tokens="{pane.tokens}">'
        f'<div class="pane-head"><span class="side side-{pane.side}">{pane.side}</span>'
        f'<span class="cfg" title="{escape(pane.title)}">{escape(pane.title)}</span>'
        f'<span class="badge" title="{escape(pane.status)}">{escape(pane.status)}</span></div>'
        f'<div class="pane-stats">{_pane_stats(pane)}</div>'
        f'<div class="tokens"><div>{_pane_tokens(pane, live)}</div></div>{_pane_notes(pane)}</div>'
    )


def empty_pane(side: str) -> str:
    return (f'<div class="pane state-waiting" data-side="{side}" data-tokens="0"><div class="pane-head">'
            f'<span class="side side-{side}">{side}</span><span class="cfg">configuration {side}</span>'
            '<span class="badge">idle</span></div><div class="pane-stats dim">Press Run to stream tokens here.</div>'
            '<div class="tokens"><div></div></div></div>')


# ---- results -----------------------------------------------------------------------------------

MEMORY_KINDS = {"cuda_max_allocated": "CUDA max allocated", "weights_plus_rss_growth": "weights + RSS growth",
                "process_rss": "process RSS"}


def _memory(rec: RunRecord) -> str:
    kind = getattr(rec, "peak_mem_kind", None)  # recorded by newer engines; older records imply it from the device
    kind = MEMORY_KINDS.get(kind) or ("CUDA max allocated" if rec.device_effective == "cuda" else "process RSS")
    return f"{num(rec.peak_mem_mb, 'MB')} <span class='dim'>({kind})</span>"


def _batch(rec: RunRecord) -> str:
    """How many sequences ran together, and how much of their prompts was left padding."""
    if rec.prompt_padded_tokens is None:  # records of older engines
        return str(rec.batch_size)
    positions = rec.prompt_real_tokens + rec.prompt_padded_tokens
    padding = (f"{rec.prompt_padded_tokens:,} of {positions:,} prompt positions are left padding "
               f"({num(rec.padding_pct, '%')})" if rec.prompt_padded_tokens else "no padding")
    return f"{rec.batch_size} sequence{'s' if rec.batch_size > 1 else ''} · {padding}"


def _kv_per_token(rec: RunRecord) -> str:
    """KV bytes one position costs by the model config, against what the cache held per position computed."""
    if rec.kv_bytes_per_token is None:
        return "—"
    return (f"{rec.kv_bytes_per_token:,} B by the config / {num(rec.kv_bytes_per_token_measured, 'B')} held"
            + (f" <span class='dim'>· about {rec.max_batch_predicted:,} sequences of this length fit</span>"
               if rec.max_batch_predicted else ""))


METRIC_ROWS = (
    ("TTFT (prefill)", lambda r: num(r.ttft_ms, "ms", r.ttft_ms_std)),
    ("Prefill compute", lambda r: num(r.prefill_tflop_s, "TFLOP/s") + (
        " <span class='dim'>useful FLOPs ÷ TTFT</span>" if r.prefill_tflop_s else "")),
    ("Decode throughput", lambda r: num(r.decode_tok_s, "tok/s", r.decode_tok_s_std)
     + (" <span class='dim'>per sequence</span>" if r.batch_size > 1 else "")),
    ("Decode, all sequences", lambda r: num(r.aggregate_decode_tok_s, "tok/s", r.aggregate_decode_tok_s_std)),
    ("Batch", _batch),
    ("KV bytes per token", _kv_per_token),
    ("ITL p50 / p90 / p99", lambda r: " / ".join(num(x) for x in (r.itl_ms_p50, r.itl_ms_p90, r.itl_ms_p99)) + " ms"),
    ("End-to-end", lambda r: num(r.e2e_ms, "ms", r.e2e_ms_std)),
    ("Tokens: prompt → generated", lambda r: f"{r.prompt_tokens} → {r.tokens_generated}"),
    ("Peak memory", _memory),
    ("KV cache", lambda r: num(r.kv_cache_mb, "MB")),
    ("Cold first call: TTFT / e2e", lambda r: f"{num(r.cold_ttft_ms)} / {num(r.cold_e2e_ms)} ms"),
    ("Compile time", lambda r: (num(r.compile_s, "s") + (f" (compile cache: {r.compile_cache})" if r.compile_cache else "")
                                if r.compile != "off" else "off")),
    ("Model load", lambda r: "reused (already loaded)" if r.model_reused else num(r.load_s, "s")),
    ("GPU busy (decode)", lambda r: num(r.gpu_busy_pct, "%") if r.device_effective == "cuda" else "— (CPU)"),
    ("Other load on the host", lambda r: _other_load(r)),
    ("Bandwidth roofline", lambda r: num(r.bandwidth_roofline_pct, "%") + (
        f" <span class='dim'>of {num(r.roofline_tok_s, 'tok/s')}</span>" if r.roofline_tok_s else "")),
    ("Decode step: top GPU kernels", lambda r: _top_kernels(r)),
    ("Attention kernels: prefill", lambda r: _kernels(r, "prefill")),
    ("Attention kernels: decode", lambda r: _kernels(r, "decode")),
    ("Speculative decoding", lambda r: _speculation(r)),
    ("Ran as", lambda r: escape(f"{r.attn_effective} · {r.dtype_effective} · {r.device_effective}")),
)
SPEEDUP_ROWS = {"TTFT (prefill)": "ttft", "Decode throughput": "decode",  # metric row -> diagnostics headline
                "Decode, all sequences": "throughput"}


def _other_load(rec: RunRecord) -> str:
    """Other processes' share of the host's CPUs while the repeats were timed, flagged where it slows the run."""
    pct = rec.host_other_cpu_pct
    if pct is None:  # records of older engines
        return "—"
    if pct <= BUSY_HOST_PCT:
        return num(pct, "% of its CPUs")
    return (f"⚠ {num(pct, '% of its CPUs')} <span class='dim'>other processes took cores while this run was timed: "
            f"its figures can be far slower than on a quiet host</span>")


def _speculation(rec: RunRecord) -> str:
    """Acceptance and tokens per target step; the speedup is the decode row's B vs A against plain decoding."""
    if rec.tokens_per_step is None:
        return "off"
    drafted = (f"{num(100 * rec.acceptance_rate, '%')} of drafts accepted · " if rec.acceptance_rate is not None
               else "nothing drafted · ")
    draft = f" · draft {num(rec.draft_share_pct, '%')} of decode time" if rec.draft_share_pct is not None else ""
    if rec.verify_step_ms is not None:
        draft += f" · verify step {num(rec.verify_step_ms)} ms"
    return (f"{escape(rec.spec_effective)}: {drafted}{num(rec.tokens_per_step)} tokens per target step "
            f"<span class='dim'>({rec.target_steps} steps for {rec.tokens_generated} tokens)</span>{draft}")


def _kernels(rec: RunRecord, phase: str) -> str:
    names = rec.attn_kernels.get(phase)
    if not names:
        return "<span class='dim'>not profiled</span>"
    return "<br>".join(f"<code>{escape(n)}</code>" for n in names)


def _top_kernels(rec: RunRecord, shown: int = 3) -> str:
    """The kernels a decode step spends most GPU time in, with their share of the step's wall time."""
    if not rec.decode_top_kernels:
        return "— (CPU)" if rec.device_effective == "cpu" else "<span class='dim'>not profiled</span>"
    step_us = (rec.itl_ms_mean or 0) * 1e3
    lines = []
    for name, us in rec.decode_top_kernels[:shown]:
        share = f" ({100 * us / step_us:.0f}% of the step)" if step_us else ""
        lines.append(f"{num(us, 'µs')}{share} <code>{escape(name[:80])}</code>")
    return "<br>".join(lines)


def speedup_text(a: RunRecord, b: RunRecord, headline: str) -> str:
    """'B 1.52× faster', 'B 1.90× slower' or 'no clear difference on this host'; coloured only when the verdict
    clears the noise (diagnostics.verdict), with how it was reached on hover."""
    v = verdict(a, b, headline)
    if v is None:
        return "—"
    text, how = verdict_words(v), escape(noise_words(v, host_load(a, b)))
    if v.call in ("better", "worse"):
        return f'<span class="{"good" if v.call == "better" else "bad"}" title="{how}">{text}</span>'
    return f'<span class="dim" title="{how}">{text}</span>'


def metrics_table(records: dict[str, RunRecord]) -> str:
    """Metrics of the finished ok runs side by side, with B-over-A speedups when both ran."""
    if not records:
        return '<div class="dim">No finished run yet.</div>'
    sides = list(records)
    both = "A" in records and "B" in records
    head = "".join(f'<th><span class="side side-{s}">{s}</span> {escape(records[s].name)}</th>' for s in sides)
    rows = []
    for label, cell in METRIC_ROWS:
        cells = "".join(f"<td>{cell(records[s])}</td>" for s in sides)
        extra = ""
        if both:
            headline = SPEEDUP_ROWS.get(label)
            extra = f"<td>{speedup_text(records['A'], records['B'], headline) if headline else ''}</td>"
        rows.append(f"<tr><th>{label}</th>{cells}{extra}</tr>")
    vs = "<th>B vs A</th>" if both else ""
    return f'<table class="metrics"><thead><tr><th>Metric</th>{head}{vs}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


HEADLINE_LABELS = {"ttft": "Prefill (TTFT)", "decode": "Decode (tok/s)", "throughput": "Decode, all sequences"}


def summary_html(panes: dict[str, Pane], figure: str = "decode") -> str:
    """The headline: the verdict on the figure the comparison is about first, how it was measured (interleaved
    pairs, noise floor, the host's other load), then the other figures, whether the tokens match, and warnings."""
    done = {s: p.record for s, p in panes.items() if p.record is not None and p.record.status == "ok"}
    items = []
    if "A" in done and "B" in done:
        a, b = done["A"], done["B"]
        order = [figure, *(h for h in ("ttft", "decode") if h != figure)]
        cells = "".join(f"<div class='{'lead' if h == figure else 'aside'}'><span class='label'>{HEADLINE_LABELS[h]}"
                        f"</span><br>{speedup_text(a, b, h)}</div>" for h in order) + _first_call_cell(a, b)
        items.append(f"<div class='headline'>{cells}</div>")
        lead = verdict(a, b, figure)
        if lead is not None:
            how = a.pairing if a.pairing.startswith("blocks") else ""
            items.append(f"<div class='note dim measured'>{escape(noise_words(lead, host_load(a, b)))}"
                         f"{escape('; timed in ' + how) if how else ''}.</div>")
        items.append(_identical_text(a, b))
    for side, rec in done.items():
        items.append(_checklist_line(side, rec))
    for side, pane in panes.items():
        if pane.state not in ("ok", "waiting"):
            items.append(f"<div class='note bad'><b>{side}</b> {escape(pane.state)}: {escape(pane.message)}</div>")
        if side in done and done[side].fallback:
            items.append(f"<div class='note warn'>⚠ <b>{side}</b> fallback: {escape(done[side].fallback)}</div>")
    return f"<div class='summary'>{''.join(items)}</div>"


def _first_call_cell(a: RunRecord, b: RunRecord) -> str:
    """Beside a compiled side's steady state, what its first call cost: the compile a user pays once a process."""
    if a.compile == "off" and b.compile == "off":
        return ""
    calls = " · ".join(f"{side} {num(rec.cold_e2e_ms / 1000 if rec.cold_e2e_ms is not None else None, 's')}"
                       + (" (compiles)" if rec.compile != "off" else "") for side, rec in (("A", a), ("B", b)))
    return f"<div class='aside'><span class='label'>First call</span><br><span class='dim'>{calls}</span></div>"


def _checklist_line(side: str, rec: RunRecord) -> str:
    rows = checklist(rec)
    failed = [check for mark, check, _ in rows if mark == "✗"]
    if not failed:
        return f"<div class='note good'>✓ <b>{side}</b> passes the speed checklist (see Diagnostics).</div>"
    return (f"<div class='note warn'>✗ <b>{side}</b> fails {len(failed)} of {len(rows)} checks: "
            f"{escape(', '.join(failed))} (see Diagnostics).</div>")


def _identical_text(a: RunRecord, b: RunRecord) -> str:
    same = compare_outputs(a, b)
    n = len(a.output_ids)
    if not same["comparable"]:
        return "<div class='note dim'>Tokens not compared: the prompt, seed or sampling differ.</div>"
    if same["identical"]:
        return f"<div class='note good'>✓ A and B produced identical tokens ({n} of {n}).</div>"
    return (f"<div class='note warn'>≠ A and B first differ at token {same['first_difference']} "
            f"(of {max(n, len(b.output_ids))}): different kernels or dtypes round differently.</div>")


# ---- diagnostics -------------------------------------------------------------------------------

def diagnostics_html(records: dict[str, RunRecord]) -> str:
    if not records:
        return '<div class="dim">Diagnostics appear after a run finishes.</div>'
    blocks = []
    for side, rec in records.items():
        rows = "".join(f"<tr class='mark-{'ok' if m == '✓' else 'bad' if m == '✗' else 'na'}'><td>{m}</td><th>{c}</th>"
                       f"<td>{escape(e)}</td></tr>" for m, c, e in checklist(rec))
        blocks.append(f"<div class='diag'><h4><span class='side side-{side}'>{side}</span> {escape(rec.name)}</h4>"
                      f"<table class='checks'>{rows}</table></div>")
    env = next(iter(records.values())).env
    return f"<div class='diags'>{''.join(blocks)}</div>{environment_html(env)}"


ENV_FIELDS = (("device_name", "Device"), ("driver", "NVIDIA driver"), ("cuda", "CUDA"), ("torch", "torch"),
              ("transformers", "transformers"), ("flash_attn", "flash-attn"), ("python", "Python"),
              ("project_commit", "Playground commit"))


def environment_html(env: dict) -> str:
    cells = "".join(f"<div><span class='dim'>{label}</span><br><b>{escape(env.get(key) or '—')}</b></div>"
                    for key, label in ENV_FIELDS)
    return f"<div class='env'>{cells}</div>"
