"""The one-click comparisons adapt to the host they run on."""

from __future__ import annotations

import pytest

from playground import capabilities
from playground.presets import DEFAULT_MODEL, PRESETS
from playground.ui.settings import SharedSettings, check_column, comparisons, context_of, make_config


def gpu_host(flash_attn: str | None) -> capabilities.Host:
    packages = {p.distribution: None for p in capabilities.FLASH_PACKAGES.values()} | {"flash-attn": flash_attn}
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


def test_kernel_choice_preset_compiles_the_fast_step_both_ways_where_steps_compile(monkeypatch):
    monkeypatch.setattr(capabilities, "host", lambda: gpu_host(None))
    preset = comparisons()["Kernel choice, fast backend: fixed vs tuned"]
    assert (preset.a.kernels, preset.b.kernels) == ("fixed", "tuned")
    shared = SharedSettings(model=DEFAULT_MODEL, **preset.workload(context_of(DEFAULT_MODEL)))
    configs = [make_config(shared, column) for column in (preset.a, preset.b)]  # the config refuses neither
    assert {(c.backend, c.compile) for c in configs} == {("fast", "reduce-overhead")}
    monkeypatch.setattr(capabilities, "host", lambda: capabilities.Host(False, "cpu", None, False, {}))
    assert "Kernel choice, fast backend: fixed vs tuned" not in comparisons()  # nothing compiled, nothing tuned


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


def test_importing_the_ui_loads_no_torch():
    """The page's code runs without torch until a run or a host check needs it (the engine is imported lazily)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import playground.ui, sys; print('torch' in sys.modules)"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_per_side_controls_api_parameters_and_columns_come_from_the_schema():
    import dataclasses
    import inspect

    from playground.config import SETTINGS
    from playground.printers import SETTING_COLUMNS
    from playground.ui.api import make_endpoints
    from playground.ui.events import Playground
    from playground.ui.settings import ColumnSettings

    side = [name for name, s in SETTINGS.items() if s.side]
    assert [f.name for f in dataclasses.fields(ColumnSettings)] == side
    assert {f.name: f.default for f in dataclasses.fields(ColumnSettings)} == {n: SETTINGS[n].default for n in side}
    _, compare, _ = make_endpoints(Playground(None, DEFAULT_MODEL))
    params = inspect.signature(compare).parameters
    for name in side:
        assert params[f"a_{name}"].default == params[f"b_{name}"].default == SETTINGS[name].default
        assert params[f"a_{name}"].annotation is SETTINGS[name].type
    assert {title for _, title in SETTING_COLUMNS} >= {SETTINGS[name].column for name in side}


def test_quantization_comparison_shows_its_refusal_before_run_on_cpu():
    """Like flash_attention_2: int4 cannot run on a CPU, and B says why before anything loads."""
    from playground import capabilities

    if capabilities.host().cuda:
        pytest.skip("the refusal is a CPU host's")
    preset = comparisons()["Quantization, fast backend: bf16 vs int4 (tinygemm)"]
    shared = SharedSettings(model=DEFAULT_MODEL, **preset.workload(context_of(DEFAULT_MODEL)))
    assert check_column(shared, preset.a)[0]
    ok, why = check_column(shared, preset.b)
    assert not ok and "int4 needs a CUDA GPU" in why


def test_the_pre_run_check_says_how_many_sequences_fit_and_advises_where_few_do():
    from playground.config import RunConfig
    from playground.ui.settings import ColumnSettings, fit_note

    ok, why = check_column(SharedSettings(model=DEFAULT_MODEL), ColumnSettings())
    assert ok and "sequences of this prompt and" in why and "queue requests" not in why
    few = fit_note(RunConfig(prompt="hi"), 3)
    assert "about 3 sequences" in few and "cap the context" in few and "queue requests" in few
