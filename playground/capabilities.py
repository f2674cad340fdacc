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

from playground.config import ConfigError, RunConfig

FLASH_ATTN_INSTALL = "pip install flash-attn --no-build-isolation"
# Distribution names transformers looks for, and the minimum compute capability of each.
FLASH_PACKAGES = {
    "flash_attention_2": ("flash-attn", "flash_attn", (8, 0)),
    "flash_attention_3": ("flash-attn-3", "flash_attn_interface", (9, 0)),
    "flash_attention_4": ("flash-attn-4", "flash_attn", (9, 0)),
}


@dataclass(frozen=True)
class Host:
    cuda: bool
    device_name: str
    capability: tuple[int, int] | None
    bf16: bool
    packages: dict[str, str | None]  # distribution -> version or None

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
    packages = {dist: _version(dist) for dist, _, _ in FLASH_PACKAGES.values()}
    if cuda:
        return Host(
            cuda=True,
            device_name=torch.cuda.get_device_name(0),
            capability=torch.cuda.get_device_capability(0),
            bf16=torch.cuda.is_bf16_supported(),
            packages=packages,
        )
    return Host(cuda=False, device_name="cpu", capability=None, bf16=True, packages=packages)


def attention_unavailable(attn: str, device: str, dtype: str, h: Host) -> str | None:
    """Why `attn` cannot run on this device and dtype, or None when it can."""
    if dtype == "fp32" and (attn in FLASH_PACKAGES or (device == "cuda" and attn in ("sdpa:flash", "sdpa:cudnn"))):
        return f"{attn} needs fp16 or bf16"
    if attn in ("sdpa:efficient", "sdpa:cudnn", *FLASH_PACKAGES) and device != "cuda":
        return f"{attn} needs a CUDA GPU"
    if attn in FLASH_PACKAGES:
        dist, module, min_cc = FLASH_PACKAGES[attn]
        if h.capability is not None and h.capability < min_cc:
            return f"{attn} needs compute capability {min_cc[0]}.{min_cc[1]}+, {h.device_name} has {h.capability[0]}.{h.capability[1]}"
        if h.packages.get(dist) is None or importlib.util.find_spec(module) is None:
            hint = FLASH_ATTN_INSTALL if attn == "flash_attention_2" else f"pip install {dist}"
            return f"{dist} not installed: {hint}"
    if attn in ("sdpa:flash", "sdpa:cudnn") and device == "cuda" and h.capability is not None and h.capability < (8, 0):
        return f"{attn} needs compute capability 8.0+, {h.device_name} has {h.capability[0]}.{h.capability[1]}"
    return None


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
    return device, dtype
