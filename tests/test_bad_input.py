"""The bad-input catalogue: each case gets a clear message naming the problem, and the engine
serves the next run as if nothing happened."""

import pytest
import torch

from playground.config import ConfigError, RunConfig
from playground.engine import run
from playground.loader import MODELS

OK = dict(model="tiny-random-llama", device="cpu", new_tokens=4, repeats=1, warmup=0, profile_kernels=False)


def assert_healthy():
    record = run(RunConfig(prompt="still serving", **OK))
    assert record.status == "ok", record.reason


# (fields, where the refusal comes from, text it must contain)
REFUSED_AT_CONFIG = [
    (dict(prompt=""), "prompt is empty"),
    (dict(prompt=" \t\n "), "only whitespace"),
    (dict(prompt="x", new_tokens=0), "new_tokens must be a whole number from 1"),
    (dict(prompt="x", new_tokens=-3), "new_tokens must be"),
    (dict(prompt="x", new_tokens=10**7), "new_tokens must be"),
    (dict(prompt="x", repeats=0), "repeats must be"),
    (dict(prompt="x", attn="flash-attn"), "attn='flash-attn' is not one of"),
    (dict(prompt="x", dtype="float8"), "dtype='float8' is not one of"),
    (dict(prompt="bad \udcff surrogate"), "invalid Unicode"),
]


@pytest.mark.parametrize("fields, message", REFUSED_AT_CONFIG)
def test_refused_before_anything_runs(fields, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_dict({**OK, **fields})
    assert_healthy()


REFUSED_AT_RUN = [
    (dict(prompt_tokens=5000), "invalid", "exceeds the model's context of 4096 tokens"),
    (dict(prompt="x", model="no-such-preset-or-dir/"), "error", "is not a preset, an existing local directory"),
    (dict(prompt="x", model="nobody/unknown-model-id"), "error", "Hugging Face Hub"),
    (dict(prompt="x", attn="sdpa:cudnn"), "invalid", "needs a CUDA GPU"),
    (dict(prompt="x", device="cuda"), "invalid", "no CUDA GPU is visible"),
]


@pytest.mark.parametrize("fields, status, message", REFUSED_AT_RUN)
def test_refused_by_the_engine_with_a_record(fields, status, message):
    record = run(RunConfig(**{**OK, **fields}))
    assert record.status == status and message in record.reason and record.reason
    assert_healthy()


@pytest.mark.parametrize("prompt", ["emoji 😀🚀✨", "עברית ومرحبا RTL", "ctrl\x00\x01\x7f\u200b", "<script>alert('x')</script><b>",
                                    "{{template}} ${x} `code` **md**"])
def test_unusual_text_is_just_text(prompt):
    record = run(RunConfig(prompt=prompt, **OK))
    assert record.status == "ok" and record.config["prompt"] == prompt
    assert_healthy()


def test_a_request_that_cannot_fit_in_memory_is_refused_with_numbers():
    record = run(RunConfig(prompt_tokens=16, **{**OK, "model": "llama-3.1-8b-shape", "dtype": "fp32", "batch_size": 256}))
    if record.status == "ok":
        pytest.skip("this machine has room for an 8B fp32 model")
    assert record.status == "invalid" and "needs about" in record.reason and "GB" in record.reason
    assert "weights 32.1 GB" in record.reason
    assert_healthy()


def test_out_of_memory_during_generation_is_caught_and_memory_freed(monkeypatch):
    lm, _ = MODELS.get("tiny-random-llama", "cpu", "fp32", "sdpa")

    def exhausted(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(lm.model, "generate", exhausted)
    record = run(RunConfig(prompt="x", **OK))
    assert record.status == "error"
    assert "ran out of memory while running repeat 1/1" in record.reason and "Tried to allocate 20.00 GiB" in record.reason
    assert not MODELS.holds(lm.key)  # unloaded, so the next run starts clean
    monkeypatch.undo()
    assert_healthy()
