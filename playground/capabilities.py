"""What this host can run, and why not when it cannot.

The UI greys out options with these reasons and the engine refuses runs with the same words, so a
user never meets a silent fallback that we could have predicted.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from dataclasses import dataclass

import torch

from playground import parallel, quantization
from playground.attention import REGISTRY, Package
from playground.config import ConfigError, RunConfig

FLASH_PACKAGES = {name: a.package for name, a in REGISTRY.items() if a.package}  # attn -> Package it needs
QUANT_PACKAGES = {p.distribution: p for q in quantization.REGISTRY.values() for p in q.packages}


@dataclass(frozen=True)
class Host:
    cuda: bool
    device_name: str
    capability: tuple[int, int] | None
    bf16: bool
    packages: dict[str, str | None]  # distribution -> version or None
    gpus: int = 0  # CUDA GPUs visible to torch

    def resolve_device(self, requested: str) -> str:
        if requested == "auto":
            return "cuda" if self.cuda else "cpu"
        return requested

    def resolve_dtype(self, requested: str, device: str) -> str:
        if requested != "auto":
            return requested
        if device == "cuda":
            return "bf16" if self.bf16 else "fp16"
        return "fp32"


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def host() -> Host:
    cuda = torch.cuda.is_available()
    packages = {dist: _version(dist) for dist in [p.distribution for p in FLASH_PACKAGES.values()] + list(QUANT_PACKAGES)}
    if cuda:
        return Host(
            cuda=True,
            device_name=torch.cuda.get_device_name(0),
            capability=torch.cuda.get_device_capability(0),
            bf16=torch.cuda.is_bf16_supported(),
            packages=packages,
            gpus=torch.cuda.device_count(),
        )
    return Host(cuda=False, device_name="cpu", capability=None, bf16=True, packages=packages)


def attention_unavailable(attn: str, device: str, dtype: str, h: Host) -> str | None:
    """Why `attn` cannot run on this device and dtype, or None when it can (the limits are its registry entry's)."""
    a = REGISTRY[attn]
    if dtype not in a.dtypes_on(device):
        return f"{attn} needs {' or '.join(a.dtypes_on(device))}"
    if device not in a.devices:
        return f"{attn} needs a CUDA GPU"
    return (_too_old(attn, a.min_capability, device, h) or _too_new(attn, a.min_capability, a.max_capability, device, h)
            or _missing(a.package, h))


def _cc(capability: tuple[int, int]) -> str:
    return "{}.{}".format(*capability)


def _too_old(what: str, min_capability: tuple[int, int] | None, device: str, h: Host) -> str | None:
    if device == "cuda" and min_capability and h.capability is not None and h.capability < min_capability:
        return f"{what} needs compute capability {_cc(min_capability)}+, {h.device_name} has {_cc(h.capability)}"
    return None


def _too_new(what: str, min_capability: tuple[int, int] | None, max_capability: tuple[int, int] | None, device: str,
             h: Host) -> str | None:
    """Kernels written for one architecture's instructions do not run on a later one (FA3 on Blackwell)."""
    if device == "cuda" and max_capability and h.capability is not None and h.capability > max_capability:
        span = _cc(max_capability) if min_capability in (None, max_capability) else \
            f"{_cc(min_capability)} to {_cc(max_capability)}"
        return f"{what} has kernels only for compute capability {span}, {h.device_name} has {_cc(h.capability)}"
    return None


def _missing(package: Package | None, h: Host) -> str | None:
    if not package:
        return None
    version = h.packages.get(package.distribution)
    if version is not None and package.fits and not version.startswith(package.fits):
        return f"{package.distribution} {version} is installed, {package.misfit}: {package.install}"
    if version is None or importlib.util.find_spec(package.module) is None:
        return f"{package.distribution} not installed: {package.install}"
    return None


def quantization_unavailable(quant: str, device: str, dtype: str, h: Host) -> str | None:
    """Why `quant` cannot run on this device and dtype, or None when it can (the limits are its registry entry's)."""
    q = quantization.REGISTRY[quant]
    if device not in q.devices:
        return f"{quant} needs a CUDA GPU"
    if dtype not in q.dtypes:
        return f"{quant} needs {' or '.join(q.dtypes)}"
    return _too_old(quant, q.min_capability, device, h) or next(filter(None, (_missing(p, h) for p in q.packages)), None)


def check(config: RunConfig, h: Host | None = None) -> tuple[str, str]:
    """Refuse what this host cannot run; return the effective (device, dtype)."""
    h = h or host()
    device = h.resolve_device(config.device)
    if device == "cuda" and not h.cuda:
        raise ConfigError("device=cuda but no CUDA GPU is visible to torch here; use device cpu or auto")
    dtype = h.resolve_dtype(config.dtype, device)
    if device == "cuda" and dtype == "bf16" and not h.bf16:
        raise ConfigError(f"dtype=bf16 is not supported by {h.device_name}; use fp16")
    reason = attention_unavailable(config.attn, device, dtype, h)
    if reason:
        raise ConfigError(f"attn={config.attn} cannot run here: {reason}")
    reason = quantization_unavailable(config.quant, device, dtype, h)
    if reason:
        raise ConfigError(f"quant={config.quant} cannot run here: {reason}")
    reason = quantization.refusal(config.quant, config.backend)
    if reason:
        raise ConfigError(f"quant={config.quant} does not run on backend={config.backend} yet: {reason}")
    reason = parallel.unavailable(config.parallel, config.devices, device, h.gpus)
    if reason:
        raise ConfigError(f"parallel={config.parallel} cannot run here: {reason}")
    return device, dtype
