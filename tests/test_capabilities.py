"""What each GPU generation is offered, from faked device properties: workstation Blackwell (sm_120, ZeroGPU's
RTX PRO 6000) runs FA2-class kernels but not FA3 or FA4, which are built for other architectures' instructions."""

import pytest

from playground import capabilities
from playground.attention import NAMES
from playground.config import ConfigError, RunConfig


def gpu(name: str, capability: tuple[int, int]) -> capabilities.Host:
    """Every flash and quantization package installed, so only the device decides."""
    packages = {p.distribution: "1.0" for p in capabilities.FLASH_PACKAGES.values()} | {
        dist: "1.0" for dist in capabilities.QUANT_PACKAGES}
    return capabilities.Host(cuda=True, device_name=name, capability=capability, bf16=True, packages=packages)


BLACKWELL_WS = gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0))


@pytest.fixture(autouse=True)
def importable_flash_packages(monkeypatch):
    """find_spec sees every flash package, as on a host that has them."""
    real = capabilities.importlib.util.find_spec
    modules = {p.module for p in [*capabilities.FLASH_PACKAGES.values(), *capabilities.QUANT_PACKAGES.values()]}
    monkeypatch.setattr(capabilities.importlib.util, "find_spec", lambda name, *a: object() if name in modules
                        else real(name, *a))


@pytest.mark.parametrize("host, refused", [
    (gpu("A100", (8, 0)), {"flash_attention_3": "needs compute capability 9.0+, A100 has 8.0",
                           "flash_attention_4": "needs compute capability 9.0+, A100 has 8.0"}),
    (gpu("H200", (9, 0)), {}),
    (gpu("B200", (10, 0)), {"flash_attention_3": "has kernels only for compute capability 9.0, B200 has 10.0"}),
    (gpu("B300", (10, 3)), {"flash_attention_3": "has kernels only for compute capability 9.0, B300 has 10.3",
                            "flash_attention_4": "has kernels only for compute capability 9.0 to 10.0, B300 has 10.3"}),
    (BLACKWELL_WS, {"flash_attention_3": "has kernels only for compute capability 9.0, NVIDIA RTX PRO 6000 "
                                         "Blackwell Server Edition has 12.0",
                    "flash_attention_4": "has kernels only for compute capability 9.0 to 10.0, NVIDIA RTX PRO 6000 "
                                         "Blackwell Server Edition has 12.0"}),
])
def test_attention_offered_per_gpu_generation(host, refused):
    reasons = {attn: capabilities.attention_unavailable(attn, "cuda", "bf16", host) for attn in NAMES}
    assert {attn: why.removeprefix(f"{attn} ") for attn, why in reasons.items() if why} == refused


def test_blackwell_workstation_runs_bf16_fp8_and_flash_attention_2_and_refuses_fa3_with_the_reason():
    assert capabilities.check(RunConfig(prompt="hi", attn="flash_attention_2", dtype="bf16"), BLACKWELL_WS) == (
        "cuda", "bf16")
    assert capabilities.check(RunConfig(prompt="hi", dtype="auto"), BLACKWELL_WS) == ("cuda", "bf16")
    assert capabilities.quantization_unavailable("fp8", "cuda", "bf16", BLACKWELL_WS) is None
    with pytest.raises(ConfigError, match=r"attn=flash_attention_3 cannot run here: flash_attention_3 has kernels "
                                          r"only for compute capability 9\.0, NVIDIA RTX PRO 6000"):
        capabilities.check(RunConfig(prompt="hi", attn="flash_attention_3", dtype="bf16"), BLACKWELL_WS)
