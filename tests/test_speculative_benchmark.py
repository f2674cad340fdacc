"""The speculative benchmark on CPU: a target given as a model folder, drafted for by the shipped draft."""

from types import SimpleNamespace

import pytest

from benchmarks.speculative import ideal_speedup, main, round_ms
from playground.speculative import ASSETS


def test_a_target_from_a_folder_runs_exact_with_the_shipped_draft(capsys):
    target = ASSETS / "models" / "stdlib-llama-tiny"
    main(["--target", str(target), "--draft-model", "stdlib-llama-draft", "--draft-tokens", "2", "--prompts", "1",
          "--repeats", "1", "--rounds", "1", "--lookup-tokens", "4"])
    out = capsys.readouterr().out
    assert f"{target} (target)" in out
    assert "Draft model stdlib-llama-draft" in out
    row = next(line for line in out.splitlines() if line.startswith("| draft, 2 tokens |"))
    assert row.rstrip(" |").endswith("identical")  # fp32 greedy: the speculative output is the plain output
    assert float(row.split("|")[4]) > 0  # the shipped draft agrees with its target on some tokens
    assert row.split("|")[10].strip().endswith(" · — · —")  # transformers' verify steps are not timed


def test_a_round_splits_into_draft_verify_and_the_rest():
    plain = SimpleNamespace(decode_tok_s=1000.0)
    # 31 tokens in 11 target steps: the prefill's token, then 10 rounds of 3 over 15 ms of decode (2,000 tok/s)
    counts = dict(tokens_generated=31, target_steps=11, decode_tok_s=2000.0, draft_share_pct=20.0)
    spec = SimpleNamespace(**counts, verify_step_ms=0.8)
    step, draft, verify, rest = round_ms(plain, spec)
    assert (step, draft, verify) == pytest.approx((1.0, 0.3, 0.8)) and rest == pytest.approx(1.5 - 0.3 - 0.8)
    assert round_ms(plain, SimpleNamespace(**counts, verify_step_ms=None))[2:] == (None, None)  # not timed
    assert ideal_speedup(plain, spec) == pytest.approx(3 * 1.0 / (1.0 + 0.3))  # 3 tokens a round, not 31/11


def test_rounds_zero_runs_the_draft_model_alone_with_the_attention_asked_for(capsys):
    main(["--draft-tokens", "2", "--prompts", "1", "--repeats", "1", "--rounds", "0", "--attn", "eager"])
    out = capsys.readouterr().out
    assert "attn eager" in out
    assert "Prompt lookup" not in out and "| prompt lookup |" not in out
    assert any(line.startswith("| draft, 2 tokens |") for line in out.splitlines())
    with pytest.raises(SystemExit, match="attn=flash_attention_2"):  # the setting reaches the runs' configs
        main(["--draft-tokens", "2", "--prompts", "1", "--repeats", "1", "--rounds", "0", "--attn", "flash_attention_2"])
