"""The one-click comparisons adapt to the host they run on."""

from __future__ import annotations

import pytest

from playground import capabilities
from playground.ui.settings import comparisons


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
