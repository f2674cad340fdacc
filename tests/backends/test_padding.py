"""Left padding with its attention mask must not change what any row generates: each row of an uneven batch
gives the greedy ids of its prompt run alone (the shipped model, whose ids vary; a random one repeats a token)."""

import pytest
import torch

from playground import backends
from playground.backends.request import attention_mask, generate_kwargs, pad_token_id, padded_batch, row_lengths
from playground.config import RunConfig
from playground.engine import MODELS, prompt_ids, run

PROMPT = "Once upon a time, in a data centre far away, a tiny GPU dreamed of"
BASE = dict(model="stdlib-llama-tiny", device="cpu", dtype="fp32", prompt=PROMPT, new_tokens=12, repeats=1,
            warmup=0, profile_kernels=False)


FAST = dict(backend="fast", cache_impl="static")


def greedy_rows(config, lm, input_ids) -> list[list[int]]:
    """Each row's new ids from one call of `config.backend`, which masks the padding."""
    with torch.inference_mode():
        out = backends.get(config.backend).generate(config, lm, input_ids, config.new_tokens, None, [])
    return out.sequences[:, input_ids.shape[1]:].tolist()


@pytest.fixture(scope="module")
def loaded():
    config = RunConfig(**BASE, batch_size=4, length_spread_pct=60)
    lm, _ = MODELS.get(config.model, "cpu", "fp32", config.transformers_attn, False, "none")
    prompt = prompt_ids(config, lm.tokenizer, lm.model.config)
    lengths = row_lengths(prompt.shape[1], config.batch_size, config.length_spread_pct)
    alone = [greedy_rows(config.replace(batch_size=1, length_spread_pct=0), lm, prompt[:, :n])[0] for n in lengths]
    return config, lm, prompt, lengths, alone


def test_row_lengths_run_from_the_whole_prompt_down_to_the_spread():
    assert row_lengths(100, 5, 0) == [100] * 5
    assert row_lengths(100, 5, 60) == [100, 85, 70, 55, 40]
    assert row_lengths(3, 3, 100) == [3, 2, 1]  # never an empty row
    assert row_lengths(10, 1, 90) == [10]


def test_the_mask_hides_exactly_the_left_padding():
    config = RunConfig(prompt="x", batch_size=3, length_spread_pct=50)
    ids = padded_batch(config, torch.arange(1, 5)[None], pad_id=0)
    assert ids.tolist() == [[1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 1, 2]]
    assert attention_mask(config, ids).tolist() == [[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]]


@pytest.mark.parametrize("backend", backends.NAMES)
def test_each_row_of_an_uneven_batch_generates_what_its_prompt_generates_alone(loaded, backend):
    config, lm, prompt, lengths, alone = loaded
    assert len(set(lengths)) == config.batch_size and len({tuple(ids) for ids in alone}) > 1  # the rows differ
    config = config.replace(**FAST) if backend == "fast" else config
    batch = padded_batch(config, prompt, pad_token_id(lm.tokenizer))
    assert greedy_rows(config, lm, batch) == alone


def test_the_comparison_catches_right_padding_without_a_mask(loaded):
    config, lm, prompt, lengths, alone = loaded
    pad = pad_token_id(lm.tokenizer)
    right = torch.stack([torch.cat([prompt[0, :n], torch.full((prompt.shape[1] - n,), pad)]) for n in lengths])
    kwargs = dict(generate_kwargs(config, lm, right, config.new_tokens), attention_mask=torch.ones_like(right))
    with torch.inference_mode():
        rows = lm.model.generate(**kwargs, disable_compile=True)[:, right.shape[1]:].tolist()
    assert rows[0] == alone[0] and rows != alone  # the unpadded row agrees; a padded one is caught


def test_an_uneven_batch_records_its_padding_and_every_row_s_rate():
    record = run(RunConfig(**BASE, batch_size=4, length_spread_pct=60))
    assert record.status == "ok", record.reason
    lengths = row_lengths(record.prompt_tokens, 4, 60)
    assert record.prompt_real_tokens == sum(lengths)
    assert record.prompt_padded_tokens == 4 * record.prompt_tokens - sum(lengths)
    assert record.padding_pct == pytest.approx(100 * record.prompt_padded_tokens / (4 * record.prompt_tokens))
    assert record.aggregate_decode_tok_s == pytest.approx(4 * record.decode_tok_s)
    assert record.kv_bytes_per_token_measured == pytest.approx(record.kv_bytes_per_token)  # dynamic cache, fp32
    assert record.max_batch_predicted >= 4


def test_the_fast_backend_records_an_uneven_batch_from_its_own_cache():
    record = run(RunConfig(**BASE, **FAST, batch_size=3, length_spread_pct=50))
    assert record.status == "ok", record.reason
    lengths = row_lengths(record.prompt_tokens, 3, 50)
    assert record.prompt_padded_tokens == 3 * record.prompt_tokens - sum(lengths) > 0
    assert record.aggregate_decode_tok_s == pytest.approx(3 * record.decode_tok_s)


def test_the_fast_backend_refuses_an_uneven_batch_under_flash_attn(loaded, monkeypatch):
    """flash-attn's decode kernel cannot skip a row's leading columns. A CPU has no flash-attn, so the loaded
    model's config says it was loaded with it."""
    config, lm, *_ = loaded
    fast = backends.get("fast")
    uneven = config.replace(**FAST)
    assert fast.unsupported(uneven, lm, 64) is None
    monkeypatch.setattr(lm.model.config, "_attn_implementation", "flash_attention_2")
    assert "needs attn sdpa" in fast.unsupported(uneven, lm, 64)
    assert fast.unsupported(uneven.replace(length_spread_pct=0), lm, 64) is None


def test_a_padded_row_counts_rope_positions_from_its_first_prompt_column(loaded):
    """RoPE scores depend on relative positions only, so the comparison above cannot see an absolute shift;
    the row still takes the positions it has alone, as transformers gives it, so its rounding is the same."""
    from playground.fast.forward import rope_at
    from playground.fast.state import allocate

    config, lm, *_ = loaded
    state = allocate(lm.model, 2, 8, padded=True)
    state.start.copy_(torch.tensor([0, 3]))
    cos, sin = rope_at(state, torch.arange(3, 6))
    assert torch.equal(cos[0, 0], state.cos[3:6]) and torch.equal(cos[1, 0], state.cos[0:3])
    assert torch.equal(sin[1, 0], state.sin[0:3])
