"""What a finished run proves about itself, and how two runs compare: the speed checklist and the A-vs-B
verdicts.

Plain values from records, so the UI (as HTML), the API (as JSON) and the CLI say the same thing about
whether a run was set up to be fast, whether B beat A beyond the noise of the repeats, and whether both
produced the same tokens.
"""

from __future__ import annotations

from typing import Any

from playground.attention import FLASH_FAMILIES, FLASH_REQUESTS
from playground.metrics import CONFIDENCE_PCT, Verdict, first_difference, paired_verdict, unpaired_verdict
from playground.record import RunRecord

# The headline figures compared between A and B: name -> (record field, whether higher is better).
HEADLINES = {"ttft": ("ttft_ms", False), "decode": ("decode_tok_s", True),  # decode: one sequence's rate
             "throughput": ("aggregate_decode_tok_s", True)}  # every sequence of the batch together


def num(value: float | None, unit: str = "", std: float | None = None) -> str:
    """A number with 3 significant digits or so, an optional ± std, and its unit; '—' when missing."""
    if value is None:
        return "—"

    def short(x: float) -> str:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"

    text = short(value) + (f" ± {short(std)}" if std else "")
    return f"{text} {unit}".strip()


def checklist(rec: RunRecord) -> list[tuple[str, str, str]]:
    """(mark, check, evidence) rows: ✓ holds, ✗ does not, – not applicable or unknown."""
    cache_used = (rec.kv_cache_mb or 0) > 0
    rows = [
        _observed(rec, "model_training", False, "Eval mode", "model.training", "the engine calls model.eval() after "
                  "every load (dropout off)"),
        _observed(rec, "inference_mode", True, "Inference mode", "torch.is_inference_mode_enabled()", "every pass "
                  "runs under torch.inference_mode() (no autograd bookkeeping)"),
        ("✓" if cache_used == rec.use_cache else "✗", "KV cache really used",
         f"use_cache={rec.use_cache}, cache held {num(rec.kv_cache_mb, 'MB')} after generation"),
        _flash_row(rec),
        ("✓" if rec.dtype in ("auto", rec.dtype_effective) else "✗", "dtype consistent",
         f"requested {rec.dtype}, ran {rec.dtype_effective}"),
        ("✓" if rec.warmup >= 1 else "✗", "Warm-up done",
         f"{rec.warmup} warm-up pass(es) before {rec.repeats} measured repeat(s)"
         + ("" if rec.warmup else ": first-call overhead is inside the numbers")),
        ("✓", "Synchronised timing",
         f"device synchronize before every clock read on {rec.device_effective}; prefill and decode timed apart"),
    ]
    if rec.spec != "none" and rec.status == "ok":
        rows.append(_speculation_row(rec))
    if rec.fallback:
        rows.append(("✗", "No fallback", rec.fallback))
    return rows


def _speculation_row(rec: RunRecord) -> tuple[str, str, str]:
    """Whether the target really verified drafts, no more per step than asked (counted on its forward passes)."""
    check = "Speculation really drafted"
    if rec.target_steps is None:
        return "–", check, "unknown: the record has no step counts"
    ran = bool(rec.draft_tokens_max) and rec.draft_tokens_max <= rec.draft_tokens
    return (("✓" if ran else "✗"), check,
            f"{rec.target_steps} target steps verified {rec.drafted_tokens} drafts (at most {rec.draft_tokens_max} "
            f"per step, {rec.draft_tokens} asked) and accepted {rec.accepted_tokens}: {rec.tokens_generated} tokens")


def _observed(rec: RunRecord, field: str, want: bool, check: str, name: str, promise: str) -> tuple[str, str, str]:
    """A row from what the engine observed during the run when the record has it, else from what it promises."""
    seen = getattr(rec, field, None)
    if seen is None:
        return "✓", check, promise
    return ("✓" if seen == want else "✗"), check, f"{name} was {seen} during the run"


def _flash_row(rec: RunRecord) -> tuple[str, str, str]:
    families = sorted({f for fams in rec.attn_families.values() for f in fams})
    if not families:
        return "–", "FlashAttention really active", "unknown: kernels were not profiled"
    ran = f"kernels seen: {', '.join(families)}"
    if rec.attn not in FLASH_REQUESTS:
        return "–", "FlashAttention really active", f"not requested ({rec.attn}); {ran}"
    flash = all(set(f) & FLASH_FAMILIES for f in rec.attn_families.values())
    return ("✓" if flash else "✗"), "FlashAttention really active", ran


def _runs(rec: RunRecord, headline: str) -> list[float]:
    """Each timed repeat's value of a headline figure, in the order the repeats ran."""
    if headline == "ttft":
        return list(rec.ttft_ms_runs)
    return [x * (rec.batch_size if headline == "throughput" else 1) for x in rec.decode_tok_s_runs]


def interleaved(a: RunRecord, b: RunRecord) -> bool:
    """Whether A's and B's repeats were timed in turn, in one run: then they are compared pair by pair."""
    return a.pairing == b.pairing == "interleaved" and bool(a.pair_id) and a.pair_id == b.pair_id


def verdict(a: RunRecord, b: RunRecord, headline: str) -> Verdict | None:
    """B against A on a headline figure: paired where their repeats were interleaved, else from each side's
    mean and spread; None where a side lacks the figure."""
    field, higher_is_better = HEADLINES[headline]
    if interleaved(a, b) and _runs(a, headline) and _runs(b, headline):
        return paired_verdict(_runs(a, headline), _runs(b, headline), higher_is_better)

    def stats(rec: RunRecord) -> tuple:
        return getattr(rec, field), getattr(rec, f"{field}_std", None) or 0.0, rec.repeats_run or rec.repeats

    return unpaired_verdict(*stats(a), *stats(b), higher_is_better)


CALLS = {"better": "faster", "worse": "slower"}


def verdict_words(v: Verdict | None) -> str:
    """'B 4.02× faster', 'B 1.70× slower', or 'no clear difference on this host' when noise could explain it."""
    if v is None:
        return "—"
    if v.call in CALLS:
        times = v.ratio if v.call == "better" else 1 / v.ratio
        return f"B {times:.2f}× {CALLS[v.call]}"
    if v.call == "unknown":
        return f"B/A {v.ratio:.2f}× (1 repeat: noise unknown)"
    return "no clear difference on this host"


def noise_words(v: Verdict, host_other_cpu_pct: float | None) -> str:
    """How the verdict was reached: the pairs or repeats, the measured interval and floor, and the host's load."""
    how = f"{v.n} interleaved pair{'s' * (v.n != 1)}" if v.paired else f"{v.n} repeat{'s' * (v.n != 1)} a side, apart"
    interval = "" if v.call == "unknown" else f", B/A {v.low:.2f}-{v.high:.2f}× at {CONFIDENCE_PCT}%"
    load = "" if host_other_cpu_pct is None else f"; other processes took {host_other_cpu_pct:.0f}% of the host's CPUs"
    return f"{how}{interval}; noise floor ±{100 * v.noise:.0f}%{load}"


def compare_outputs(a: RunRecord, b: RunRecord) -> dict[str, Any]:
    """Whether two runs produced the same ids; only meaningful for the same model, prompt and greedy settings."""
    comparable = (
        a.model == b.model
        and a.config.get("prompt") == b.config.get("prompt")
        and a.config.get("prompt_tokens") == b.config.get("prompt_tokens")
        and a.config.get("seed") == b.config.get("seed")
        and a.config.get("temperature", 0) == 0 == b.config.get("temperature", 0)
    )
    diff = first_difference(a.output_ids, b.output_ids)
    return {"comparable": comparable, "identical": diff is None, "first_difference": diff}


def comparison(a: RunRecord, b: RunRecord) -> dict[str, Any]:
    """The A-vs-B verdict as plain values: identical tokens, how the repeats were timed, then each headline's
    ratio (B over A, >1: B better), its interval at CONFIDENCE_PCT, the noise floor and the call."""
    result = compare_outputs(a, b)
    result["interleaved"] = interleaved(a, b)
    result["host_other_cpu_pct"] = host_load(a, b)
    for headline in HEADLINES:
        v = verdict(a, b, headline)
        result[f"{headline}_speedup_b_over_a"] = v.ratio if v else None
        result[f"{headline}_interval"] = [v.low, v.high] if v and v.call != "unknown" else None
        result[f"{headline}_noise_pct"] = 100 * v.noise if v else None
        result[f"{headline}_call"] = v.call if v else None
        result[f"{headline}_beyond_noise"] = None if not v or v.call == "unknown" else v.call in CALLS
    return result


def host_load(a: RunRecord, b: RunRecord) -> float | None:
    """The larger share of the host's CPUs other processes took while either side was timed."""
    loads = [r.host_other_cpu_pct for r in (a, b) if r.host_other_cpu_pct is not None]
    return max(loads) if loads else None
