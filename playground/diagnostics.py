"""What a finished run proves about itself, and how two runs compare: the speed checklist and the A-vs-B
verdicts.

Plain values from records, so the UI (as HTML), the API (as JSON) and the CLI say the same thing about
whether a run was set up to be fast, whether B beat A beyond the noise of the repeats, and whether both
produced the same tokens.
"""

from __future__ import annotations

from typing import Any

from playground.attention import FLASH_FAMILIES, FLASH_REQUESTS
from playground.metrics import first_difference, means_differ, speedup
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


def differs_beyond_noise(a: RunRecord, b: RunRecord, field: str) -> bool | None:
    """Whether B's mean `field` differs from A's beyond the noise of their repeats (Welch's t-test at 95%);
    None when a side ran one repeat or lacks the figure."""
    x, y = getattr(a, field), getattr(b, field)
    if x is None or y is None:
        return None
    return means_differ(x, getattr(a, f"{field}_std", None) or 0.0, a.repeats,
                        y, getattr(b, f"{field}_std", None) or 0.0, b.repeats)


def speedup_of(a: RunRecord, b: RunRecord, headline: str) -> tuple[float | None, bool | None]:
    """B's speedup over A on a headline figure (>1: B faster), and whether it is beyond noise."""
    field, higher_is_better = HEADLINES[headline]
    return speedup(getattr(a, field), getattr(b, field), higher_is_better), differs_beyond_noise(a, b, field)


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
    """The A-vs-B verdict as plain values: identical tokens, then each headline's speedup and noise verdict."""
    verdict = compare_outputs(a, b)
    for headline in HEADLINES:
        verdict[f"{headline}_speedup_b_over_a"], verdict[f"{headline}_beyond_noise"] = speedup_of(a, b, headline)
    return verdict
