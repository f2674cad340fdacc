"""benchmarks/gpt_fast_anchor.py and fast_decode's --gpt-fast on CPU: gpt-fast's arguments read from the preset,
its sampling made greedy, a missing checkout said as such without losing the other rows, and, where a gpt-fast
checkout is at hand (GPT_FAST, or the shared anchors beside the repository), its row run first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from benchmarks.gpt_fast_anchor import _sdp_kernel, greedy, model_args

FAST_DECODE = [sys.executable, "-m", "benchmarks.fast_decode", "--prompt-tokens", "8", "--new-tokens", "6",
               "--repeats", "1", "--no-transformers"]
CHECKOUT = Path(os.environ.get("GPT_FAST", Path(__file__).resolve().parents[2] / "shared" / "anchors" / "gpt-fast"))


def test_the_8b_shape_becomes_gpt_fasts_llama_3_1_8b_arguments():
    args = model_args("llama-3.1-8b-shape")
    assert {k: args[k] for k in ("n_layer", "n_head", "n_local_heads", "dim", "intermediate_size", "vocab_size")} == {
        "n_layer": 32, "n_head": 32, "n_local_heads": 8, "dim": 4096, "intermediate_size": 14336,
        "vocab_size": 128256}
    assert args["rope_base"] == 500000.0 and args["rope_scaling"] == {
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def test_the_1b_shape_keeps_its_own_rope_factor_and_a_plain_rope_has_no_scaling():
    assert model_args("llama-3.2-1b-shape")["rope_scaling"]["factor"] == 32.0
    assert model_args("tiny-random-llama")["rope_scaling"] is None


@pytest.mark.parametrize("name", ["qwen2.5-7b-shape", "stdlib-llama-tiny", "no-such-model"])
def test_a_preset_gpt_fast_cannot_build_is_refused_naming_the_ones_it_can(name):
    with pytest.raises(ValueError, match="llama-3.1-8b-shape") as exc:
        model_args(name)
    assert repr(name) in str(exc.value)


def test_greedy_sampling_takes_the_last_positions_argmax():
    logits = torch.tensor([[[5.0, 0.0, 1.0], [0.0, 3.0, 9.0]]])
    token, last = greedy(logits, temperature=0.8, top_k=200)
    assert token.tolist() == [[2]] and token.dtype == torch.int and torch.equal(last, logits[:, -1])


def test_the_sdp_kernel_stand_in_limits_sdpa_to_the_backends_asked_for():
    q = torch.randn(1, 2, 4, 8)
    with _sdp_kernel(enable_flash=False, enable_mem_efficient=False, enable_math=True):
        out = F.scaled_dot_product_attention(q, q, q)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, q, q), atol=1e-6)


def test_a_folder_without_gpt_fast_fails_its_row_and_the_fast_row_still_runs(tmp_path):
    out = subprocess.run([*FAST_DECODE, "--gpt-fast", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split(" | ") for line in out.stdout.splitlines() if line.startswith("| tiny-random-llama")]
    assert [row[1] for row in rows] == ["gpt-fast", "fast"]
    assert "failed:" in rows[0][-1] and "no model.py or generate.py there" in rows[0][-1]
    assert rows[1][4].strip() and not rows[1][8].strip()  # a rate, and no ratio against the failed anchor


@pytest.mark.skipif(not (CHECKOUT / "generate.py").is_file(), reason=f"no gpt-fast checkout at {CHECKOUT}")
def test_gpt_fast_runs_first_and_the_fast_row_is_compared_with_it():
    out = subprocess.run([*FAST_DECODE, "--gpt-fast", str(CHECKOUT)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split(" | ") for line in out.stdout.splitlines() if line.startswith("| tiny-random-llama")]
    assert [row[1] for row in rows] == ["gpt-fast", "fast"]
    gpt_fast_rate, fast_rate, ratio = (float(rows[0][4].split(" ± ")[0]), float(rows[1][4].split(" ± ")[0]),
                                       float(rows[1][8]))
    assert gpt_fast_rate > 0 and ratio == pytest.approx(fast_rate / gpt_fast_rate, rel=0.01)
