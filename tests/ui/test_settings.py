"""The one-click comparisons adapt to the host they run on."""

from __future__ import annotations

import pytest

from playground import capabilities
from playground.presets import DEFAULT_MODEL, PRESETS
from playground.ui.settings import SharedSettings, check_column, comparisons, context_of


def gpu_host(flash_attn: str | None) -> capabilities.Host:
    packages = {dist: None for dist, _, _ in capabilities.FLASH_PACKAGES.values()} | {"flash-attn": flash_attn}
    return capabilities.Host(cuda=True, device_name="NVIDIA H200", capability=(9, 0), bf16=True, packages=packages)


@pytest.mark.parametrize("flash_attn, expected", [("2.8.3", "flash_attention_2"), (None, "sdpa")])
def test_fast_backend_preset_takes_flash_attn_where_it_runs(monkeypatch, tmp_path, flash_attn, expected):
    monkeypatch.setattr(capabilities, "host", lambda: gpu_host(flash_attn))
    if flash_attn:  # an importable (empty) flash_attn package: this host has no GPU to run the real one
        (tmp_path / "flash_attn").mkdir()
        (tmp_path / "flash_attn" / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(tmp_path))
    preset = comparisons()["Backend: transformers vs fast"]
    assert (preset.a.backend, preset.a.attn) == ("transformers", "sdpa")
    assert (preset.b.backend, preset.b.attn, preset.b.compile) == ("fast", expected, "reduce-overhead")
    assert ("flash_attention_2" in preset.note) == (expected == "flash_attention_2")


def test_fast_backend_preset_on_cpu_runs_eager_with_sdpa():
    preset = comparisons()["Backend: transformers vs fast"]
    if capabilities.host().cuda:
        pytest.skip("CPU host only")
    assert (preset.b.backend, preset.b.attn, preset.b.compile) == ("fast", "sdpa", "off")


@pytest.mark.parametrize("model", list(PRESETS))
def test_every_comparison_fits_every_presets_context(model):
    """The run's context check (prompt + new tokens within the model's context) passes for every preset;
    what remains may only be this host's limits (no GPU for flash-attn, not enough memory)."""
    context = context_of(model)
    assert context
    for comparison in comparisons().values():
        workload = comparison.workload(context)
        for column in (comparison.a, comparison.b):
            ok, why = check_column(SharedSettings(model=model, **workload), column)
            assert ok or "context" not in why, (comparison.name, why)
        if comparison.long_prompt:
            assert workload["prompt_tokens"] + workload["new_tokens"] <= context


def test_long_prompt_is_cut_to_the_default_models_context():
    long = comparisons()["Attention: eager vs sdpa (long context)"].workload(context_of(DEFAULT_MODEL))
    assert context_of(DEFAULT_MODEL) == 2048
    assert (long["synthetic"], long["prompt_tokens"] + long["new_tokens"]) == (True, 2048)


def test_the_pre_run_check_refuses_what_the_run_refuses():
    over = SharedSettings(model=DEFAULT_MODEL, synthetic=True, prompt_tokens=2048, new_tokens=32)
    ok, why = check_column(over, comparisons()["dtype: fp32 vs bf16"].a)
    assert not ok and "exceeds the model's context of 2048 tokens" in why
    text = SharedSettings(model=DEFAULT_MODEL, prompt="word " * 3000, new_tokens=8)
    ok, why = check_column(text, comparisons()["dtype: fp32 vs bf16"].a)
    assert not ok and "exceeds the model's context" in why
