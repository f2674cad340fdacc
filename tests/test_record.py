"""A run's name: one function for a configuration before it runs and a record after, from the settings schema."""

from __future__ import annotations

import pytest

from playground.config import SETTINGS, ConfigError, RunConfig
from playground.record import RunRecord, config_name, config_settings, run_name

SIDE = [name for name, s in SETTINGS.items() if s.side]
# the settings a side setting needs to act at all (draft tokens count only where something drafts)
COMPANIONS = {
    "kernels": dict(backend="fast", compile="default"),
    "draft_tokens": dict(spec="prompt_lookup"),
    "draft_model": dict(spec="draft"),
    "length_spread_pct": dict(batch_size=2),
    "devices": dict(parallel="tp"),
}
PICK = {"cache_impl": "static"}  # dynamic is what auto picks on transformers: the same run, and the same name


def _other_value(name: str, base: dict) -> object:
    """A value of `name` that is not its default and makes a valid configuration with `base`."""
    setting = SETTINGS[name]
    if name in PICK:
        return PICK[name]
    if setting.type is bool:
        candidates = [not setting.default]
    elif setting.choices:
        candidates = [c for c in setting.choices if c != setting.default]
    elif setting.bounds:
        low, high = setting.bounds
        candidates = [v for v in (setting.default + 1, setting.default - 1) if low <= v <= high]
    else:
        candidates = [f"other-{setting.default}"]
    for value in candidates:
        try:
            RunConfig(**{**base, name: value})
            return value
        except ConfigError:
            continue
    raise AssertionError(f"no valid value of {name} beside {base}")


def _record(config: RunConfig, **effective) -> RunRecord:
    """A record as the engine starts it (engine._blank_record), with what ran."""
    fields = {k: getattr(config, k) for k in ("model", "backend", "quant", "spec", "draft_tokens", "draft_model",
                                              "attn", "use_cache", "cache_impl", "dtype", "compile", "device",
                                              "batch_size", "prompt_tokens", "new_tokens", "mode", "repeats",
                                              "warmup", "label")}
    return RunRecord(**fields, cache_impl_effective=config.cache_impl_effective, config=config.to_dict(), **effective)


@pytest.mark.parametrize("name", SIDE)
def test_two_runs_that_differ_in_one_side_setting_have_different_names(name):
    base = dict(prompt="a", **COMPANIONS.get(name, {}))
    one = RunConfig(**base)
    other = RunConfig(**{**base, name: _other_value(name, base)})
    assert config_name(one) != config_name(other), name
    assert _record(one).name != _record(other).name, name


def test_the_name_reads_short_and_says_only_what_differs_from_the_defaults():
    config = RunConfig(prompt="a", backend="fast", dtype="bf16", quant="int4", compile="reduce-overhead",
                       spec="prompt_lookup", draft_tokens=10)
    assert config_name(config) == "fast · sdpa · bf16 · int4 · compile reduce-overhead · spec prompt_lookup ×10"
    assert config_name(RunConfig(prompt="a")) == "transformers · sdpa · dtype auto"
    assert config_name(RunConfig(prompt="a", use_cache=False)) == "transformers · sdpa · dtype auto · no cache"
    assert config_name(RunConfig(prompt="a", parallel="tp", devices=4)).endswith("tp ×4")


def test_auto_and_the_layout_it_picks_are_one_run_with_one_name():
    assert config_name(RunConfig(prompt="a", cache_impl="dynamic")) == config_name(RunConfig(prompt="a"))
    fast = RunConfig(prompt="a", backend="fast")
    assert config_name(fast.replace(cache_impl="static")) == config_name(fast) == "fast · sdpa · dtype auto"


def test_a_record_is_named_like_its_configuration_with_the_dtype_that_ran():
    config = RunConfig(prompt="a", attn="eager", compile="default")
    assert _record(config).name == config_name(config) == "transformers · eager · dtype auto · compile default"
    assert _record(config, dtype_effective="bf16").name == "transformers · eager · bf16 · compile default"
    assert run_name(config_settings(config)) == config_name(config)  # any mapping of the settings, e.g. a bench row


def test_the_label_wins_and_the_batch_is_left_out_of_the_setting_name():
    eight = _record(RunConfig(prompt="a", batch_size=8, length_spread_pct=50))
    assert eight.name == "transformers · sdpa · dtype auto · batch 8 · spread 50%"
    assert eight.setting_name == "transformers · sdpa · dtype auto · spread 50%"
    assert _record(RunConfig(prompt="a", batch_size=1, length_spread_pct=50)).setting_name == eight.setting_name
    labelled = _record(RunConfig(prompt="a", batch_size=8, label="mine"))
    assert labelled.name == labelled.setting_name == "mine"


def test_a_record_of_an_older_engine_is_named_from_what_it_kept():
    old = RunRecord(model="m", attn="sdpa", use_cache=True, cache_impl="dynamic", dtype="fp32", compile="off",
                    device="cpu", batch_size=1, prompt_tokens=8, new_tokens=4, mode="benchmark", repeats=1, warmup=1)
    assert old.name == "transformers · sdpa · fp32"  # no config kept, no cache_impl_effective: read as asked
    assert old.to_dict()["name"] == old.name and RunRecord.from_dict(old.to_dict()) == old
