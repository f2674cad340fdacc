"""The attention registry is consistent with everything that reads it: kernels, backends, config and host checks."""

import pytest

from playground import attention, backends, capabilities, kernels, roofline
from playground.attention import REGISTRY
from playground.config import ATTENTIONS, ConfigError, RunConfig

KNOWN_FAMILIES = {family for family, _ in kernels.FAMILY_PATTERNS} | {"eager"}


@pytest.mark.parametrize("name", ATTENTIONS)
def test_every_entry_is_consistent(name):
    a = REGISTRY[name]
    assert a.name == name and a.families and a.families <= KNOWN_FAMILIES
    assert set(a.backends) <= set(backends.NAMES) and set(a.filled_static) <= set(a.backends)
    assert set(a.dtypes_on("cuda")) <= set(a.dtypes) and set(a.devices) <= {"cpu", "cuda"}
    assert (a.sdpa_backend is not None) == name.startswith("sdpa:") and (a.transformers == "sdpa") == name.startswith("sdpa")


def test_every_backend_takes_an_attention_and_transformers_takes_them_all():
    assert all(attention.taken_by(b) for b in backends.NAMES)
    assert attention.taken_by("transformers") == ATTENTIONS


def test_forced_sdpa_backends_load_plain_sdpa():
    assert RunConfig(prompt="a", attn="sdpa:math").transformers_attn == "sdpa"
    assert RunConfig(prompt="a", attn="sdpa:math").sdpa_backend == "math"
    assert RunConfig(prompt="a", attn="flash_attention_2", dtype="bf16").sdpa_backend is None
    assert attention.loads_for("fast") == ("eager", "sdpa", "flash_attention_2")


def test_listing_names_the_forced_sdpa_backends_once():
    assert attention.listed(attention.taken_by("fast")) == "eager, sdpa, sdpa:<backend> or flash_attention_2"
    assert attention.listed(("eager",)) == "eager"


def test_flash_requests_are_the_entries_proven_by_flash_kernels():
    assert set(attention.FLASH_REQUESTS) == {"sdpa:flash", "flash_attention_2", "flash_attention_3", "flash_attention_4"}


@pytest.mark.parametrize("name", [n for n, a in REGISTRY.items() if "fp32" not in a.dtypes])
def test_an_entry_without_fp32_kernels_is_refused_in_fp32_before_the_host_is_asked(name):
    with pytest.raises(ConfigError, match="runs only in fp16 or bf16"):
        RunConfig(prompt="a", attn=name, dtype="fp32")


def test_host_checks_follow_the_entry():
    gpu = capabilities.Host(cuda=True, device_name="A100", capability=(8, 0), bf16=True,
                            packages={p.distribution: None for p in capabilities.FLASH_PACKAGES.values()})
    assert capabilities.attention_unavailable("sdpa:flash", "cpu", "fp32", gpu) is None  # CPU's flash kernel takes fp32
    assert capabilities.attention_unavailable("sdpa:flash", "cuda", "fp32", gpu) == "sdpa:flash needs fp16 or bf16"
    assert capabilities.attention_unavailable("sdpa:cudnn", "cpu", "fp32", gpu) == "sdpa:cudnn needs a CUDA GPU"
    assert "compute capability 9.0+" in capabilities.attention_unavailable("flash_attention_3", "cuda", "bf16", gpu)
    assert capabilities.attention_unavailable("flash_attention_4", "cpu", "fp32", gpu) == "flash_attention_4 needs fp16 or bf16"


def test_only_the_entries_filled_static_backends_read_the_filled_static_cache():
    for name, a in REGISTRY.items():
        for backend in a.backends:
            expected = "filled" if backend in a.filled_static else "allocated"
            assert roofline.kv_read(True, "static", backend, name) == expected
