"""Speculative decoding: exact under greedy decoding, measured honestly, the target's distribution under
sampling, and refused where it cannot run."""

import itertools
from types import SimpleNamespace

import pytest
import torch

from playground import speculative
from playground.backends import transformers as transformers_backend
from playground.config import ConfigError, RunConfig
from playground.engine import Result, Token, generate, run
from playground.loader import LoadedModel

# An input-grounded prompt: the shipped model copies from it, so prompt lookup gets drafts accepted.
CODE = "def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return a + b\n\n\ndef add(a,"
SHIPPED = dict(prompt=CODE, new_tokens=24, repeats=2, warmup=0, profile_kernels=False)


@pytest.fixture(scope="module")
def plain():
    record = run(RunConfig(**dict(SHIPPED, repeats=1)))
    assert record.status == "ok", record.reason
    return record


@pytest.mark.parametrize("spec, cache_impl", [("prompt_lookup", "dynamic"), ("draft", "dynamic"),
                                              ("draft", "static")])
def test_greedy_output_is_the_plain_output_token_for_token(plain, spec, cache_impl):
    record = run(RunConfig(spec=spec, cache_impl=cache_impl, **dict(SHIPPED, repeats=1)))
    assert record.status == "ok", record.reason
    assert record.output_ids == plain.output_ids
    assert record.accepted_tokens > 0  # drafts were taken, so the equality says something


@pytest.mark.parametrize("spec", ["prompt_lookup", "draft"])
def test_counts_add_up_and_tokens_say_which_were_drafts(spec):
    events = list(generate(RunConfig(spec=spec, draft_tokens=3, **SHIPPED)))
    record = events[-1].record
    assert isinstance(events[-1], Result) and record.status == "ok", record.reason
    last = [e for e in events if isinstance(e, Token) and e.pass_name == "repeat 2/2"]
    assert record.tokens_generated == len(last) == record.target_steps + record.accepted_tokens
    assert sum(t.draft for t in last) == record.accepted_tokens
    steps = itertools.groupby(last, key=lambda t: t.t_ms)  # a step's tokens share its timestamp
    assert all(not group[-1].draft and all(t.draft for t in group[:-1])  # drafts first, then the target's own
               for group in (list(g) for _, g in steps))
    assert 0 < record.accepted_tokens <= record.drafted_tokens
    assert 0 < record.acceptance_rate <= 1
    assert record.tokens_per_step == pytest.approx(record.tokens_generated / record.target_steps)
    assert record.draft_tokens_max == 3 and record.spec_effective == spec  # the setting is what ran
    # tokens of one step share its timestamp, so decode counts only the tokens after the first step
    assert record.decode_tok_s is not None
    if spec == "draft":
        assert 0 < record.draft_share_pct < 100 and record.draft_step_ms > 0
    else:
        assert record.draft_share_pct is None  # no draft model ran
    assert record.verify_step_ms is None  # transformers' assisted generation: its target steps are not timed


def test_without_speculation_no_step_figures(plain):
    assert plain.target_steps is None and plain.acceptance_rate is None and plain.spec_effective == "none"


def test_prompt_lookup_that_finds_nothing_is_flagged():
    record = run(RunConfig(prompt="One two", spec="prompt_lookup", new_tokens=2, repeats=1, warmup=0,
                           profile_kernels=False, model="tiny-random-llama"))
    assert record.status == "ok", record.reason
    assert record.spec_effective == "none" and "drafted no token" in record.fallback


@pytest.mark.parametrize("changes, field", [
    (dict(use_cache=False), "use_cache"),
    (dict(cache_impl="static", compile="default"), "compile"),
    (dict(batch_size=2), "batch_size"),
    (dict(backend="fast", cache_impl="static"), "backend"),
    (dict(draft_model="  "), "draft_model"),
    (dict(draft_tokens=speculative.MAX_DRAFT_TOKENS + 1), "draft_tokens"),
])
@pytest.mark.parametrize("spec", ["draft", "prompt_lookup"])
def test_refusals_name_the_field(spec, changes, field):
    if field == "backend" or (field, spec) == ("draft_model", "prompt_lookup"):
        RunConfig(prompt="x", spec=spec, **changes)  # only the draft method reads it; the fast backend takes both
        return
    with pytest.raises(ConfigError, match=field):
        RunConfig(prompt="x", spec=spec, **changes)


def test_a_draft_with_another_vocabulary_is_refused():
    record = run(RunConfig(prompt="x", spec="draft", draft_model="tiny-random-llama", repeats=1, warmup=0,
                           profile_kernels=False))
    assert record.status == "invalid"
    assert "draft_model=tiny-random-llama" in record.reason and "other ids" in record.reason


def test_every_method_names_backends_that_exist():
    from playground import backends

    for method in speculative.REGISTRY.values():
        assert set(method.backends) <= set(backends.NAMES)
    assert speculative.REGISTRY["none"].backends == backends.NAMES


# ---- sampling: the first token follows the target's distribution, not the draft's ---------------------------

VOCAB, SAMPLES = 8, 1000
CHI2_999 = {7: 24.32}  # chi-square critical value at p = 0.001 for VOCAB - 1 degrees of freedom


def _tiny_llama(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, initializer_range=0.15,
                         bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.update(bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return model


def _loaded(model, draft=None) -> LoadedModel:
    tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=None)
    return LoadedModel(key=(), model=model, tokenizer=tokenizer, source="test", random_weights=True, load_s=0.0,
                       device="cpu", dtype="fp32", attn_effective="sdpa", draft=draft)


def _chi2(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("spec", ["draft", "prompt_lookup"])
def test_sampled_first_token_follows_the_target(spec):
    target, draft = _tiny_llama(0), _tiny_llama(1)
    prompt = torch.tensor([[3, 5, 6, 3, 5]])  # "3 5" recurs: prompt lookup drafts 6
    with torch.inference_mode():
        p = torch.softmax(target(prompt).logits[0, -1], -1)
        q = torch.softmax(draft(prompt).logits[0, -1], -1)
    proposal = q if spec == "draft" else torch.nn.functional.one_hot(torch.tensor(6), VOCAB).float()
    lm = _loaded(target, _loaded(draft) if spec == "draft" else None)
    config = RunConfig(prompt="x", spec=spec, draft_tokens=2, temperature=1.0, new_tokens=2)
    counts = torch.zeros(VOCAB)
    torch.manual_seed(1234)
    with torch.inference_mode():
        for _ in range(SAMPLES):
            out = transformers_backend.generate(config, lm, prompt, 2, None, [])
            counts[out.sequences[0, prompt.shape[1]]] += 1
    assert _chi2(counts, p) < CHI2_999[VOCAB - 1]
    # the same samples tell the proposal apart from the target, so the check above could fail
    assert (proposal - p).abs().sum() > 0.3
    assert _chi2(counts, proposal.clamp_min(1e-3)) > 10 * CHI2_999[VOCAB - 1]
