"""The fast backend on CPU in fp32: same greedy ids as transformers, and the generate contract the engine needs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
import torch._dynamo.testing
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from playground.fast import fast_generate, precompile, unsupported_reason
from playground.fast.forward import decode_one_token, prefill
from playground.config import KERNELS
from playground.fast.generate import (CapturedStep, Listener, compile_step, compiled_steps, decode_compile_options,
                                      decode_n_tokens, kernel_choice)
from playground.fast.state import StateCache, state_cache
from playground.loader import MODELS

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "models" / "stdlib-llama-tiny"
SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


def tiny(model_type: str, attn: str = "sdpa", **overrides):
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **{**SMALL, **overrides})
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn).eval()


@pytest.fixture(scope="module")
def llama():
    return MODELS.get("tiny-random-llama", "cpu", "fp32", "sdpa")[0].model


@pytest.fixture(scope="module")
def small_models():
    return {
        "qwen2 (qkv bias, gqa)": tiny("qwen2"),
        "mistral (gqa)": tiny("mistral"),
        "llama (llama3 rope)": tiny("llama", rope_parameters=LLAMA3_ROPE),
    }


def prompt(batch: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, length), generator=g)  # ids 0-2 are pad, bos, eos


def reference(model, ids, new_tokens, **kwargs):
    with torch.inference_mode():
        return model.generate(**{"input_ids": ids, "attention_mask": torch.ones_like(ids), "do_sample": False,
                                 "max_new_tokens": new_tokens, "pad_token_id": 0, **kwargs})


class Collect(BaseStreamer):
    def __init__(self):
        self.puts = []

    def put(self, value):
        self.puts.append(value.clone())

    def end(self):
        self.puts.append("end")


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("length", [1, 7, 40])
def test_greedy_ids_match_transformers_on_the_tiny_preset(llama, batch, length):
    ids = prompt(batch, length, llama.config.vocab_size, seed=length)
    expected = reference(llama, ids, 24, min_new_tokens=24)
    got = fast_generate(llama, input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, min_new_tokens=24)
    assert torch.equal(got.sequences, expected)


@pytest.mark.parametrize("name", ["qwen2 (qkv bias, gqa)", "mistral (gqa)", "llama (llama3 rope)"])
@pytest.mark.parametrize("batch", [1, 2])
def test_greedy_ids_match_transformers_on_other_architectures(small_models, name, batch):
    model = small_models[name]
    if name.startswith("qwen2"):
        assert model.model.layers[0].self_attn.q_proj.bias is not None
    for length in (3, 70):  # 70 + 20 crosses llama3's original context of 64
        ids = prompt(batch, length, model.config.vocab_size, seed=length)
        expected = reference(model, ids, 20, min_new_tokens=20)
        got = fast_generate(model, input_ids=ids, max_new_tokens=20, min_new_tokens=20)
        assert torch.equal(got.sequences, expected)


@pytest.mark.parametrize("batch", [1, 2])
def test_written_attention_gives_transformers_eager_ids(batch):
    """Loaded with eager attention, the fast decoder writes attention out (matmul, float32 softmax, matmul) as
    transformers' eager attention does: prompt, decode steps and a left-padded batch give its greedy ids."""
    model = tiny("mistral", attn="eager")
    for length in (3, 40):
        ids = prompt(batch, length, model.config.vocab_size, seed=length)
        mask = torch.ones_like(ids)
        mask[1:, :length // 2] = 0  # the second row is left-padded to half the prompt
        expected = reference(model, ids, 20, min_new_tokens=20, attention_mask=mask)
        got = fast_generate(model, input_ids=ids, attention_mask=mask, max_new_tokens=20, min_new_tokens=20)
        assert torch.equal(got.sequences, expected)


def test_shipped_model_matches_transformers_for_32_tokens():
    model = AutoModelForCausalLM.from_pretrained(SHIPPED, dtype=torch.float32).eval()
    ids = AutoTokenizer.from_pretrained(SHIPPED)("The os module provides", return_tensors="pt")["input_ids"]
    expected = reference(model, ids, 32, min_new_tokens=32)
    assert torch.equal(fast_generate(model, input_ids=ids, max_new_tokens=32, min_new_tokens=32).sequences, expected)


def test_streamer_gets_the_prompt_then_one_put_per_token(llama):
    ids = prompt(2, 5, llama.config.vocab_size)
    streamer = Collect()
    out = fast_generate(llama, input_ids=ids, max_new_tokens=6, min_new_tokens=6, streamer=streamer)
    assert streamer.puts[-1] == "end" and len(streamer.puts) == 1 + 6 + 1
    assert torch.equal(streamer.puts[0], ids)
    assert all(p.shape == (2,) and p.device.type == "cpu" for p in streamer.puts[1:-1])
    assert torch.equal(torch.stack(streamer.puts[1:-1], dim=1), out.sequences[:, 5:])


def test_first_token_is_read_before_decoding_starts_and_later_ones_while_the_next_step_runs(llama):
    """Token 1's time is prefill alone (TTFT); after it, step g + 1 is queued before token g is read."""
    order = []
    prefill_ids = prompt(1, 5, llama.config.vocab_size)
    with torch.inference_mode():
        state, _ = state_cache(llama).get(llama, 1, 32)
        _, logits = prefill(llama, state, prefill_ids, False)

    def step(model, state, sample):
        order.append("step")
        return decode_one_token(model, state, sample)

    class Order(BaseStreamer):
        def put(self, value):
            order.append("put")

        def end(self):
            pass

    listener = Listener(1, Order(), [], [], 0, state.tokens.device)
    with torch.inference_mode():
        assert decode_n_tokens(llama, state, step, logits, 5, 4, False, listener) == 4
    assert order == ["put", "step", "step", "put", "step", "put", "put"]


def test_stopping_criteria_end_generation(llama):
    ids = prompt(1, 5, llama.config.vocab_size)
    after_three = lambda input_ids, scores: input_ids.shape[1] >= 5 + 3  # noqa: E731
    out = fast_generate(llama, input_ids=ids, max_new_tokens=20, min_new_tokens=20, stopping_criteria=[after_three])
    assert out.sequences.shape == (1, 8)
    event = threading.Event()
    event.set()
    stopped = fast_generate(llama, input_ids=ids, max_new_tokens=20,
                            stopping_criteria=StoppingCriteriaList([lambda i, s: event.is_set()]))
    assert stopped.sequences.shape == (1, 6)  # the first token is always produced


def test_a_row_ended_by_a_criterion_is_padded_like_transformers(llama):
    """The step after the stop is already computed when the host sees it: its token must still become padding."""
    ids = prompt(2, 5, llama.config.vocab_size, seed=4)
    row0_after_three = lambda input_ids, scores: torch.tensor([input_ids.shape[1] >= 5 + 3, False])  # noqa: E731
    expected = reference(llama, ids, 10, min_new_tokens=10, stopping_criteria=StoppingCriteriaList([row0_after_three]))
    got = fast_generate(llama, input_ids=ids, max_new_tokens=10, min_new_tokens=10, pad_token_id=0,
                        stopping_criteria=[row0_after_three], streamer=Collect())
    assert torch.equal(got.sequences, expected)
    assert (got.sequences[0, 8:] == 0).all() and not (got.sequences[1, 8:] == 0).all()


@pytest.mark.parametrize("batch", [1, 2])
def test_eos_ends_free_generation_like_transformers(llama, batch):
    ids = prompt(batch, 9, llama.config.vocab_size, seed=3)
    forced = reference(llama, ids, 12, min_new_tokens=12)
    eos = int(forced[0, 9 + 3])  # row 0 would write this id as its 4th new token
    expected = reference(llama, ids, 12, eos_token_id=eos)
    got = fast_generate(llama, input_ids=ids, max_new_tokens=12, eos_token_id=eos, pad_token_id=0, streamer=Collect())
    assert torch.equal(got.sequences, expected)
    first_eos = forced[0, 9:].tolist().index(eos)  # 3, or earlier if the id came up before
    assert got.sequences.shape[1] == 9 + first_eos + 1 or batch == 2
    masked = fast_generate(llama, input_ids=ids, max_new_tokens=12, min_new_tokens=12, eos_token_id=eos)
    assert torch.equal(masked.sequences, reference(llama, ids, 12, min_new_tokens=12, eos_token_id=eos))
    assert not (masked.sequences[:, 9:] == eos).any()  # min_new_tokens masks EOS as transformers does


def test_sampling_is_reproducible_with_a_seed(llama):
    ids = prompt(1, 6, llama.config.vocab_size)

    def sample(seed):
        torch.manual_seed(seed)
        return fast_generate(llama, input_ids=ids, max_new_tokens=16, min_new_tokens=16, do_sample=True,
                             temperature=1.5).sequences

    first, again, other = sample(1), sample(1), sample(2)
    assert torch.equal(first, again) and not torch.equal(first, other)
    greedy = fast_generate(llama, input_ids=ids, max_new_tokens=16, min_new_tokens=16).sequences
    assert not torch.equal(first, greedy)


def test_static_cache_is_reused_for_the_same_shape(llama):
    ids = prompt(1, 10, llama.config.vocab_size)
    first = fast_generate(llama, input_ids=ids, max_new_tokens=8)
    second = fast_generate(llama, input_ids=prompt(1, 12, llama.config.vocab_size), max_new_tokens=8)  # same bucket
    assert second.past_key_values is first.past_key_values and second.state_reused
    keys = first.past_key_values.layers[0].keys
    assert keys.shape == (1, 2, 256, 64)  # (batch, kv_heads, cache_len rounded up to 256, head_dim)
    assert first.kv_cache_bytes == 4 * 2 * keys.numel() * 4  # layers * (k, v) * elements * fp32
    other = fast_generate(llama, input_ids=prompt(2, 10, llama.config.vocab_size), max_new_tokens=8)
    assert other.past_key_values is not first.past_key_values and not other.state_reused


def test_engine_streamer_and_stop_criterion_work_unchanged(llama):
    """The engine's own recorder and stop criterion drive the fast decoder as they drive generate."""
    import queue

    from playground.engine import _Recorder, _StopOnEvent

    recorder = _Recorder("cpu", queue.SimpleQueue())
    out = fast_generate(llama, input_ids=prompt(1, 8, llama.config.vocab_size), max_new_tokens=5, min_new_tokens=5,
                        streamer=recorder, stopping_criteria=StoppingCriteriaList([_StopOnEvent(threading.Event())]))
    assert recorder.ids == out.sequences[0, 8:].tolist() and len(recorder.times) == 5
    assert out.kv_cache_bytes > 0


def test_decode_step_and_prefill_trace_as_single_graphs(llama):
    """fullgraph=True holds (no graph break), and a new prompt length does not recompile the prefill."""
    ids, longer = prompt(1, 9, llama.config.vocab_size), prompt(1, 21, llama.config.vocab_size)
    expected = fast_generate(llama, input_ids=ids, max_new_tokens=6, min_new_tokens=6).sequences
    state = state_cache(llama).state
    counter = torch._dynamo.testing.CompileCounter()
    compiled_prefill = torch.compile(prefill, backend=counter, dynamic=True, fullgraph=True)
    compiled_step = torch.compile(decode_one_token, backend=counter, fullgraph=True)
    with torch.inference_mode():
        tokens = [compiled_prefill(llama, state, ids, False)[0]]
        tokens += [compiled_step(llama, state, False)[0] for _ in range(5)]
        compiled_prefill(llama, state, longer, False)
        compiled_step(llama, state, False)
    assert torch.equal(torch.stack(tokens, dim=1), expected[:, 9:])
    assert counter.frame_count == 2


def test_unsupported_models_and_settings_are_refused_with_a_reason(llama):
    torch.manual_seed(0)
    gpt2 = AutoModelForCausalLM.from_config(AutoConfig.for_model("gpt2", n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    assert "GPT2LMHeadModel" in unsupported_reason(gpt2)
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        fast_generate(gpt2, input_ids=torch.tensor([[1, 2]]), max_new_tokens=2)
    assert "flex_attention" in unsupported_reason(AutoModelForCausalLM.from_config(
        AutoConfig.for_model("llama", **SMALL), attn_implementation="flex_attention"))
    yarn = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0, "original_max_position_embeddings": 256}
    assert "yarn" in unsupported_reason(tiny("llama", rope_parameters=yarn))
    windowed = tiny("mistral", sliding_window=16)
    assert unsupported_reason(windowed, total_tokens=16) is None
    assert "sliding-window" in unsupported_reason(windowed, total_tokens=17)
    assert "needs CUDA" in unsupported_reason(llama, compile_mode="reduce-overhead")
    for mask in ([[1, 1, 0]], [[0, 0, 0]], [[1, 0, 1]]):  # right padding, nothing to read, a hole
        with pytest.raises(ValueError, match="left padding only"):
            fast_generate(llama, input_ids=torch.tensor([[5, 6, 7]]), attention_mask=torch.tensor(mask),
                          max_new_tokens=2)
    with pytest.raises(ValueError, match="top_k"):
        fast_generate(llama, input_ids=torch.tensor([[5, 6, 7]]), max_new_tokens=2, do_sample=True, top_k=50)


@pytest.mark.skipif(not hasattr(torch._inductor.config.triton, "enable_pdl"), reason="this torch has no PDL option")
def test_decode_step_compiles_with_pdl_unless_the_user_turns_it_off(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_ENABLE_PDL", raising=False)
    assert decode_compile_options("reduce-overhead", torch.bfloat16)["triton.enable_pdl"] is True
    for off in ("0", "false"):  # inductor's own reading: only "1" is on
        monkeypatch.setenv("TORCHINDUCTOR_ENABLE_PDL", off)
        assert decode_compile_options("reduce-overhead", torch.bfloat16)["triton.enable_pdl"] is False


def test_fixed_kernels_compile_in_inductors_deterministic_mode_as_steps_of_their_own(llama):
    """Under kernel_choice("fixed") nothing is timed: the same projections rewritten as reductions, each keeping
    inductor's own first launch config; a step compiled under one choice is never replayed under the other."""
    assert KERNELS[0] == "fixed"  # the default: steps compiled outside any kernel_choice
    fixed = decode_compile_options("reduce-overhead", torch.bfloat16)
    with kernel_choice("tuned"):
        tuned = decode_compile_options("reduce-overhead", torch.bfloat16)
    assert "deterministic" not in tuned and fixed == {**tuned, "deterministic": True}
    assert hasattr(torch._inductor.config, "deterministic")  # an inductor option torch.compile takes
    state = fast_generate(llama, input_ids=prompt(1, 5, llama.config.vocab_size), max_new_tokens=2).past_key_values
    steps = {}
    for kernels in KERNELS:
        with kernel_choice(kernels):
            steps[kernels] = compiled_steps(llama, state, "default", compile_prefill=False)[1]
    assert steps["tuned"] is not steps["fixed"]
    with pytest.raises(ValueError, match="kernels='fastest' is not one of"):
        with kernel_choice("fastest"):
            pass


def test_graphs_are_the_playgrounds_own_capture_never_torchs_and_only_on_a_gpu(llama):
    """torch's CUDA graphs run Dynamo's guards before each replay; a mode that asks for graphs gets a step the
    playground captures itself on CUDA (tests/fast/test_fast_gpu.py), and on a CPU the compiled function as it is."""
    for mode in ("default", "reduce-overhead", "max-autotune"):
        assert decode_compile_options(mode, torch.bfloat16)["triton.cudagraphs"] is False
    state = fast_generate(llama, input_ids=prompt(1, 5, llama.config.vocab_size), max_new_tokens=2).past_key_values
    step = compile_step(decode_one_token, state, "reduce-overhead")
    assert not isinstance(step, CapturedStep) and callable(step)


@torch._dynamo.config.patch(recompile_limit=1)  # the config's own patch: it puts the limit back afterwards
def test_each_state_compiles_on_its_own_past_dynamos_recompile_limit(llama, monkeypatch):
    """Dynamo allows a code object a fixed number of graphs (8; 1 here), a hard error under fullgraph=True:
    the state of another batch size, as a session of comparisons builds up, compiles anew instead, and its
    decode step is as static as the first state's (Dynamo remembers changed sizes per source line)."""
    monkeypatch.setattr(precompile, "available", lambda: False)  # torch.compile's own route, which the limit binds
    # states of their own, so the eager-backend steps below are dropped with them, never reused by a later run
    monkeypatch.setitem(llama.__dict__, "_playground_fast_states", StateCache())
    symbolic = []  # per graph traced: whether any input size is symbolic

    def eager(graph, inputs):  # Dynamo's guards and limit are the subject, not inductor's code
        sizes = [size for t in inputs if isinstance(t, torch.Tensor) for size in t.shape]
        symbolic.append(any(isinstance(x, torch.SymInt) for x in sizes + list(inputs)))
        return graph.forward

    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, fullgraph=False, dynamic=None, **_: compile_(
        fn, backend=eager, fullgraph=fullgraph, dynamic=dynamic))
    for batch in (1, 2):
        ids = prompt(batch, 7, llama.config.vocab_size)
        expected = fast_generate(llama, input_ids=ids, max_new_tokens=3, min_new_tokens=3).sequences
        state = state_cache(llama).state
        compiled_prefill, compiled_step = compiled_steps(llama, state, "default", compile_prefill=True)
        with torch.inference_mode():
            tokens = [compiled_prefill(llama, state, ids, False)[0]]
            tokens += [compiled_step(llama, state, False)[0] for _ in range(2)]
        assert torch.equal(torch.stack(tokens, dim=1), expected[:, 7:])
    assert symbolic[1::2] == [False, False]  # prefill (dynamic by design), decode step, prefill, decode step
