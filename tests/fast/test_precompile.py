"""Compiled steps kept on disk: a new process loads them instead of tracing, and a file that does not fit is never run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from playground import warm
from playground.fast import fast_generate, precompile
from playground.fast.forward import decode_one_token, prefill
from playground.fast.generate import compiled_steps, decode_compile_options, torch_compiled
from playground.fast.state import state_cache
from playground.loader import MODELS

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not precompile.available(), reason="this torch cannot save a compiled function")

# prefill and three decode steps through the playground's compiled steps, then what each step's route was
SCRIPT = """
import json, sys, torch
from playground.fast import fast_generate
from playground.fast.generate import compiled_steps
from playground.fast.state import state_cache
from playground.loader import MODELS
length, device, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
model = MODELS.get("tiny-random-llama", device, "fp32", "sdpa")[0].model
ids = torch.arange(3, 3 + length, device=device)[None]
eager = fast_generate(model, input_ids=ids, max_new_tokens=4, compile_mode="off").sequences[0, ids.shape[1]:]
state = state_cache(model).state
first, step = compiled_steps(model, state, mode, compile_prefill=True)
with torch.inference_mode():
    tokens = [first(model, state, ids, False)[0]] + [step(model, state, False)[0] for _ in range(3)]
print(json.dumps(dict(tokens=torch.cat(tokens).tolist(), eager=eager.tolist(),
                      notes=[next(iter(getattr(s, "compiled", s).notes.values())).split(" ")[0]
                             for s in (first, step)])))
"""


def run_in_new_process(tmp_path: Path, inductor: str, prompt_tokens: int, device: str = "cpu",
                       mode: str = "default") -> dict:
    """The script above in a fresh interpreter on the compile caches under `tmp_path` (the GPU tests use it too)."""
    env = dict(os.environ, PLAYGROUND_COMPILE_CACHE=str(tmp_path / "cache"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / inductor))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(prompt_tokens), device, mode], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_loads_the_saved_prefill_and_step_and_decodes_the_eager_tokens(tmp_path):
    cold = run_in_new_process(tmp_path, "inductor", 32)
    assert cold["notes"] == ["compiled", "compiled"] and cold["tokens"] == cold["eager"]
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "cache" / "steps").iterdir()) == [
        "decode_one_token", "prefill"]
    warm_start = run_in_new_process(tmp_path, "inductor", 20)  # another prompt length: the prefill was saved with it symbolic
    assert warm_start["notes"] == ["loaded", "loaded"] and warm_start["tokens"] == warm_start["eager"]


@pytest.mark.gpu
def test_on_cuda_a_new_process_loads_the_saved_steps_replays_them_as_cuda_graphs_and_decodes_the_eager_tokens(
        tmp_path):
    cold = run_in_new_process(tmp_path, "inductor", 32, "cuda", "reduce-overhead")
    assert cold["notes"] == ["compiled", "compiled"] and cold["tokens"] == cold["eager"]
    warm_start = run_in_new_process(tmp_path, "inductor", 20, "cuda", "reduce-overhead")
    assert warm_start["notes"] == ["loaded", "loaded"] and warm_start["tokens"] == warm_start["eager"]


@pytest.fixture()
def llama_state(monkeypatch, tmp_path):
    monkeypatch.setenv(warm.CACHE_ENV, str(tmp_path))
    model = MODELS.get("tiny-random-llama", "cpu", "fp32", "sdpa")[0].model
    fast_generate(model, input_ids=torch.arange(3, 35)[None], max_new_tokens=4, compile_mode="off")
    state = state_cache(model).state
    state.compiled.clear()  # steps an earlier test compiled for this state were saved to its own cache folder
    return model, state


def _step(state, fn=decode_one_token, mode="default"):
    options = decode_compile_options(mode, state.cos.dtype)
    return precompile.PrecompiledStep(lambda: torch_compiled(fn, state, mode), fn, options), options


def test_a_saved_file_that_does_not_load_is_compiled_over_and_the_step_still_runs(llama_state):
    model, state = llama_state
    step, options = _step(state)
    path = precompile.step_path(decode_one_token, model, state, options, (False,))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a compiled function")
    with torch.inference_mode():
        pos = state.pos.clone()
        expected = decode_one_token(model, state, False)[0].clone()
        state.pos.copy_(pos)
        assert "did not load" in step.prepare(model, state, False)
        assert torch.equal(step(model, state, False)[0], expected)
        assert _step(state)[0].prepare(model, state, False).startswith("loaded")  # the step compiled now replaced it


def test_inputs_the_saved_steps_guards_refuse_are_traced_by_torch_compile_and_the_file_is_kept(llama_state):
    model, state = llama_state
    with torch.inference_mode():
        compiled_steps(model, state, "default", compile_prefill=True)[0](model, state, torch.arange(3, 35)[None], False)
        saved = {path: path.read_bytes() for path in (Path(os.environ[warm.CACHE_ENV]) / "steps").iterdir()}
        state.compiled.clear()  # as a new process would, the prefill is looked up in the cache again
        first, _ = compiled_steps(model, state, "default", compile_prefill=True)
        one = torch.tensor([[5]])  # a one-token prompt: Dynamo specializes sizes 0 and 1, so the saved guards refuse it
        expected = prefill(model, state, one, False)[0].clone()
        assert torch.equal(first(model, state, one, False)[0], expected)
    assert "its guards refuse these inputs; traced by torch.compile" in first.notes[precompile.signature((one, False))]
    assert {path: path.read_bytes() for path in saved} == saved  # kept for the prompts it fits


def test_a_loaded_prefill_hands_inputs_its_guards_refuse_to_torch_compile_mid_session(llama_state):
    model, state = llama_state
    with torch.inference_mode():
        compiled_steps(model, state, "default", compile_prefill=True)[0](model, state, torch.arange(3, 35)[None], False)
        state.compiled.clear()
        first, _ = compiled_steps(model, state, "default", compile_prefill=True)
        first(model, state, torch.arange(3, 23)[None], False)  # 20 tokens: the saved prefill fits
        one = torch.tensor([[5]])
        expected = prefill(model, state, one, False)[0].clone()
        assert torch.equal(first(model, state, one, False)[0], expected)  # refused by the guards, traced instead
    note = first.notes[precompile.signature((one, False))]
    assert note.startswith("loaded") and note.endswith("its guards refused later inputs, which torch.compile traced")


def test_a_run_with_caches_off_neither_reads_nor_writes_saved_steps(llama_state):
    model, state = llama_state
    step, _ = _step(state)
    with torch.inference_mode(), torch.compiler.config.patch(force_disable_caches=True):
        step(model, state, False)
    assert step.notes[(False,)] == "traced by torch.compile (caches off for this run)"
    assert not (Path(os.environ[warm.CACHE_ENV]) / "steps").exists()


def test_a_step_whose_compile_cannot_be_saved_is_traced_by_torch_compile(llama_state):
    model, state = llama_state
    compiled = torch.compile(decode_one_token, backend=lambda graph, inputs: graph.forward, fullgraph=True)
    step = precompile.PrecompiledStep(lambda: compiled, decode_one_token, {})
    with torch.inference_mode():
        step(model, state, False)
    assert step.notes[(False,)].startswith("not compiled ahead of time") and step.steps[(False,)] is compiled


def test_the_file_is_keyed_by_what_changes_the_trace(llama_state):
    model, state = llama_state
    options = decode_compile_options("default", state.cos.dtype)
    path = precompile.step_path(decode_one_token, model, state, options, (False,))
    assert path.parent == Path(os.environ[warm.CACHE_ENV]) / "steps"
    assert precompile.step_path(decode_one_token, model, state, dict(options), (False,)) == path
    assert precompile.step_path(decode_one_token, model, state, options, (True,)) != path
    assert precompile.step_path(prefill, model, state, options, (False,)) != path
    assert precompile.step_path(decode_one_token, model, state, {**options, "max_autotune": True}, (False,)) != path
    other = MODELS.get("stdlib-llama-tiny", "cpu", "fp32", "sdpa")[0].model
    assert precompile.step_path(decode_one_token, other, state, options, (False,)) != path
    eager = MODELS.get("tiny-random-llama", "cpu", "fp32", "eager")[0].model  # the same config, other attention
    assert precompile.step_path(decode_one_token, eager, state, options, (False,)) != path
    assert precompile.step_path(decode_one_token, model, state, {**options, "sdpa_backends": (0, 0, 0, 1)},
                                (False,)) != path
    assert precompile.signature((torch.zeros(1, 7, dtype=torch.long), False)) == precompile.signature(
        (torch.zeros(1, 9, dtype=torch.long), False))


def test_a_step_that_cannot_be_saved_still_runs_and_the_record_says_why(llama_state, monkeypatch):
    model, state = llama_state
    (Path(os.environ[warm.CACHE_ENV]) / "steps").write_text("a file where the folder would be")
    step, _ = _step(state)
    kept = len(warm.not_kept)
    with torch.inference_mode():
        pos = state.pos.clone()
        expected = decode_one_token(model, state, False)[0].clone()
        state.pos.copy_(pos)
        assert torch.equal(step(model, state, False)[0], expected)
    assert step.notes[(False,)].startswith("compiled; not saved (FileExistsError")
    assert warm.not_kept[kept:] == [warm.not_kept[-1]] and "not saved" in warm.not_kept[-1]
