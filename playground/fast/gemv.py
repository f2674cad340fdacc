"""A batch-1 int4 or int8 matrix-vector product that builds its floats from the weight's bits.

Why a kernel of our own: at batch 1 every int4 kernel measured on the H200 (gemlite's, torch's
tinygemm, mslk's CUTLASS ones) read its bytes at 2 TB/s or less, under half of what a bf16
reduction reaches (results/h200/2026-12-06-int4-kernels-and-tied-head/), and torchao's int8 matmul
left a compiled 8B step slower than bf16. Streaming int4 at 4 TB/s means turning 8e12 nibbles a
second into floats, and a conversion instruction (int to float) runs at a fraction of the rate of
float arithmetic on Hopper. Here a stored value q becomes a float without one: OR-ing it into the
mantissa of 2**23 gives the float 2**23 + q exactly, and one subtraction leaves q: a shift, a mask,
an OR and a subtraction per weight before its multiply-add, and the group's scale and offset applied
once per group, to the group's partial sum.

Layout (`pack`): asymmetric min/max quantization in groups of 128 along the input dimension, 32 / bits
values per int32 word in input order (value j of word i is column (32 / bits) * i + j), scales and
offsets in fp16, one per (row, group): w ~= q * scale + offset.

The `int4-gemv` and `int8-gemv` settings (gemv_weights.py) call it through one custom op;
`benchmarks/gemv.py` times it against bf16. `pack` and `dequantize` are plain torch and run anywhere;
the kernels (gemv_kernel.py) need Triton and a GPU, and their block shape is autotuned on the first call
of each matrix shape (and kept on disk for the next process).
"""

from __future__ import annotations

import sys

import torch

GROUP = 128
BITS = (4, 8)


def pack(weight: torch.Tensor, bits: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weight (N, K) -> words (N, K * bits / 32) int32, scales and offsets (N, K / GROUP) fp16.

    A group whose values are all equal (an all-zero padding row) gets q = 0 and its value (in fp16)
    as the offset, never a zero scale dividing."""
    rows, cols = weight.shape
    if bits not in BITS:
        raise ValueError(f"the GEMV packs {' or '.join(map(str, BITS))} bits a weight, not {bits}")
    if cols % GROUP:
        raise ValueError(f"int{bits} packing needs in_features divisible by the group ({GROUP}); got {cols}")
    top, per_word = 2 ** bits - 1, 32 // bits
    w = weight.float().reshape(rows, cols // GROUP, GROUP)
    low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    scale = ((high - low) / top).half().float()  # the stored values, so rounding matches what the kernel reads
    offset = low.half().float()
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = ((w - offset) / safe).round().clamp(0, top).to(torch.int32).reshape(rows, cols // per_word, per_word)
    words = q[..., 0].clone()
    for j in range(1, per_word):
        words |= q[..., j] << (bits * j)
    return words.contiguous(), scale.squeeze(-1).half().contiguous(), offset.squeeze(-1).half().contiguous()


def bits_of(words: torch.Tensor, scales: torch.Tensor) -> int:
    """The bits a weight `pack` wrote: its in_features are its groups' columns, its words hold them all."""
    return words.shape[1] * 32 // (scales.shape[1] * GROUP)


def dequantize(words: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The float32 (N, K) weights `pack` stored: the reference the kernel is checked against."""
    rows, bits = words.shape[0], bits_of(words, scales)
    q = torch.stack([(words >> (bits * j)) & (2 ** bits - 1) for j in range(32 // bits)], dim=-1)
    q = q.reshape(rows, -1, GROUP).float()
    return (q * scales.float()[..., None] + offsets.float()[..., None]).reshape(rows, -1)


def packed_bytes(words: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in (words, scales, offsets))


# Block shapes the kernel's autotuner times on the first call of each (N, K): rows per program, columns per
# loop step (a multiple of the group), warps; those whose tile gives each thread 16 to 128 weights, so that
# a thread has loads in flight without spilling its registers.
CONFIGS = [(n, k, w) for n in (4, 8, 16, 32) for k in (256, 512, 1024) for w in (4, 8)
           if 16 <= n * k // (32 * w) <= 128]


def gemv(x: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
         config: tuple[int, int, int] | None = None) -> torch.Tensor:
    """x (K,) or (1, K), any float dtype -> (1, N) in x's dtype: x @ dequantize(...).T. `config` (rows per
    program, columns per step, warps; powers of two, the columns a multiple of the group) fixes the block
    shape; None lets the autotuner choose it."""
    rows, cols, group = words.shape[0], scales.shape[1] * GROUP, GROUP
    if x.numel() != cols:
        raise ValueError(f"x has {x.numel()} values for a weight of {cols} in_features")
    if config is not None and (config[1] % group or any(v & (v - 1) for v in config)):
        raise ValueError(f"block {config} needs powers of two, its columns a multiple of the group ({group})")
    if not (words.is_contiguous() and scales.is_contiguous() and offsets.is_contiguous()):
        raise ValueError("the packed weight's words, scales and offsets must be contiguous")
    from playground.fast.gemv_kernel import KERNELS

    plain, tuned = KERNELS[bits_of(words, scales)]
    x = x.reshape(-1).contiguous()
    out = torch.empty(1, rows, device=x.device, dtype=x.dtype)
    if config is None:
        tuned[lambda meta: (-(-rows // meta["BLOCK_N"]),)](x, words, scales, offsets, out, rows, K=cols, GROUP=group)
    else:
        block_n, block_k, warps = config
        plain[(-(-rows // block_n),)](x, words, scales, offsets, out, rows, K=cols, GROUP=group,
                                      BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps)
    return out


def tuned_config(rows: int, cols: int, bits: int = 4) -> tuple[int, int, int] | None:
    """The block shape the autotuner chose for (rows, cols, bits), once a call of that shape has run."""
    kernels = sys.modules.get("playground.fast.gemv_kernel")
    if kernels is None:
        return None
    for key, config in kernels.KERNELS[bits][1].cache.items():
        if tuple(key[:2]) == (rows, cols):
            return config.kwargs["BLOCK_N"], config.kwargs["BLOCK_K"], config.num_warps
    return None


@torch.library.custom_op("packed_gemv::mv", mutates_args=())
def mv(x: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """One opaque op for torch.compile: a compiled step calls the kernel (autotuned) as it is."""
    return gemv(x, words, scales, offsets)


@mv.register_fake
def _(x, words, scales, offsets):
    return x.new_empty(1, words.shape[0])


@mv.register_kernel("cpu")
def _(x, words, scales, offsets):
    """The same product from the dequantized weights, for the tests on a CPU (runs there are refused)."""
    return (x.reshape(1, -1).float() @ dequantize(words, scales, offsets).T).to(x.dtype)
