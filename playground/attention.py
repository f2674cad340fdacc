"""Every attention implementation a run can ask for, as data: the one place that knows their names.

An entry says what transformers is asked to load, which SDPA backend is forced (if any), where and in
which dtypes it runs, what it needs from the host, which kernel families prove it ran and which
generation backends take it. The config's choices and refusals, the host checks, the kernel proof,
the UI's choices and the backends all read it, so a new implementation is one entry here.

No torch at import: the config and the UI read this module too.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import NamedTuple

DTYPES = ("fp32", "fp16", "bf16")
HALF = ("fp16", "bf16")
SDPA_FAMILIES = frozenset({"sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math"})
FLASH_FAMILIES = frozenset({"flash-attn", "sdpa-flash"})  # kernels that are FlashAttention, from either source
EVERY_BACKEND = ("transformers", "fast")
GENERATE_ONLY = ("transformers",)


class Package(NamedTuple):
    distribution: str  # what pip installs and importlib.metadata reports
    module: str  # what transformers imports
    install: str  # the command that gets it
    fits: tuple[str, ...] = ()  # version prefixes known to work here ("": any); another installed one is refused
    misfit: str = ""  # why another version does not work, said with the refusal


@dataclass(frozen=True)
class Attention:
    name: str  # what a run asks for
    transformers: str  # the `attn_implementation` transformers loads
    families: frozenset[str]  # kernel families (playground.kernels) whose presence proves it ran
    sdpa_backend: str | None = None  # the torch SDPBackend forced around generate, by its short name
    devices: tuple[str, ...] = ("cpu", "cuda")
    dtypes: tuple[str, ...] = DTYPES  # the dtypes its kernels take on any device
    cuda_dtypes: tuple[str, ...] | None = None  # narrower on CUDA, where it differs
    min_capability: tuple[int, int] | None = None  # lowest CUDA compute capability
    max_capability: tuple[int, int] | None = None  # highest, for kernels written for one architecture's instructions
    package: Package | None = None  # an extra distribution transformers needs for it
    backends: tuple[str, ...] = GENERATE_ONLY  # the generation backends (playground.backends) that take it
    filled_static: tuple[str, ...] = ()  # backends whose decode over a static cache reads only the filled part

    def dtypes_on(self, device: str) -> tuple[str, ...]:
        return (self.cuda_dtypes or self.dtypes) if device == "cuda" else self.dtypes


def _sdpa(backend: str, family: str, **needs) -> Attention:
    return Attention(f"sdpa:{backend}", "sdpa", frozenset({family}), sdpa_backend=backend, backends=EVERY_BACKEND,
                     **needs)


def _flash_attn(version: int, package: Package, min_capability: tuple[int, int], **more) -> Attention:
    return Attention(f"flash_attention_{version}", f"flash_attention_{version}", frozenset({"flash-attn"}),
                     devices=("cuda",), dtypes=HALF, min_capability=min_capability, package=package, **more)


# FA2 is Ampere-style mma.sync code, so it runs on every later GPU its wheel was built for, workstation
# Blackwell (sm_120, the ZeroGPU RTX PRO 6000) included. FA3 uses Hopper's wgmma and FA4 Hopper's and
# datacenter Blackwell's (sm_100) instructions, which sm_103 and sm_120 lack.


FLASH_ATTN_INSTALL = "pip install flash-attn --no-build-isolation"
REGISTRY: dict[str, Attention] = {a.name: a for a in (
    Attention("eager", "eager", frozenset({"eager"}), backends=EVERY_BACKEND),
    Attention("sdpa", "sdpa", SDPA_FAMILIES, backends=EVERY_BACKEND),
    _sdpa("flash", "sdpa-flash", cuda_dtypes=HALF, min_capability=(8, 0)),
    _sdpa("efficient", "sdpa-efficient", devices=("cuda",)),
    _sdpa("cudnn", "sdpa-cudnn", devices=("cuda",), cuda_dtypes=HALF, min_capability=(8, 0)),
    _sdpa("math", "sdpa-math"),
    _flash_attn(2, Package("flash-attn", "flash_attn", FLASH_ATTN_INSTALL), (8, 0), backends=EVERY_BACKEND,
                filled_static=("fast",)),  # the fast backend decodes with flash-attn's cache_seqlens
    _flash_attn(3, Package("flash-attn-3", "flash_attn_interface", "pip install flash-attn-3"), (9, 0),
                max_capability=(9, 0)),
    _flash_attn(4, Package("flash-attn-4", "flash_attn", "pip install flash-attn-4"), (9, 0),
                max_capability=(10, 0)),
    Attention("flex_attention", "flex_attention", frozenset({"flex"})),
)}
NAMES = tuple(REGISTRY)
FLASH_REQUESTS = tuple(name for name, a in REGISTRY.items() if a.families <= FLASH_FAMILIES)  # proven by a flash kernel


def taken_by(backend: str) -> tuple[str, ...]:
    """The implementations `backend` takes, in registry order."""
    return tuple(name for name, a in REGISTRY.items() if backend in a.backends)


def loads_for(backend: str) -> tuple[str, ...]:
    """The `attn_implementation`s a model must be loaded with for `backend`."""
    return tuple(dict.fromkeys(REGISTRY[name].transformers for name in taken_by(backend)))


def listed(names: tuple[str, ...]) -> str:
    """'sdpa, sdpa:<backend> or flash_attention_2': the forced SDPA backends said once."""
    shown = list(dict.fromkeys("sdpa:<backend>" if REGISTRY[n].sdpa_backend else n for n in names))
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def sdpa_context(name: str) -> contextlib.AbstractContextManager:
    """Force the SDPA backend of `name` around a generate call (a no-op when it forces none)."""
    backend = REGISTRY[name].sdpa_backend
    if backend is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[backend])
