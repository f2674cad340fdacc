"""The fast backend's speculative step: the same greedy tokens as its plain decode, the target's distribution
when sampling, and counts that add up."""

from __future__ import annotations

import pytest
import torch

from playground.config import RunConfig
from playground.engine import run
from playground.fast.generate import fast_generate
from playground.fast.speculative import NgramIndex, _accept_greedy, speculative_generate
from playground.loader import ModelCache
from playground.speculative import GROUNDED_PROMPT
from tests.fast.test_fast_generate import Collect
from tests.test_speculative import CHI2_999, SAMPLES, VOCAB, _chi2, _tiny_llama


@pytest.fixture(scope="module")
def pair():
    cache = ModelCache()
    lm, _ = cache.get("stdlib-llama-tiny", "cpu", "fp32", "sdpa")
    cache.attach_draft(lm, "stdlib-llama-draft")
    return lm


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_tokens_equal_plain_fast_decode(pair, k, method):
    ids = pair.tokenizer(GROUNDED_PROMPT, return_tensors="pt")["input_ids"]
    plain = fast_generate(pair.model, input_ids=ids, max_new_tokens=40, eos_token_id=[])
    draft = pair.draft.model if method == "draft" else None
    spec = speculative_generate(pair.model, draft, input_ids=ids, max_new_tokens=40, draft_tokens=k, eos_token_id=[])
    assert spec.sequences.tolist() == plain.sequences.tolist()
    assert sum(spec.accepted) > 0, "no draft was accepted: the comparison would prove nothing"
    assert len(spec.accepted) < 40  # fewer target steps than tokens
    assert all(0 <= n <= d for n, d in zip(spec.accepted, spec.drafted))


def streamed(collect: Collect) -> list[int]:
    """The token ids a streamer was handed after the prompt, round by round, in order."""
    return [token for value in collect.puts[1:] if value != "end" for token in value.reshape(-1).tolist()]


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
def test_eos_and_min_new_tokens_end_the_run_where_plain_decode_does(pair, method):
    ids = pair.tokenizer("def main():\n", return_tensors="pt")["input_ids"]
    eos = pair.tokenizer("\n", add_special_tokens=False)["input_ids"][-1:]  # written often: stands in for EOS
    draft = pair.draft.model if method == "draft" else None
    for min_new in (0, 5):
        plain = fast_generate(pair.model, input_ids=ids, max_new_tokens=30, eos_token_id=eos, min_new_tokens=min_new)
        spec = speculative_generate(pair.model, draft, input_ids=ids, max_new_tokens=30, draft_tokens=4,
                                    eos_token_id=eos, min_new_tokens=min_new, streamer=(collect := Collect()))
        assert spec.sequences.tolist() == plain.sequences.tolist()
        new = spec.sequences[0, ids.shape[1]:].tolist()
        assert len(new) < 30 and new[-1] in eos
        assert streamed(collect) == new  # nothing streamed past the EOS
        assert sum(spec.accepted) + len(spec.accepted) - len(new) <= 4  # no round after the one that made it


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
def test_a_criterion_stops_the_run_after_the_round_that_met_it_and_the_queued_round_is_not_counted(pair, method):
    """The next round is queued before a round's tokens are checked, so the criterion is asked one round late:
    the output must still end with the round that met it, and the dropped round count nowhere."""
    ids = pair.tokenizer(GROUNDED_PROMPT, return_tensors="pt")["input_ids"]
    plain = fast_generate(pair.model, input_ids=ids, max_new_tokens=40, eos_token_id=[])
    ten_new = lambda input_ids, scores: input_ids.shape[1] >= ids.shape[1] + 10  # noqa: E731
    draft = pair.draft.model if method == "draft" else None
    k = 3
    spec = speculative_generate(pair.model, draft, input_ids=ids, max_new_tokens=40, draft_tokens=k, eos_token_id=[],
                                streamer=(collect := Collect()), stopping_criteria=[ten_new])
    new = spec.sequences[0, ids.shape[1]:].tolist()
    assert 10 <= len(new) <= 10 + k and new == plain.sequences[0, ids.shape[1]: ids.shape[1] + len(new)].tolist()
    assert streamed(collect) == new  # after the prompt, every kept token once, none of the dropped round's
    assert sum(spec.accepted) + len(spec.accepted) == len(new)  # each round: its accepted drafts and one token
    rounds = len(spec.accepted) - 1
    full = sum(n == k for n in spec.accepted[1:])  # a fully accepted round costs the draft one more step
    assert spec.draft_calls == (k * rounds + full if method == "draft" else rounds)


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
def test_the_engine_records_what_the_fast_backend_drafted(method):
    base = RunConfig(model="stdlib-llama-tiny", prompt=GROUNDED_PROMPT, new_tokens=30, repeats=1, warmup=0,
                     cache_impl="static", backend="fast", profile_kernels=False)
    plain, spec = run(base), run(base.replace(spec=method, draft_tokens=3))
    assert (plain.status, spec.status) == ("ok", "ok"), spec.reason
    assert spec.output_ids == plain.output_ids and spec.spec_effective == method
    assert 0 < spec.acceptance_rate <= 1 and spec.tokens_per_step > 1 and 0 < spec.draft_share_pct < 100
    # one verify step a round, timed within it: it cannot take longer than a round of decode (the tokens after
    # the first over the rounds after prefill's target step)
    rounds = spec.target_steps - 1
    round_ms = 1e3 * (spec.tokens_generated - 1) / spec.decode_tok_s / rounds
    assert rounds > 0 and 0 < spec.verify_step_ms <= round_ms


def test_greedy_acceptance_stops_at_the_first_disagreement_and_never_counts_a_filler():
    """`verify_greedy` packs the target's k + 1 choices, then the k drafts; a lookup that found m < k fills the rest."""
    assert _accept_greedy(torch.tensor([5, 6, 7, 8, 5, 6, 9]), m=3) == ([5, 6], 7)
    assert _accept_greedy(torch.tensor([5, 6, 7, 8, 5, 6, 7]), m=3) == ([5, 6, 7], 8)
    assert _accept_greedy(torch.tensor([5, 6, 7, 8, 5, 6, 7]), m=1) == ([5], 6)  # the target agrees with fillers too
    assert _accept_greedy(torch.tensor([4, 6, 7, 8, 5, 6, 7]), m=3) == ([], 4)


def test_prompt_lookup_copies_what_followed_the_first_earlier_occurrence_of_the_latest_ngram():
    assert NgramIndex([1, 2, 3, 9, 1, 2]).propose(3) == [3, 9, 1]  # "1 2" seen before: what came after it
    assert NgramIndex([4, 2, 3, 7, 2]).propose(2) == [3, 7]  # no earlier "7 2": the latest token alone
    assert NgramIndex([1, 2, 3, 4]).propose(2) == [] and NgramIndex([5]).propose(2) == []
    index = NgramIndex([1, 2, 3, 1, 2, 8])
    assert index.propose(2) == []
    index.extend([1, 2])
    assert index.propose(4) == [3, 1, 2, 8]  # the first occurrence, not the latest one


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
def test_sampled_tokens_follow_the_target_not_the_proposals(method):
    """The second token is the first one speculation picks: its marginal over the first must be the target's.
    Prompt lookup copies from the prompt and the draft model proposes its own choice: neither may show through."""
    target, draft = _tiny_llama(0), _tiny_llama(1)
    prompt = torch.tensor([[3, 5, 6, 3, 5]])
    with torch.inference_mode():
        first = torch.softmax(target(prompt).logits[0, -1], -1)
        then = [torch.cat([prompt, torch.tensor([[t]])], 1) for t in range(VOCAB)]
        p = sum(first[t] * torch.softmax(target(then[t]).logits[0, -1], -1) for t in range(VOCAB))
        q = sum(first[t] * torch.softmax(draft(then[t]).logits[0, -1], -1) for t in range(VOCAB))
        if method == "prompt_lookup":  # what always accepting the lookup's first proposal would give
            proposed = [NgramIndex(then[t][0].tolist()).propose(1) for t in range(VOCAB)]
            q = sum(first[t] * (torch.nn.functional.one_hot(torch.tensor(proposed[t][0]), VOCAB) if proposed[t]
                                else torch.softmax(target(then[t]).logits[0, -1], -1)) for t in range(VOCAB))
    counts = torch.zeros(VOCAB)
    torch.manual_seed(1234)
    for _ in range(SAMPLES):
        out = speculative_generate(target, draft if method == "draft" else None, input_ids=prompt, max_new_tokens=2,
                                   draft_tokens=2, do_sample=True, temperature=1.0, eos_token_id=[], pad_token_id=0)
        counts[out.sequences[0, prompt.shape[1] + 1]] += 1
    assert _chi2(counts, p) < CHI2_999[VOCAB - 1]
    assert (q - p).abs().sum() > 0.3 and _chi2(counts, q) > 5 * CHI2_999[VOCAB - 1]  # the check could fail
