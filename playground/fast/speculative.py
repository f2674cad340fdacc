"""Speculative decoding on the fast decoder: k proposed tokens, checked by the target in one pass.

At batch 1 a target step costs about the same for one token as for k + 1 (it reads every weight
once either way), so each accepted draft is a token for the price of proposing it. Proposals come
from a draft model or, with no model at all, from prompt lookup (`NgramIndex`). A round:

1. the proposer drafts d1..dk after the last accepted token: the draft model runs k decode steps
   (`decode_one_token`, compiled together into one replayed graph: a small draft's step is launch-bound,
   so k launches would cost k times what one does); prompt lookup copies the tokens that followed the
   latest n-gram's first earlier occurrence, on the host;
2. the proposals are written after the last token in the target's buffer, and `forward_chunk` runs
   those k + 1 tokens through the target at once, writing their k/v (a lookup that finds fewer
   than k tokens fills the rest, which are never accepted: the chunk keeps one compiled shape);
3. greedy: the longest prefix of drafts equal to the target's own argmax is accepted, and the
   target's token after it is appended, so the output equals non-speculative greedy decoding token
   for token. Sampling: each draft is accepted with probability min(1, p/q) and a rejection is
   resampled from max(0, p - q), which leaves the output distributed as the target's own (a lookup's
   q is all on its token);
4. rollback is a position: the static caches keep their stale entries past the accepted tokens,
   which no later step sees (attention masks by position) and the next round overwrites.

The host reads one small tensor back a round: under greedy decoding the verify graph itself takes the
target's choices (EOS masked as `select_token` does) and returns them with the drafts, so the host compares
k + 1 ints instead of launching the acceptance op by op. A draft model's work stays on the device, while
prompt lookup's proposals are found on the host and copied over, k token ids a round.

The device idles from that read until the next round's first launch, so nothing else happens in between:
the next round is queued first, and the tokens just accepted are streamed and checked against the
stopping criteria while it runs. A stop the criteria ask for therefore ends the run one round later
(that round's work is dropped, as plain decoding drops its one step computed ahead); an EOS needs no
criterion and ends it at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from playground.fast.forward import decode_one_token, forward_chunk, prefill
from playground.fast.fuse import fused_layers
from playground.fast.generate import (FastOutput, _eos_ids, _reset, _stop_requested, compile_step, compiled_steps,
                                      current_kernels)
from playground.fast.state import StaticState, cache_len_for, state_cache


@dataclass
class SpeculativeOutput(FastOutput):
    drafted: list[int] = field(default_factory=list)  # drafts each target step verified (0 for the prefill)
    accepted: list[int] = field(default_factory=list)  # drafts each target step accepted
    draft_s: float = 0.0  # time in the draft's decode steps (prompt lookup: in its searches, on the host)
    draft_calls: int = 0  # the draft's decode steps (prompt lookup: its searches)
    verify_s: float = 0.0  # time in the target's verify steps, one a round


def verify_chunk(model, state: StaticState, n: int) -> torch.Tensor:
    """The target's logits (n, vocab) for the last kept token and the n - 1 drafts after it, EOS masked."""
    return _masked(forward_chunk(model, state, n)[0], state)


def verify_greedy(model, state: StaticState, n: int) -> torch.Tensor:
    """(2n - 1,) int64: the target's n greedy choices, then the n - 1 drafts they are checked against."""
    drafts = state.tokens[0].index_select(0, state.pos + 1 + torch.arange(n - 1, device=state.pos.device))
    return torch.cat([verify_chunk(model, state, n).argmax(dim=-1), drafts])


def _replayed(state: StaticState, compile_mode: str, key: tuple, fn: Callable, *args) -> Callable:
    """`fn(model, state, ..., *args)` compiled once per state under `key` for CUDA-graph replay like the decode
    step; the callable it returns takes the arguments before `args`. The graph's output buffer is reused by its
    next replay, so a caller reads the output before replaying it again."""
    if compile_mode == "off":
        return lambda *head: fn(*head, *args)
    key = (*key, current_kernels())
    if key not in state.compiled:
        step = compile_step(fn, state, compile_mode)

        def replay(*head):
            return step(*head, *args)

        state.compiled[key] = (replay, replay)
    return state.compiled[key][0]


def compiled_verify(state: StaticState, compile_mode: str, n: int, greedy: bool) -> Callable:
    """`verify_greedy` or `verify_chunk` over n tokens, replayed like the decode step: `verify(model, state)`."""
    return _replayed(state, compile_mode, ("verify", compile_mode, n, greedy),
                     verify_greedy if greedy else verify_chunk, n)


def draft_steps(model, state: StaticState, sample: bool, k: int) -> torch.Tensor | None:
    """k decode steps of the draft (`decode_one_token`); when sampling, their logits (k, batch, vocab), which
    acceptance needs (greedy acceptance reads only the drafted tokens, left in `state.tokens`).

    `finished` is cleared first, inside the graph: an EOS drafted in one round would pad the draft's later
    proposals for good, and a separate launch would wait on the host while the device idles."""
    state.finished.zero_()
    logits = [decode_one_token(model, state, sample)[1] for _ in range(k)]
    return torch.stack(logits) if sample else None


def compiled_draft_steps(state: StaticState, compile_mode: str, k: int) -> Callable:
    """`draft_steps` as one graph of k steps, replayed like the decode step: `steps(model, state, sample)`."""
    return _replayed(state, compile_mode, ("draft", compile_mode, k), draft_steps, k)


def _accept_greedy(packed: torch.Tensor, m: int) -> tuple[list[int], int]:
    """(accepted drafts, the target's token after them) from `verify_greedy`'s output, of whose k drafts only
    the first m are proposals.

    One copy to the host: each device-to-host read waits for the GPU, which then idles while the host
    launches the next step, and at batch 1 a round is only a few short steps."""
    values = packed.tolist()
    k = len(values) // 2
    target, drafts = values[: k + 1], values[k + 1:]
    n = 0
    while n < m and drafts[n] == target[n]:
        n += 1
    return drafts[:n], target[n]


def _accept_sampled(drafts: torch.Tensor, draft_probs: torch.Tensor, logits: torch.Tensor,
                    temperature: float) -> tuple[list[int], int]:
    """Rejection sampling (Leviathan et al. 2023): the kept tokens follow the target's distribution exactly."""
    probs = torch.softmax(logits / temperature, dim=-1)  # (k + 1, vocab)
    k = drafts.shape[0]
    p = probs[:k].gather(1, drafts[:, None]).squeeze(1)
    q = draft_probs.gather(1, drafts[:, None]).squeeze(1)
    accept = torch.rand_like(p) * q <= p  # u < p/q without dividing by a zero q
    n = int(accept.int().cumprod(dim=0).sum())
    if n == k:
        return drafts.tolist(), int(torch.multinomial(probs[k], 1))
    residual = (probs[n] - draft_probs[n]).clamp_min(0)
    return drafts[:n].tolist(), int(torch.multinomial(residual / residual.sum(), 1))


def _masked(logits: torch.Tensor, state: StaticState) -> torch.Tensor:
    """EOS masked where the position of the token predicted is within min_new_tokens, as `select_token` does."""
    positions = state.pos + torch.arange(logits.shape[0], device=logits.device)
    return logits.masked_fill(state.eos_mask & (positions < state.eos_until)[:, None], float("-inf"))


class NgramIndex:
    """Prompt lookup's proposals: after the latest n tokens (n from `max_ngram` down to 1), the tokens that
    followed their first earlier occurrence in the prompt and output so far.

    Each n-gram's first position is indexed as tokens arrive, so a lookup costs a few dict reads however
    long the sequence, where a scan would cost the host time a short GPU step does not leave it."""

    def __init__(self, tokens: list[int], max_ngram: int = 2) -> None:
        self.tokens: list[int] = []
        self.first: dict[tuple[int, ...], int] = {}
        self.max_ngram = max_ngram
        self.extend(tokens)

    def extend(self, new: list[int]) -> None:
        for token in new:
            self.tokens.append(token)
            end = len(self.tokens)
            for n in range(1, min(self.max_ngram, end) + 1):
                self.first.setdefault(tuple(self.tokens[end - n:]), end - n)

    def propose(self, k: int) -> list[int]:
        for n in range(min(self.max_ngram, len(self.tokens) - 1), 0, -1):
            start = self.first[tuple(self.tokens[-n:])]
            if start + n < len(self.tokens):  # an earlier occurrence, not the latest n tokens themselves
                return self.tokens[start + n: start + n + k]
        return []


# The round's row for the target's buffer: its last kept token, then k drafts (k + 1,); how many of the drafts are
# proposals; the distributions they were sampled from, or None.
Proposal = tuple[torch.Tensor, int, torch.Tensor | None]


class _DraftModel:
    """Proposals from a draft model decoding in its own static cache, one round behind the target's tokens.
    `steps` runs a round's k draft steps at once; `step` runs the one more a fully accepted round needs."""

    def __init__(self, draft, state: StaticState, step: Callable, steps: Callable) -> None:
        self.draft, self.state, self.step, self.steps = draft, state, step, steps
        self.clock = _SpanClock(state.tokens.device)
        self.calls = 0

    def seconds(self) -> float:
        return self.clock.seconds()

    def start(self, ids: torch.Tensor, first: torch.Tensor, sample: bool) -> None:
        prefill(self.draft, self.state, ids, sample)
        self.state.tokens[:, ids.shape[1]] = first  # the draft continues from the target's token, not its own

    def propose(self, pos: int, k: int, sample: bool, temperature: float) -> Proposal:
        small = self.state
        self.clock.start()
        logits = self.steps(self.draft, small, sample)
        probs = None
        if sample:  # the distributions the draft sampled from: EOS masked as select_token did, step by step
            logits = logits[:, 0]  # (k, vocab)
            before = small.pos - k + torch.arange(k, device=small.pos.device)  # each step's position
            masked = logits.masked_fill(small.eos_mask & (before < small.eos_until)[:, None], float("-inf"))
            probs = torch.softmax(masked / temperature, dim=-1)
        self.clock.stop()
        self.calls += k
        return small.tokens[0, pos: pos + k + 1], k, probs  # read before `advance` writes past pos + n

    def forget_round(self, k: int) -> None:
        """Uncount the latest `propose`: its round was queued but never accepted."""
        self.clock.forget()
        self.calls -= k

    def advance(self, pos: int, n: int, k: int, new: list[int], sample: bool) -> None:
        """Past the n accepted drafts, then the target's token. The draft has cached positions up to
        pos + k - 1; when every draft was accepted it has not seen the last one, so it runs one more step."""
        small = self.state
        if n == k:
            small.pos.fill_(pos + k)
            self.clock.start()
            self.step(self.draft, small, sample)
            self.clock.stop()
            self.calls += 1
        small.pos.fill_(pos + n + 1)
        small.tokens[0, pos + n + 1] = new[-1]


class _PromptLookup:
    """Proposals copied from the sequence itself (`NgramIndex`), on the host: no model. Its time is the host's
    search and the drafts' copy to the device, on the host's clock (the device has nothing to do with it)."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.calls, self.spent, self.last = device, 0, 0.0, 0.0
        self.index: NgramIndex | None = None

    def seconds(self) -> float:
        return self.spent

    def start(self, ids: torch.Tensor, first: torch.Tensor, sample: bool) -> None:
        self.index = NgramIndex(ids[0].tolist() + [int(first[0])])

    def propose(self, pos: int, k: int, sample: bool, temperature: float) -> Proposal:
        began = time.perf_counter()
        found = self.index.propose(k)
        filler = [found[-1] if found else self.index.tokens[-1]] * (k - len(found))
        row = torch.tensor(self.index.tokens[-1:] + found + filler, device=self.device)
        self.last = time.perf_counter() - began
        self.spent += self.last
        self.calls += 1
        return row, len(found), None

    def forget_round(self, k: int) -> None:
        """Uncount the latest `propose`: its round was queued but never accepted."""
        self.spent -= self.last
        self.calls -= 1

    def advance(self, pos: int, n: int, k: int, new: list[int], sample: bool) -> None:
        self.index.extend(new)


def speculative_generate(model, draft, *, input_ids: torch.Tensor, max_new_tokens: int, draft_tokens: int,
                         min_new_tokens: int | None = None, do_sample: bool = False, temperature: float | None = None,
                         streamer=None, stopping_criteria: Sequence[Callable] | None = None,
                         compile_mode: str = "off", eos_token_id: int | list[int] | None = None,
                         pad_token_id: int | None = None) -> SpeculativeOutput:
    """Generate one sequence, `draft_tokens` proposed per target step by the `draft` model, or by prompt
    lookup when `draft` is None.

    `streamer.put` gets the prompt, then each target step's accepted drafts and the target's own
    token together as a (1, m) tensor, as transformers' assisted generation hands them over.
    """
    if input_ids.shape[0] != 1:
        raise ValueError(f"speculative decoding runs one sequence, got a batch of {input_ids.shape[0]}")
    prompt_len, k = input_ids.shape[1], draft_tokens
    eos = _eos_ids(model, eos_token_id)
    pad = pad_token_id if pad_token_id is not None else model.generation_config.pad_token_id
    pad = pad if pad is not None else (eos[0] if eos else 0)
    temp = 1.0 if temperature is None else float(temperature)
    limit = getattr(model.config, "max_position_embeddings", None)
    cache_len = cache_len_for(prompt_len + max_new_tokens + k + 1, limit)
    criteria = list(stopping_criteria or [])
    out = SpeculativeOutput(sequences=input_ids, past_key_values=None, state_reused=False)

    fused_layers(model)
    eos_until = prompt_len + (min_new_tokens or 0) - 1
    with torch.inference_mode():
        target, reused = state_cache(model).get(model, 1, cache_len)
        _reset(target, eos, eos_until, pad, temp)
        proposer = (_PromptLookup(target.tokens.device) if draft is None
                    else _draft_model(draft, cache_len, compile_mode, k, eos, eos_until, pad, temp))
        verify = compiled_verify(target, compile_mode, k + 1, greedy=not do_sample)
        verify_clock = _SpanClock(target.tokens.device)
        if streamer is not None:
            streamer.put(input_ids.cpu())
        ids = input_ids.to(target.tokens.device)
        first, _ = prefill(model, target, ids, do_sample)
        proposer.start(ids, first, do_sample)
        tokens = [int(first[0])]
        pos = prompt_len  # where the last kept token sits: the host's copy of `target.pos`, never read back
        out.drafted.append(0)
        out.accepted.append(0)
        pending: list[int] = []  # the latest round's tokens, streamed while the next round runs
        stopped = _emit(tokens, streamer, criteria, eos, target, prompt_len + 1)
        while not stopped:
            if len(tokens) >= max_new_tokens or _has_eos(pending, eos):  # the last round: nothing to queue behind it
                if pending:  # the criteria read the target's last token, which the next round's row would carry
                    target.tokens[0, prompt_len + len(tokens) - 1] = tokens[-1]
                    _emit(pending, streamer, criteria, eos, target, prompt_len + len(tokens))
                break
            row, m, draft_probs = proposer.propose(pos, k, do_sample, temp)
            target.pos.fill_(pos)
            target.tokens[0, pos: pos + k + 1] = row
            verify_clock.start()
            verified = verify(model, target)
            verify_clock.stop()
            if pending and _emit(pending, streamer, criteria, eos, target, prompt_len + len(tokens)):
                proposer.forget_round(k)
                verify_clock.forget()
                break
            drafts = row[1:]
            if do_sample:
                logits = verified[: m + 1]
                q = draft_probs if draft_probs is not None else _one_hot(drafts[:m], logits.shape[-1])
                kept, token = _accept_sampled(drafts[:m], q, logits, temp)
            else:
                kept, token = _accept_greedy(verified, m)
            n, new = len(kept), kept + [token]
            proposer.advance(pos, n, k, new, do_sample)
            pos += n + 1
            out.drafted.append(m)
            out.accepted.append(n)
            pending = new[: max_new_tokens - len(tokens)]
            tokens += pending
        out.draft_s, out.draft_calls, out.verify_s = proposer.seconds(), proposer.calls, verify_clock.seconds()
        tokens = _until_eos(tokens, eos)
        if streamer is not None:
            streamer.end()
        out.sequences = torch.cat([input_ids.cpu(), torch.tensor([tokens])], dim=1)
        out.past_key_values, out.state_reused = target, reused
    return out


def _draft_model(draft, cache_len: int, compile_mode: str, k: int, eos: list[int], eos_until: int, pad: int,
                 temperature: float) -> _DraftModel:
    fused_layers(draft)
    small, _ = state_cache(draft).get(draft, 1, cache_len)
    _reset(small, eos, eos_until, pad, temperature)
    _, step = compiled_steps(draft, small, compile_mode, compile_prefill=False)
    return _DraftModel(draft, small, step, compiled_draft_steps(small, compile_mode, k))


def _one_hot(drafts: torch.Tensor, vocab: int) -> torch.Tensor:
    """A lookup's proposal distribution: all of its mass on the token it copied."""
    return torch.nn.functional.one_hot(drafts, vocab).float()


def _emit(new: list[int], streamer, criteria: Sequence[Callable], eos: list[int], state: StaticState,
          length: int) -> bool:
    """Stream the round's tokens (up to an EOS) and say whether the run ends here."""
    kept = _until_eos(new, eos)
    if streamer is not None and kept:
        streamer.put(torch.tensor([kept]))
    if _has_eos(kept, eos):
        return True
    return bool(criteria) and bool(_stop_requested(criteria, state.tokens[:, :length], None).all())


def _has_eos(tokens: list[int], eos: list[int]) -> bool:
    return any(token in eos for token in tokens)


def _until_eos(tokens: list[int], eos: list[int]) -> list[int]:
    """`tokens` up to and including the first EOS."""
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[: i + 1]
    return tokens


class _SpanClock:
    """Time in one part of each round (the draft's steps, the target's verify step), summed over rounds: CUDA
    events on a GPU, read once at the end, so that timing adds no wait to the loop it times (a synchronize per
    round would idle the GPU while the host launches the next step); the host's clock on a CPU, where every op
    has finished when it returns."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.cuda = device, device.type == "cuda"
        self.spans: list[tuple] = []
        self._start = None

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))  # where the steps' graphs replay
        return event

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> None:
        self.spans.append((self._start, self._now()))

    def forget(self) -> None:
        """Drop the latest span: a round queued but never accepted."""
        self.spans.pop()

    def seconds(self) -> float:
        if not self.cuda:
            return sum(end - start for start, end in self.spans)
        torch.cuda.synchronize(self.device)
        return sum(start.elapsed_time(end) for start, end in self.spans) / 1e3
