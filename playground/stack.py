"""Does this deployment run a stack the playground supports? Checked once at start in hosted mode.

A Space resolves its own packages, and a mismatch fails late and obscurely: ZeroGPU runs only a few
torch and Python versions, a torch build without kernels for the GPU dies on the first run with
"no kernel image", a flash-attn wheel built for another torch fails on import, and without the
`spaces` package a ZeroGPU Space never gets a GPU. `problems` names each mismatch with its fix, so
the app can say it on the page and in the console before a visitor meets it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import platform
from dataclasses import dataclass

from playground.hosting import ZERO_GPU_PYTHON, ZERO_GPU_TORCH


@dataclass(frozen=True)
class Stack:
    python: str  # "3.12.12"
    torch: str  # "2.11.0+cu128"
    cuda: str | None  # the CUDA torch was built for; None for a CPU build
    arch_list: tuple[str, ...]  # what torch has kernels for: "sm_90", "compute_90" (PTX)
    capability: tuple[int, int] | None  # the GPU's, None without one
    spaces: str | None  # the `spaces` package's version, None when missing
    flash_attn: str | None  # flash-attn's version, None when missing
    flash_attn_error: str | None = None  # why an installed flash-attn does not import


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe() -> Stack:
    """This process's stack. On ZeroGPU, CUDA is emulated outside `spaces.GPU` calls, so the capability
    read here is the one `spaces` reports for the GPU the calls will get."""
    import torch

    cuda = torch.cuda.is_available()
    flash_attn = _version("flash-attn")
    error = None
    if flash_attn:
        try:
            importlib.import_module("flash_attn")
        # an ABI mismatch is an ImportError naming the undefined symbol; anything else is reported too, since a
        # start-up probe must not stop the app
        except Exception as exc:  # noqa: BLE001
            error = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return Stack(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
                 arch_list=tuple(torch.cuda.get_arch_list()) if cuda else (),
                 capability=torch.cuda.get_device_capability(0) if cuda else None,
                 spaces=_version("spaces"), flash_attn=flash_attn, flash_attn_error=error)


def has_kernels_for(arch_list: tuple[str, ...], capability: tuple[int, int]) -> bool:
    """True when torch carries code this GPU runs: a cubin of the same major and no newer minor, or PTX of an
    older or equal capability (the driver compiles it)."""
    major, minor = capability
    for arch in arch_list:
        kind, _, number = arch.partition("_")
        digits = "".join(ch for ch in number if ch.isdigit())  # "90a" -> "90": the arch-specific variants
        if len(digits) < 2:
            continue
        built = (int(digits[:-1]), int(digits[-1]))
        if kind == "sm" and built[0] == major and built[1] <= minor and not number.endswith("a"):
            return True
        if kind == "compute" and built <= capability:
            return True
    return False


def problems(stack: Stack, zero_gpu: bool) -> list[str]:
    """Each way `stack` does not match what the playground needs here, with the fix; [] when it matches."""
    found = []
    base = stack.torch.split("+")[0]
    if zero_gpu:
        if stack.spaces is None:
            found.append("the `spaces` package is missing, so runs never get a ZeroGPU GPU: add `spaces` to "
                         "requirements.txt")
        if base not in ZERO_GPU_TORCH:
            found.append(f"torch {stack.torch} is not one ZeroGPU runs ({', '.join(ZERO_GPU_TORCH)}): pin one in "
                         "pre-requirements.txt")
        if stack.python not in ZERO_GPU_PYTHON:
            found.append(f"Python {stack.python} is not one ZeroGPU runs ({', '.join(ZERO_GPU_PYTHON)}): set "
                         "`python_version` in the README front matter")
        if stack.cuda is None:
            found.append(f"torch {stack.torch} is a CPU build; ZeroGPU needs a CUDA build")
    if stack.capability and stack.arch_list and not has_kernels_for(stack.arch_list, stack.capability):
        cc = "{}.{}".format(*stack.capability)
        found.append(f"torch {stack.torch} has no kernels for this GPU (compute capability {cc}; it has "
                     f"{', '.join(stack.arch_list)}): install a torch build for a newer CUDA (sm_120 needs 12.8+)")
    if stack.flash_attn and stack.flash_attn_error:
        py = "".join(stack.python.split(".")[:2])
        found.append(f"flash-attn {stack.flash_attn} is installed but does not load ({stack.flash_attn_error}): its "
                     f"wheel must be the one built for torch {'.'.join(base.split('.')[:2])}, CUDA "
                     f"{(stack.cuda or '?').split('.')[0]} and cp{py}")
    return found
