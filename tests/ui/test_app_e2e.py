"""The launched app driven through gradio_client: `/run` and `/compare` stream, then end with records."""

from __future__ import annotations

import pytest

from conftest import TINY


def client_for(demo):
    from gradio_client import Client

    return Client(demo.local_url, verbose=False, download_files=False)


def test_api_lists_the_named_endpoints(launched):
    demo, _ = launched
    endpoints = client_for(demo).view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {"/run", "/compare"} <= set(endpoints)
    names = [p["parameter_name"] for p in endpoints["/run"]["parameters"]]
    assert names[:7] == ["prompt", "model", "attn", "use_cache", "dtype", "compile", "max_new_tokens"]


def test_run_streams_text_then_the_record(launched):
    demo, store = launched
    job = client_for(demo).submit("Once upon a time", TINY, "sdpa", True, "auto", "off", 12, api_name="/run")
    outputs = [out for out in job]
    final = job.result()
    assert len(outputs) >= 2 and any(o["record"] is None and o["state"] == "running" for o in outputs)
    assert final["state"] == "ok" and final["record"]["status"] == "ok"
    record = final["record"]
    assert 0 < record["tokens_generated"] <= 12
    assert record["ttft_ms"] > 0 and record["config"]["prompt"] == "Once upon a time"
    assert final["text"] == record["output_text"]
    assert store.records()[0].run_id == record["run_id"]
    assert record["name"] == "transformers · sdpa · fp32" == store.records()[0].name  # the run's one name
    history = client_for(demo).predict(api_name="/history")
    assert history["runs"][0]["name"] == record["name"]


def test_run_reports_an_invalid_request_clearly(launched):
    demo, _ = launched
    final = client_for(demo).predict("hi", TINY, "sdpa", True, "auto", "default", 4, "dynamic", api_name="/run")
    assert final["state"] == "invalid" and "cache_impl=static" in final["message"]


def test_compare_runs_a_then_b_and_compares(launched):
    demo, _ = launched
    job = client_for(demo).submit(prompt="The KV cache", model=TINY, a_use_cache=False, b_use_cache=True,
                                  max_new_tokens=8, repeats=1, warmup=0, api_name="/compare")
    outputs = [out for out in job]
    final = job.result()
    assert any(o["A"]["state"] == "running" and o["B"]["state"] == "waiting" for o in outputs)  # A first, B waits
    assert final["A"]["record"]["use_cache"] is False and final["B"]["record"]["use_cache"] is True
    assert final["A"]["record"]["kv_cache_mb"] == 0 and final["B"]["record"]["kv_cache_mb"] > 0
    assert final["A"]["record"]["name"].endswith("no cache") and not final["B"]["record"]["name"].endswith("no cache")
    comparison = final["comparison"]
    assert comparison["identical"] is True and comparison["decode_speedup_b_over_a"] > 0
    assert comparison["decode_beyond_noise"] is None  # one repeat a side: no noise estimate


def test_compare_refuses_a_boolean_sent_as_text_instead_of_running_with_the_cache_on(launched):
    demo, _ = launched
    final = client_for(demo).predict(prompt="hi", model=TINY, a_use_cache=True, b_use_cache="false", max_new_tokens=2,
                                     repeats=1, warmup=0, api_name="/compare")
    for side in ("A", "B"):
        assert final[side]["state"] == "invalid" and final[side]["record"] is None
        assert "b_use_cache must be true or false (a JSON boolean), got 'false'" in final[side]["message"]
    assert final["comparison"] is None


def test_compare_takes_the_figure_its_verdict_is_about_and_refuses_an_unknown_one(launched):
    demo, _ = launched
    client = client_for(demo)
    final = client.predict(prompt="hi", model=TINY, max_new_tokens=2, repeats=2, warmup=0, figure="ttft",
                           api_name="/compare")
    assert final["comparison"]["interleaved"] is True and final["comparison"]["ttft_call"] in (
        "better", "worse", "same", "unsure")
    wrong = client.predict(prompt="hi", model=TINY, max_new_tokens=2, repeats=1, warmup=0, figure="speed",
                           api_name="/compare")
    assert wrong["A"]["state"] == "invalid" and "figure must be one of ttft, decode, throughput, got 'speed'" in (
        wrong["A"]["message"])


def test_only_the_documented_endpoints_are_public(launched):
    demo, _ = launched
    client = client_for(demo)
    api = client.view_api(print_info=False, return_format="dict")
    assert set(api["named_endpoints"]) == {"/run", "/compare", "/history"} and not api["unnamed_endpoints"]
    clear = next(i for i, dep in enumerate(demo.config["dependencies"])
                 if any(demo.blocks[t[0]].value == "Delete all runs" for t in dep["targets"] if t[0] in demo.blocks))
    with pytest.raises(ValueError, match=f"Invalid function index: {clear}"):  # the page's clear-history handler is not callable by clients
        client.predict(fn_index=clear)
