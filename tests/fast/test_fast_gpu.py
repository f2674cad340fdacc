"""The compiled, CUDA-graph path of the fast backend: run on the GPU machine (`pytest -m gpu tests/fast`)."""

from __future__ import annotations

import threading

import pytest
import torch
from torch._dynamo.utils import counters
from transformers import StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from playground import capabilities
from playground.config import RunConfig
from playground.engine import run
from playground.fast import aot, fast_generate
from playground.fast.forward import decode_one_token, prefill
from playground.fast.generate import CapturedStep
from playground.fast.ops import fa2_decode, fa2_prefill, materialize
from playground.fast.state import allocate
from playground.loader import MODELS

pytestmark = pytest.mark.gpu


def ids_for(model, batch: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(length)
    return torch.randint(3, model.config.vocab_size, (batch, length), generator=g).cuda()


@pytest.mark.parametrize("batch", [1, 2])
def test_compiled_greedy_matches_eager_and_transformers_in_fp32(batch):
    model = MODELS.get("tiny-random-llama", "cuda", "fp32", "sdpa")[0].model
    for length in (5, 60):
        ids = ids_for(model, batch, length)
        with torch.inference_mode():
            expected = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                      max_new_tokens=32, min_new_tokens=32, pad_token_id=0)
        eager = fast_generate(model, input_ids=ids, max_new_tokens=32, min_new_tokens=32)
        compiled = fast_generate(model, input_ids=ids, max_new_tokens=32, min_new_tokens=32,
                                 compile_mode="reduce-overhead")
        assert torch.equal(eager.sequences, expected) and torch.equal(compiled.sequences, expected)


def test_a_compiled_left_padded_batch_gives_each_row_what_its_prompt_gives_alone_in_fp32():
    """The shipped model, whose ids vary (a random one repeats a token, which a broken mask would not change)."""
    from playground.speculative import GROUNDED_PROMPT

    lm = MODELS.get("stdlib-llama-tiny", "cuda", "fp32", "sdpa")[0]
    ids = lm.tokenizer(GROUNDED_PROMPT, return_tensors="pt")["input_ids"].cuda()
    lengths = [ids.shape[1], ids.shape[1] - 9, ids.shape[1] - 25]
    alone = [fast_generate(lm.model, input_ids=ids[:, :n], max_new_tokens=24, min_new_tokens=24,
                           compile_mode="reduce-overhead").sequences[0, n:].tolist() for n in lengths]
    batch = torch.stack([torch.cat([ids.new_zeros(ids.shape[1] - n), ids[0, :n]]) for n in lengths])
    mask = (torch.arange(ids.shape[1], device="cuda")[None] >= torch.tensor(
        [ids.shape[1] - n for n in lengths], device="cuda")[:, None]).long()
    out = fast_generate(lm.model, input_ids=batch, attention_mask=mask, max_new_tokens=24, min_new_tokens=24,
                        compile_mode="reduce-overhead")
    assert out.past_key_values.padded and len({tuple(row) for row in alone}) > 1
    assert out.sequences[:, ids.shape[1]:].tolist() == alone


def test_decode_step_replays_a_cuda_graph_and_is_reused_across_runs():
    model = MODELS.get("tiny-random-llama", "cuda", "bf16", "sdpa")[0].model
    counters.clear()
    first = fast_generate(model, input_ids=ids_for(model, 1, 17), max_new_tokens=64, compile_mode="reduce-overhead",
                          min_new_tokens=64)
    graphs_after_first = counters["stats"]["unique_graphs"]
    again = fast_generate(model, input_ids=ids_for(model, 1, 30), max_new_tokens=64, compile_mode="reduce-overhead",
                          min_new_tokens=64)
    assert again.state_reused and again.past_key_values is first.past_key_values
    [(_, step)] = again.past_key_values.compiled.values()
    assert isinstance(step, CapturedStep) and isinstance(step.graphs[(False,)][0], torch.cuda.CUDAGraph)
    assert graphs_after_first > 0 and counters["stats"]["unique_graphs"] == graphs_after_first  # nothing recompiled


def test_a_captured_step_runs_its_python_twice_then_only_replays():
    """Call 1 warms up (runs the function), call 2 captures and replays it, later calls replay alone; each call
    does the step's work once, and each argument set gets a graph of its own."""
    runs = []

    def step(model, state, by):
        runs.append(by)
        state.add_(by)
        return state * 2

    state = torch.zeros(1, device="cuda")
    captured = CapturedStep(step)
    outs = [captured(None, state, 1).item() for _ in range(5)]
    assert runs == [1, 1] and state.item() == 5 and outs == [2, 4, 6, 8, 10]
    captured(None, state, 10)
    captured(None, state, 10)
    captured(None, state, 1)
    assert runs == [1, 1, 10, 10] and state.item() == 26 and set(captured.graphs) == {(1,), (10,)}


def test_sampled_compiled_decoding_is_reproducible():
    model = MODELS.get("tiny-random-llama", "cuda", "bf16", "sdpa")[0].model
    ids = ids_for(model, 1, 9)

    def sample(seed):
        torch.manual_seed(seed)
        return fast_generate(model, input_ids=ids, max_new_tokens=24, min_new_tokens=24, do_sample=True,
                             temperature=0.9, compile_mode="reduce-overhead").sequences

    assert torch.equal(sample(3), sample(3))


def test_compiled_streaming_with_a_row_stop_matches_transformers_in_fp32():
    """The host reads token g while the graph for g + 1 runs: streamed ids, padding and stops must not shift."""
    model = MODELS.get("tiny-random-llama", "cuda", "fp32", "sdpa")[0].model
    ids = ids_for(model, 2, 20)
    row0_after_five = lambda input_ids, scores: torch.tensor([input_ids.shape[1] >= 25, False], device=input_ids.device)  # noqa: E731,E501
    with torch.inference_mode():
        expected = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                  max_new_tokens=24, min_new_tokens=24, pad_token_id=0,
                                  stopping_criteria=StoppingCriteriaList([row0_after_five]))
    streamed = []

    class Collect(BaseStreamer):
        def put(self, value):
            streamed.append(value.clone())

        def end(self):
            pass

    got = fast_generate(model, input_ids=ids, max_new_tokens=24, min_new_tokens=24, pad_token_id=0,
                        compile_mode="reduce-overhead", streamer=Collect(), stopping_criteria=[row0_after_five])
    assert torch.equal(got.sequences, expected)
    assert torch.equal(torch.stack(streamed[1:], dim=1), got.sequences[:, 20:].cpu())


def needs_flash_attn(dtype: str) -> None:
    reason = capabilities.attention_unavailable("flash_attention_2", "cuda", dtype, capabilities.host())
    if reason:
        pytest.skip(reason)


def test_custom_ops_fake_kernels_match_the_real_ones():
    """torch's own check: schema, and the fake kernel's shape, dtype and strides against the real output."""
    needs_flash_attn("bf16")
    q, k = torch.randn(2, 8, 5, 64, device="cuda", dtype=torch.bfloat16), torch.randn(2, 2, 5, 64, device="cuda",
                                                                                    dtype=torch.bfloat16)
    cache = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16)
    filled = torch.tensor([5, 5], device="cuda", dtype=torch.int32)
    torch.library.opcheck(fa2_prefill, (q, k, k, 0.125))
    torch.library.opcheck(fa2_decode, (q[:, :, :1], cache, cache, filled, 0.125))
    torch.library.opcheck(materialize, (q,))


def test_flash_attention_2_gives_the_logits_sdpa_gives_in_prefill_and_decode():
    """Same weights, same tokens fed to both: flash-attn's ops (full prompt, then only the filled cache) agree
    with SDPA over the masked static cache to fp16 rounding, at every step."""
    needs_flash_attn("fp16")
    model = MODELS.get("tiny-random-llama", "cuda", "fp16", "flash_attention_2")[0].model
    ids = ids_for(model, 2, 37)
    flash, sdpa = allocate(model, 2, 256), allocate(model, 2, 256)
    try:
        with torch.inference_mode():
            steps = [(prefill(model, flash, ids, False)[1], None)]
            model.set_attn_implementation("sdpa")
            steps[0] = (steps[0][0], prefill(model, sdpa, ids, False)[1])
            for _ in range(6):
                sdpa.tokens.copy_(flash.tokens)  # feed both the same token, whatever each would pick
                model.set_attn_implementation("flash_attention_2")
                from_flash = decode_one_token(model, flash, False)[1]
                model.set_attn_implementation("sdpa")
                steps.append((from_flash, decode_one_token(model, sdpa, False)[1]))
    finally:
        model.set_attn_implementation("flash_attention_2")
    for got, expected in steps:
        torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)


def test_flash_attention_2_decode_step_runs_flash_attn_kernels_in_the_cuda_graph():
    needs_flash_attn("bf16")
    config = RunConfig(model="tiny-random-llama", device="cuda", dtype="bf16", attn="flash_attention_2",
                       backend="fast", cache_impl="static", compile="reduce-overhead", prompt_tokens=200,
                       new_tokens=24, repeats=1, warmup=1)
    record = run(config)
    assert record.status == "ok", record.reason
    assert record.fallback is None and record.tokens_generated == 24
    assert record.attn_families == {"prefill": ["flash-attn"], "decode": ["flash-attn"]}, record.attn_kernels
    # the custom ops' names match no family: what proves it is flash-attn's own GPU kernel, replayed in the graph
    # (flash_fwd_splitkv_kernel at the 1B shape on the H200; the kernel variant is flash-attn's choice)
    assert any(name.startswith("void flash::flash_fwd") for name in record.attn_kernels["decode"]), record.attn_kernels


def test_fixed_kernels_run_the_step_and_the_record_says_so():
    """kernels=fixed compiles the step in inductor's deterministic mode: it runs, replays its graph, and the record's
    compile description names the choice."""
    config = RunConfig(model="tiny-random-llama", device="cuda", dtype="bf16", backend="fast", cache_impl="static",
                       compile="reduce-overhead", kernels="fixed", prompt_tokens=32, new_tokens=16, repeats=1, warmup=1)
    record = run(config)
    assert record.status == "ok", record.reason
    assert record.tokens_generated == 16 and "kernels fixed" in record.compiled


def test_compiled_decoding_runs_on_a_thread_other_than_the_first_compiler():
    """torch before 2.13 kept CUDA-graph state only in the thread that compiled first (pytorch#123177)."""
    model = MODELS.get("tiny-random-llama", "cuda", "fp32", "sdpa")[0].model
    fast_generate(model, input_ids=ids_for(model, 1, 11), max_new_tokens=8, compile_mode="reduce-overhead")
    ids = ids_for(model, 2, 11)  # another batch: a new graph, compiled and captured on the other thread
    there = {}

    def work():
        try:
            there["ids"] = fast_generate(model, input_ids=ids, max_new_tokens=8, min_new_tokens=8,
                                         compile_mode="reduce-overhead").sequences
        except Exception as error:  # noqa: BLE001 - handed to the test thread
            there["error"] = error

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert "error" not in there, repr(there.get("error"))
    assert torch.equal(there["ids"], fast_generate(model, input_ids=ids, max_new_tokens=8, min_new_tokens=8).sequences)


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
@pytest.mark.parametrize("attn", ["sdpa", "flash_attention_2"])
def test_compiled_speculative_decoding_keeps_the_plain_greedy_tokens(attn, method):
    """The draft's decode step (or prompt lookup's host search) and the target's verify step, compiled and
    replayed, on the shipped pair.

    In fp32 the tokens equal plain greedy decoding. flash-attn runs only in half precision, where verifying
    k + 1 positions at once runs other kernels than one-token steps and a near-tie can round either way;
    there every token must be the target's greedy choice at its position, to within bf16 rounding of the
    logits, when the target reads the whole output in one pass."""
    from playground.fast.speculative import speculative_generate
    from playground.loader import ModelCache
    from playground.speculative import GROUNDED_PROMPT

    if attn == "flash_attention_2" and capabilities.host().packages.get("flash-attn") is None:
        pytest.skip("flash-attn is not installed")
    dtype = "bf16" if attn == "flash_attention_2" else "fp32"
    cache = ModelCache()
    lm, _ = cache.get("stdlib-llama-tiny", "cuda", dtype, attn)
    cache.attach_draft(lm, "stdlib-llama-draft")
    ids = lm.tokenizer(GROUNDED_PROMPT, return_tensors="pt")["input_ids"].cuda()
    plain = fast_generate(lm.model, input_ids=ids, max_new_tokens=48, eos_token_id=[], compile_mode="reduce-overhead")
    for _ in range(2):  # the second call replays the graphs the first one captured
        draft = lm.draft.model if method == "draft" else None
        spec = speculative_generate(lm.model, draft, input_ids=ids, max_new_tokens=48, draft_tokens=4,
                                    eos_token_id=[], compile_mode="reduce-overhead")
        assert sum(spec.accepted) > 0
        if dtype == "fp32":
            assert spec.sequences.tolist() == plain.sequences.cpu().tolist()
            continue
        sequence = spec.sequences.to("cuda")
        with torch.no_grad():
            logits = lm.model(sequence).logits[0, ids.shape[1] - 1:-1].float()
        chosen = logits.gather(1, sequence[0, ids.shape[1]:, None])[:, 0]
        shortfall = logits.max(dim=1).values - chosen  # 0 where the token is the argmax
        assert shortfall.max() <= 2 ** -7 * logits.abs().max(), shortfall.tolist()


def test_an_ahead_of_time_step_keeps_the_eager_tokens_on_cuda(monkeypatch, tmp_path):
    toolchain = aot.toolchain_failure("cuda")
    if toolchain:  # seen with torch 2.11.0+cu130 on an H200: not this project's step, nothing it can change
        pytest.skip(f"torch {torch.__version__}: {toolchain}")
    monkeypatch.setenv("PLAYGROUND_COMPILE_CACHE", str(tmp_path))
    model = MODELS.get("tiny-random-llama", "cuda", "fp32", "sdpa")[0].model
    ids = ids_for(model, 1, 20)
    eager = fast_generate(model, input_ids=ids, max_new_tokens=24, min_new_tokens=24)
    ahead = fast_generate(model, input_ids=ids, max_new_tokens=24, min_new_tokens=24, compile_mode="aot")
    assert torch.equal(ahead.sequences, eager.sequences) and list(tmp_path.glob("aot/decode-*.pt2"))
    [(_, step)] = ahead.past_key_values.compiled.values()
    assert isinstance(step, CapturedStep) and isinstance(step.graphs[(False,)][0], torch.cuda.CUDAGraph)
