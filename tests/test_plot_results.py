"""scripts/plot_results.py reads both record formats the project commits, and keeps two runs of one setting apart."""

import json

from playground.record import RunRecord
from scripts.plot_results import load


def record(backend: str, batch: int, status: str = "ok") -> dict:
    rec = RunRecord(model="m", attn="sdpa", use_cache=True, cache_impl="static", dtype="bf16", compile="off",
                    device="cuda", batch_size=batch, prompt_tokens=8, new_tokens=4, mode="benchmark", repeats=1,
                    warmup=1, backend=backend)
    rec.status, rec.dtype_effective = status, "bf16"
    return rec.to_dict()


def test_a_benchmark_json_and_a_jsonl_file_both_load_and_failed_runs_are_left_out(tmp_path):
    bench = tmp_path / "batching.json"
    bench.write_text(json.dumps({"records": [record("fast", 8), record("fast", 64, "error")], "env": {}}))
    lines = tmp_path / "runs.jsonl"
    lines.write_text("\n".join(json.dumps(record("transformers", b)) for b in (8, 64)))
    loaded = load([bench, lines], labelled=False)
    assert [(r.backend, r.batch_size) for r in loaded] == [("fast", 8), ("transformers", 8), ("transformers", 64)]
    assert {r.name.split(" · ")[-1] for r in loaded} == {"batching", "runs"}  # each series names its file


def test_the_article_charts_label_runs_by_their_levers(tmp_path):
    lines = tmp_path / "runs.jsonl"
    lines.write_text(json.dumps(record("transformers", 1)))
    [loaded] = load([lines])
    assert loaded.name == "sdpa bf16 static P8"
