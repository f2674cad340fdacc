"""The speculative benchmark on CPU: a target given as a model folder, drafted for by the shipped draft."""

from benchmarks.speculative import main
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
