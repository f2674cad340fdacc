"""The tuning-spread benchmark reads the tuner's verdicts, refuses unknown settings and summarizes processes."""

import logging

import pytest

from benchmarks.tuning_spread import TUNER_LOG, TunerLog, chosen_config, overrides, setting_options, summary_rows

VERDICT = ("triton_red_fused_mm_0: Improve from XBLOCK: 1, R0_BLOCK: 2048, num_warps: 16, num_ctas: 1, "
           "num_stages: 1, maxnreg: None 0.031200 -> XBLOCK: 2, R0_BLOCK: 1024, num_warps: 8, num_ctas: 1, "
           "num_stages: 1, maxnreg: None 0.024800, 1.258x")


def test_the_chosen_config_is_what_the_walk_ended_on():
    assert chosen_config(VERDICT) == "XBLOCK: 2, R0_BLOCK: 1024, num_warps: 8, num_ctas: 1, num_stages: 1, maxnreg: None"


def test_the_handler_keeps_only_verdicts_from_the_tuners_logger():
    log, tuner = TunerLog(), logging.getLogger(TUNER_LOG)
    tuner.addHandler(log)
    tuner.setLevel(logging.DEBUG)
    try:
        tuner.debug("Try config %s", "XBLOCK: 4")
        tuner.debug("%s: Improve from %s", "triton_red_fused_mm_0", "...")
    finally:
        tuner.removeHandler(log)
    assert log.verdicts == ["triton_red_fused_mm_0: Improve from ..."]


def test_settings_join_and_an_unknown_one_is_refused_by_name():
    assert overrides("all-directions+radius-2") == {"coordinate_descent_check_all_directions": True,
                                                     "coordinate_descent_search_radius": 2}
    assert overrides("step") == {}
    step, fixed = setting_options("step"), setting_options("fixed+all-directions")  # fixed: the product's kernel choice
    assert fixed == {**step, "deterministic": True, "coordinate_descent_check_all_directions": True}
    with pytest.raises(SystemExit, match="'radius-3'"):
        overrides("all-directions+radius-3")


def test_rows_count_spread_and_distinct_configs_over_finished_processes_only():
    def process(us, config):
        return {"head": {"us": us, "configs": [config], "candidates_timed": 20}}

    results = {"step": [process(122.0, "a"), process(183.0, "b"), {"failed": ["killed"]}],
               "all-directions": [process(120.0, "c"), process(121.2, "c")]}
    rows = {r["setting"]: r for r in summary_rows(results, ["head"])}
    assert rows["step"]["spread"] == pytest.approx(183 / 122 - 1) and rows["step"]["distinct_configs"] == 2
    assert rows["all-directions"]["spread"] == pytest.approx(0.01) and rows["all-directions"]["distinct_configs"] == 1
