"""The batching benchmark: its limit search on made-up probes, and a CPU smoke run of the whole sweep."""

import pytest

from benchmarks.batching import largest_batch, main
from playground.record import RunRecord


def probe_that_fits(limit: int):
    def probe(batch: int) -> RunRecord:
        record = RunRecord(model="m", attn="sdpa", use_cache=True, cache_impl="static", dtype="bf16", compile="off",
                           device="cuda", batch_size=batch, prompt_tokens=8, new_tokens=4, mode="benchmark",
                           repeats=1, warmup=1)
        if batch > limit:
            record.status, record.reason = "error", "the GPU ran out of memory while running repeat 1/1"
        return record
    return probe


@pytest.mark.parametrize("limit, start", [(37, 8), (64, 64), (1, 4), (1000, 64)])
def test_the_search_finds_the_largest_batch_that_runs(limit, start):
    found, tried = largest_batch(probe_that_fits(limit), start)
    assert found == limit
    assert len(tried) <= 2 * limit.bit_length() + 2  # doubling, then bisection


@pytest.mark.parametrize("limit", [1000, 1234, 3000])
def test_a_tolerant_search_stops_within_its_tolerance_below_the_limit_and_probes_less(limit):
    found, tried = largest_batch(probe_that_fits(limit), 64, tolerance=0.02)
    exact, exact_tried = largest_batch(probe_that_fits(limit), 64)
    assert 0.98 * limit <= found <= limit
    assert len(tried) < len(exact_tried)


def test_the_search_stops_at_a_failure_that_is_not_memory():
    def refused(batch: int) -> RunRecord:
        record = probe_that_fits(10**6)(batch)
        record.status, record.reason = "invalid", "batch_size must be a whole number from 1 to 4096"
        return record
    with pytest.raises(RuntimeError, match="another reason"):
        largest_batch(refused, 8)


def test_a_cpu_sweep_of_uneven_prompts_prints_every_row_its_padding_and_the_prediction(capsys, tmp_path):
    chart = tmp_path / "batching.html"
    main(["--prompt-tokens", "4", "--new-tokens", "3", "--repeats", "1", "--batch-sizes", "1,2", "--device", "cpu",
          "--length-spread", "50", "--chart", str(chart)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("| fast |", "| transformers |"))]
    assert len(rows) == 4 and all("error" not in r and "invalid" not in r for r in rows), out
    padded = {tuple(cell.strip() for cell in r.split("|")[1:4]) for r in rows}  # rows [4, 2] tokens: 2 of 8 padded
    assert padded == {(backend, batch, pct) for backend in ("fast", "transformers")
                      for batch, pct in (("1", "0"), ("2", "25"))}, out
    assert "largest batch: predicted fast" in out and "target" not in out  # the H200 targets print on CUDA only
    assert chart.read_text().count("plotly") > 2
