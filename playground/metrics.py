"""Turn per-token timestamps into the numbers people quote, with one formula each.

Timestamps are host seconds read after a device synchronize. A pass has a prefill start `t0`,
token times `t[0..n-1]` (t[0] is the first generated token) and an end. Definitions:
  ttft_ms       = (t[0] - t0) * 1e3                 prefill, including the first sampled token
  decode_tok_s  = (n - f) / (t[n-1] - t[0])         decode only: prefill never enters tok/s
  itl_ms[i]     = (t[i] - t[i-1]) * 1e3, i >= 1      inter-token latency, always >= 0
where f is the number of tokens stamped t[0]: 1, except under speculative decoding, where one target
step emits its accepted drafts together (same timestamp) and the prefill step may already emit several.
  prefill_tflop_s = prefill_flops / (ttft_ms / 1e3) / 1e12   useful work per second of prefill
A batch of B rows steps together: the timestamps are row 0's, and each step emits one token per row, so
  aggregate_decode_tok_s = B * decode_tok_s          all sequences; decode_tok_s is per sequence
  padding_pct            = 100 * padded / (B * width)   prompt positions that are left padding
  kv_bytes_per_token_measured = cache bytes / (B * (width + generated - 1))   per position computed; a
                           static cache's allocation beyond that shows as more bytes than the config's formula
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class PassTiming:
    prefill_start: float
    token_times: tuple[float, ...]
    end: float
    call_start: float

    @property
    def tokens(self) -> int:
        return len(self.token_times)

    @property
    def ttft_ms(self) -> float:
        return (self.token_times[0] - self.prefill_start) * 1e3

    @property
    def decode_tok_s(self) -> float | None:
        first = self.token_times[0]
        later = sum(t > first for t in self.token_times)  # tokens of the steps after the first
        span = self.token_times[-1] - first
        return later / span if later and span > 0 else None

    @property
    def itl_ms(self) -> list[float]:
        t = self.token_times
        return [(t[i] - t[i - 1]) * 1e3 for i in range(1, len(t))]

    @property
    def e2e_ms(self) -> float:
        return (self.end - self.call_start) * 1e3


@dataclass(frozen=True)
class StepCounts:
    """One pass of speculative decoding as measured: per target forward pass, the drafts it verified; per
    step the streamer received, the tokens it emitted (accepted drafts plus the target's own token)."""

    drafted: tuple[int, ...]
    emitted: tuple[int, ...]
    draft_s: float  # seconds drafting during decode (the draft model's forward, or the fast backend's lookup)
    draft_calls: int  # draft forward passes (or prompt-lookup searches) during decode
    decode_s: float  # first token to last
    verify_s: float | None = None  # seconds in the target's verify steps, where the backend times them

    @property
    def target_steps(self) -> int:
        return len(self.drafted)

    @property
    def accepted(self) -> int:
        return sum(n - 1 for n in self.emitted)


@dataclass(frozen=True)
class Speculation:
    acceptance_rate: float | None  # accepted drafts / drafted, over all passes
    tokens_per_step: float  # tokens emitted / target steps, over all passes
    draft_share_pct: float | None  # drafting time / decode time, over all passes
    draft_step_ms: float | None  # mean time of one draft forward pass (or lookup search)
    verify_step_ms: float | None  # mean time of one verify step (the target over the drafts), where timed


def speculation(passes: list[StepCounts]) -> Speculation:
    """Totals over passes, so a pass with more steps weighs more, as it does in the time it takes."""
    drafted = sum(sum(p.drafted) for p in passes)
    accepted = sum(p.accepted for p in passes)
    steps = sum(p.target_steps for p in passes)
    decode_s = sum(p.decode_s for p in passes)
    draft_s, calls = sum(p.draft_s for p in passes), sum(p.draft_calls for p in passes)
    verifies = sum(p.target_steps - 1 for p in passes)  # every target step but the prefill
    timed = verifies and all(p.verify_s is not None for p in passes)
    return Speculation(accepted / drafted if drafted else None,
                       sum(sum(p.emitted) for p in passes) / steps,
                       100 * draft_s / decode_s if calls and decode_s > 0 else None,
                       1e3 * draft_s / calls if calls else None,
                       1e3 * sum(p.verify_s for p in passes) / verifies if timed else None)


def aggregate_tok_s(per_sequence_tok_s: float | None, batch_size: int) -> float | None:
    """Tokens per second over every row of the batch: each decode step emits one token per row."""
    return None if per_sequence_tok_s is None else per_sequence_tok_s * batch_size


@dataclass(frozen=True)
class Padding:
    real_tokens: int  # prompt tokens over all rows
    padded_tokens: int  # left-padding positions over all rows
    padding_pct: float  # share of the batch's prompt positions that are padding


def padding(lengths: list[int], width: int) -> Padding:
    """What left-padding rows of `lengths` real tokens to `width` adds: positions prefill computes for nothing."""
    real = sum(lengths)
    total = width * len(lengths)
    return Padding(real, total - real, 100 * (total - real) / total)


def kv_bytes_per_token_measured(cache_bytes: int, batch_size: int, width: int, generated: int) -> float | None:
    """Cache bytes per sequence position whose keys and values were computed: the padded prompt and every
    generated token but the last, which no step fed back."""
    positions = batch_size * (width + generated - 1)
    return cache_bytes / positions if cache_bytes and positions > 0 else None


@dataclass(frozen=True)
class Stats:
    mean: float
    std: float
    p50: float
    p90: float
    p99: float
    n: int


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(values: list[float]) -> Stats | None:
    """Mean, sample standard deviation and percentiles; None for no values."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Stats(statistics.fmean(values), std, percentile(values, 50), percentile(values, 90),
                 percentile(values, 99), len(values))


CONFIDENCE_PCT = 99  # the verdict's interval: the engine looks again after every extra pair, and each look at 95%
# would let noise through about one A/A comparison in ten; 99% keeps it near one in a hundred per look
# Two-sided 99% critical values of Student's t for 1..30 degrees of freedom, then at 40, 60 and 120.
T_CRITICAL = (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977,
              2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763,
              2.756, 2.750)
T_CRITICAL_LARGE = ((40, 2.704), (60, 2.660), (120, 2.617))


def t_critical(dof: float) -> float:
    """Two-sided critical t at CONFIDENCE_PCT, at the tabulated degrees of freedom at or below `dof` (so never too
    small)."""
    if dof < len(T_CRITICAL) + 1:
        return T_CRITICAL[max(int(dof), 1) - 1]
    return min((t for at, t in T_CRITICAL_LARGE if at <= dof), default=T_CRITICAL[-1])


NOISE_FLOOR = 0.05  # no host's verdict calls a difference under 5%: CPU clocks and caches drift that much between
# two identical runs, and a demo must not show noise as a speedup


@dataclass(frozen=True)
class Verdict:
    """B against A on one figure: the ratio (>1: B better), its interval at CONFIDENCE_PCT, the noise floor beside
    it, and the call.

    `call` is better | worse (the ratio clears the noise floor and its whole interval clears half of it), same (the
    whole interval lies within the floor), unsure (neither: more repeats could tell) or unknown (a side has
    fewer than two repeats, so there is no noise estimate)."""

    ratio: float
    low: float
    high: float
    noise: float  # the floor as a fraction: the larger of NOISE_FLOOR and the spread of the pairs' ratios (paired) or
    # of each side's repeats (apart)
    n: int  # pairs when paired, else the smaller side's repeats
    paired: bool
    call: str


def _verdict(log_ratio: float, half_width: float, noise: float, n: int, paired: bool) -> Verdict:
    floor = math.log1p(noise)
    if n < 2:
        call = "unknown"
    elif log_ratio > floor and log_ratio - half_width > floor / 2:  # the whole interval clears half the floor
        call = "better"
    elif log_ratio < -floor and log_ratio + half_width < -floor / 2:
        call = "worse"
    elif -floor < log_ratio - half_width and log_ratio + half_width < floor:
        call = "same"
    else:
        call = "unsure"
    return Verdict(math.exp(log_ratio), math.exp(log_ratio - half_width), math.exp(log_ratio + half_width), noise,
                   n, paired, call)


def paired_verdict(a: list[float], b: list[float], higher_is_better: bool) -> Verdict | None:
    """The verdict from interleaved repeats (A1 B1 B2 A2 ...): pair i's ratio b_i / a_i, so a drift of the host
    that lands on both members of a pair cancels. Student's t over the pairs' log ratios."""
    pairs = [(x, y) for x, y in zip(a, b) if x and y]
    if not pairs:
        return None
    sign = 1.0 if higher_is_better else -1.0
    logs = [sign * math.log(y / x) for x, y in pairs]
    n = len(logs)
    half = t_critical(n - 1) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else math.inf
    noise = max(NOISE_FLOOR, math.expm1(statistics.stdev(logs)) if n > 1 else 0.0)
    return _verdict(statistics.fmean(logs), half, noise, n, paired=True)


def unpaired_verdict(mean_a: float | None, std_a: float, n_a: int, mean_b: float | None, std_b: float, n_b: int,
                     higher_is_better: bool) -> Verdict | None:
    """The verdict from two runs measured apart (each side's mean ± std over its repeats): Welch's t on the log
    ratio (its standard error from the spreads), degrees of freedom rounded down, which errs towards unsure."""
    if not mean_a or not mean_b:
        return None
    sign = 1.0 if higher_is_better else -1.0
    cv_a, cv_b = (std_a or 0.0) / mean_a, (std_b or 0.0) / mean_b
    n = min(n_a, n_b)
    half = math.inf
    if n >= 2:
        var_a, var_b = cv_a * cv_a / n_a, cv_b * cv_b / n_b
        dof = (var_a + var_b) ** 2 / (var_a * var_a / (n_a - 1) + var_b * var_b / (n_b - 1)) if var_a + var_b else 1e9
        half = t_critical(dof) * math.sqrt(var_a + var_b)
    noise = max(NOISE_FLOOR, cv_a, cv_b)
    return _verdict(sign * math.log(mean_b / mean_a), half, noise, n, paired=False)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two id sequences differ (a length difference counts), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def speedup(base: float | None, other: float | None, higher_is_better: bool) -> float | None:
    """How many times better `other` is than `base` (2.0 = twice as good)."""
    if not base or not other:
        return None
    return other / base if higher_is_better else base / other


@dataclass(frozen=True)
class MatmulShape:
    """What a dense decoder multiplies per token: enough to count prefill FLOPs for any prompt length."""

    body_weights: int  # elements of every linear weight run for each prompt token (all but the output head)
    head_weights: int  # elements of the output head, run for the last position only during generation
    layers: int
    heads: int
    head_dim: int
    window: int | None = None  # sliding-window attention in every layer: a query sees at most this many keys


def attended_pairs(prompt_tokens: int, window: int | None) -> int:
    """Query-key pairs a causal (optionally sliding-window) mask keeps for one head."""
    p = prompt_tokens
    if window is None or p <= window:
        return p * (p + 1) // 2
    return window * (window + 1) // 2 + (p - window) * window


def prefill_flops(shape: MatmulShape, prompt_tokens: int, batch: int = 1) -> float:
    """Useful FLOPs of one prefill: 2 per weight per token, plus causal attention, plus the head once.

    Attention counts Q·Kᵀ and P·V over the pairs the mask keeps only (the causal triangle, cut to
    the sliding window if any), as FlashAttention reports it: an eager kernel that also computes
    the masked part does more work than this, so its achieved rate is understated, never flattered.
    """
    linear = 2 * shape.body_weights * prompt_tokens
    attention = 2 * 2 * shape.layers * shape.heads * shape.head_dim * attended_pairs(prompt_tokens, shape.window)
    return batch * (linear + attention + 2 * shape.head_weights)
