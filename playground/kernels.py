"""Prove which attention kernels ran, from the profiler rather than from the request.

transformers and torch fall back quietly (a mask rules out SDPA's flash backend, a missing package
swaps in another path), so the engine profiles one short separate pass and names the attention
ops and GPU kernels it saw in the prefill step and in the decode steps. Each name maps to a
family; a family outside what was requested (its entry in `playground.attention`) is a fallback,
shown to the user.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from playground import quantization
from playground.attention import REGISTRY


def _compiled(table: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern], ...]:
    return tuple((family, re.compile(pattern)) for family, pattern in table)


# (family, pattern on op or kernel names). Order matters: the first match wins.
FAMILY_PATTERNS = _compiled((
    ("sdpa-flash", r"pytorch_flash::|_scaled_dot_product_flash_attention"),
    ("sdpa-efficient", r"_scaled_dot_product_efficient_attention|_efficient_attention_forward|fmha_cutlass"),
    ("sdpa-cudnn", r"_scaled_dot_product_cudnn_attention|cudnn_generated_fort_native_sdpa|cudnn.*sdpa"),
    ("sdpa-math", r"_scaled_dot_product_attention_math"),
    ("flash-attn", r"flash_attn|(?<!pytorch_)flash::|flash_fwd"),
    ("flex", r"flex_attention|FlexAttention|triton_tem_fused"),
))
# Quantized-matmul families, for `playground.quantization` entries: names of torch's int8/int4 pack ops and
# kernels (tinygemm), torchao's mslk int4 kernels and `torch._scaled_mm` (fp8). Seen on the H200 (torch 2.11):
# an int8 prefill as `aten::_weight_int8pack_mm`. A compiled step's matmuls are inductor's Triton reductions,
# named after their aten ops and not their dtypes (`triton_red_fused__to_copy_mm_...` for bf16 and int8 alike):
# those are proven by what they read (QUANT_POINTERS). On CPU torchao 0.18 runs int8 and fp8 weight-only as
# `aten::_to_copy` (dequantize) then `aten::mm`: no family here, so a fallback. gemlite's are its custom op
# and its Triton kernels (`gemv_INT_revsplitK_kernel`, `gemm_splitK_INT_kernel`, ...).
QUANT_PATTERNS = _compiled((
    ("gemlite-mm", r"gemlite::|^gem[mv]_\w*(INT|MX)\w*_kernel|^gemm_splitK_persistent_kernel"),
    ("int4-mm", r"mslk|_weight_int4pack_mm|tinygemm|int4.*(gemm|gemv|mm)"),
    ("int8-mm", r"_weight_int8pack_mm|int8.*(gemm|gemv|mm)|_int_mm"),
    ("fp8-mm", r"_scaled_mm|e4m3.*gemm|gemm.*e4m3|f8f8"),
))
# What an inductor Triton kernel reads is in the source inductor writes for it: `triton_meta={'signature':
# {'in_ptr0': '*bf16', 'in_ptr1': '*i8', ...}}` before its `def`. A fused matmul kernel that reads an int8 or
# fp8 buffer is the quantized matmul (the weight's bytes are read as they are stored); a dequantize kernel
# that writes float weights for a float matmul reads them too, but is no matmul, so it proves nothing.
QUANT_POINTERS = {"*i8": "int8-mm", "*fp8e4nv": "fp8-mm"}
TRITON_SOURCE = re.compile(r"'signature': \{(?P<signature>[^}]*)\}|\ndef (?P<kernel>triton_\w+)\(")
READ_POINTER = re.compile(r"'in_(?:out_)?ptr\d+': '(\*\w+)'")
# Every matmul op or kernel, recorded so a new kernel can be named after a run; the quantized ones above included.
MATMUL = re.compile(r"^aten::(mm|addmm|bmm|matmul|linear)$|gemm|gemv|cutlass|cublas|mslk|_pack_mm|_int_mm|_scaled_mm"
                    r"|int8|int4|fp8|e4m3|^triton_\w*_fused\w*_mm_|gemlite::")
# Seen on the H200: after torch._dynamo's recompile limit (8 shapes) flex_attention stops compiling
FLEX_UNFUSED = ("flex_attention compiles a kernel per input shape; past torch.compile's recompile limit (8 shapes) it "
                "runs unfused, materialising the full score matrix (a new process compiles it again)")
# Attention written out (transformers' eager, or the fast decoder's `written_attention`): its softmax op run eager,
# or compiled, an inductor kernel named after it (a sampled step's softmax over the logits looks the same, so this
# is only read when no attention kernel was recognised)
EAGER_MARK = re.compile(r"^aten::_?softmax$|^triton_\w*_fused_\w*softmax")


def family_of(name: str) -> str | None:
    for family, pattern in FAMILY_PATTERNS:
        if pattern.search(name):
            return family
    return None


@dataclass
class PhaseKernels:
    """Attention-related op and kernel names seen in one phase, and their families."""

    names: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    kernel_us: float = 0.0  # summed GPU kernel time in this phase
    top_kernels: list[tuple[str, float]] = field(default_factory=list)  # (GPU kernel, summed µs), largest first
    matmuls: list[str] = field(default_factory=list)  # matmul op and kernel names seen
    quant_families: list[str] = field(default_factory=list)  # quantized-matmul families among them
    comm_us: float = 0.0  # summed time in collectives (tensor parallel): NCCL kernels, or gloo's ops on a CPU


def matmul_families(names: list[str], reads: dict[str, set[str]] | None = None) -> tuple[list[str], list[str]]:
    """(matmul names seen, quantized-matmul families among them), each sorted and unique.

    `reads` maps compiled kernels to the pointer types they read (`compiled_kernel_reads`)."""
    matmuls = sorted({n for n in names if MATMUL.search(n) and not family_of(n)})  # flash-attn's are cutlass too
    families = {family for n in matmuls for family, pattern in QUANT_PATTERNS if pattern.search(n)}
    families |= {QUANT_POINTERS[p] for n in matmuls for p in (reads or {}).get(n, ()) if p in QUANT_POINTERS}
    return matmuls, sorted(families)


def triton_reads(source: str) -> dict[str, set[str]]:
    """Each inductor Triton kernel defined in `source` (output code or a kernel file): the pointer types it reads."""
    reads: dict[str, set[str]] = {}
    signature = ""
    for match in TRITON_SOURCE.finditer(source):
        if match["signature"] is not None:
            signature = match["signature"]
        else:
            reads.setdefault(match["kernel"], set()).update(READ_POINTER.findall(signature))
    return reads


@functools.cache
def _file_reads(path: str) -> dict[str, set[str]]:
    return triton_reads(Path(path).read_text(errors="replace"))  # generated files are never rewritten


def compiled_kernel_reads() -> dict[str, set[str]]:
    """`triton_reads` over the code inductor has loaded in this process.

    Kernel names repeat across compiled graphs (each numbers its own), so a name gets the union of what
    every kernel of that name reads; a process that compiled an int8 and a bf16 step reads int8 under
    the shared names, which only an int8 run's proof asks about."""
    from torch._inductor.codecache import PyCodeCache

    reads: dict[str, set[str]] = {}
    for path in {getattr(module, "__file__", None) for module in PyCodeCache.modules} - {None}:
        for kernel, pointers in _file_reads(path).items():
            reads.setdefault(kernel, set()).update(pointers)
    return reads


def classify(names: list[str]) -> PhaseKernels:
    attention = sorted({n for n in names if family_of(n)})
    families = sorted({family_of(n) for n in attention})
    if not families and any(EAGER_MARK.match(n) for n in names):
        families = ["eager"]
        attention = sorted({n for n in names if EAGER_MARK.match(n) or n in ("aten::matmul", "aten::bmm")})
    return PhaseKernels(names=attention, families=families)


def fallback(requested: str, phases: dict[str, PhaseKernels]) -> str | None:
    """A sentence naming each phase whose kernels are not what was requested (its registry families), or None."""
    expected = REGISTRY[requested].families
    problems = []
    for phase, seen in phases.items():
        if not seen.families:
            problems.append(f"{phase}: no attention kernel was recognised")
        elif not set(seen.families) <= expected:
            problems.append(f"{phase}: requested {requested} but {', '.join(seen.families)} ran")
    if "flex" in expected and any("eager" in seen.families for seen in phases.values()):
        problems.append(FLEX_UNFUSED)
    return "; ".join(problems) or None


def quant_fallback(requested: str, phases: dict[str, PhaseKernels]) -> str | None:
    """A sentence naming each phase where no kernel of the requested quantization's families ran, or None."""
    expected = quantization.REGISTRY[requested].families
    if not expected:
        return None
    missing = [phase for phase, seen in phases.items() if not set(seen.quant_families) & expected]
    if not missing:
        return None
    matmuls = sorted({name for phase in missing for name in phases[phase].matmuls})
    return (f"requested quant={requested} but no {', '.join(sorted(expected))} kernel ran in {', '.join(missing)} "
            f"(matmuls: {', '.join(matmuls) or 'none recognised'}): a dequantize-then-float-matmul path reads more "
            "bytes per step than the unquantized model (or a quantized kernel ran whose name the playground does "
            "not know yet)")


PHASE_PREFIX = "playground::"
TOP_KERNELS = 8


def top_kernels(timed: list[tuple[str, float]], n: int | None = TOP_KERNELS) -> list[tuple[str, float]]:
    """The n kernels (None: all) with the most summed time, from (name, µs) pairs: where GPU time goes."""
    totals: Counter[str] = Counter()
    for name, us in timed:
        totals[name] += us
    return totals.most_common(n)


# A collective's time: NCCL's kernels on a GPU; on a CPU the c10d op that wraps gloo's work (its inner
# events would count the same time twice)
NCCL_KERNEL = re.compile(r"^nccl", re.IGNORECASE)
CPU_COLLECTIVE = re.compile(r"^c10d::")


def collective_us(events: list[tuple[str, bool, float]]) -> float:
    """Time in collectives from (name, on the GPU, µs) events: the GPU's NCCL kernels if any ran, else c10d ops."""
    gpu = sum(us for name, on_gpu, us in events if on_gpu and NCCL_KERNEL.search(name))
    return gpu or sum(us for name, on_gpu, us in events if not on_gpu and CPU_COLLECTIVE.search(name))


def phases_from_profile(prof) -> dict[str, PhaseKernels]:
    """Split profiler events into phases by the `playground::<phase>` ranges the streamer opened."""
    events = list(prof.events())
    ranges: dict[str, list[tuple[float, float]]] = {}
    for evt in events:
        if evt.name.startswith(PHASE_PREFIX):
            ranges.setdefault(evt.name[len(PHASE_PREFIX):], []).append((evt.time_range.start, evt.time_range.end))
    phases: dict[str, PhaseKernels] = {}
    for phase, spans in ranges.items():
        names, timed, every = [], [], []
        for evt in events:
            start = evt.time_range.start
            if evt.name.startswith(PHASE_PREFIX) or not any(lo <= start <= hi for lo, hi in spans):
                continue
            names.append(evt.name)
            on_gpu = evt.device_type.name in ("CUDA", "PrivateUse1")
            every.append((evt.name, on_gpu, evt.time_range.elapsed_us()))
            if on_gpu:
                timed.append((evt.name, evt.time_range.elapsed_us()))
        seen = classify(names)
        reads = compiled_kernel_reads() if any(n.startswith("triton_") for n in names) else {}
        seen.matmuls, seen.quant_families = matmul_families(names, reads)
        seen.kernel_us = sum(us for _, us in timed)
        seen.top_kernels = top_kernels(timed)
        seen.comm_us = collective_us(every)
        phases[phase] = seen
    return phases
