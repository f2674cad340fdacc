"""The Triton kernels behind gemv.py, in a module of their own: only a GPU run imports Triton, and a kernel
calls another by its module-level name (the JIT resolves names in the module's globals). One kernel per
width, each named for it, so the profiler's kernel proof tells int4 from int8; `KERNELS` maps bits to
(the kernel taking its block shape as arguments, the same kernel autotuned over gemv.CONFIGS)."""

from __future__ import annotations

import triton
import triton.language as tl

from playground.fast.gemv import CONFIGS


@triton.jit
def packed_gemv(x_ptr, w_ptr, s_ptr, o_ptr, y_ptr, N, K: tl.constexpr, GROUP: tl.constexpr,
                BITS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = rows < N
    groups_per_row: tl.constexpr = K // GROUP
    groups: tl.constexpr = BLOCK_K // GROUP
    per_word: tl.constexpr = 32 // BITS
    shifts = tl.arange(0, per_word) * BITS
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        word = k0 // per_word + tl.arange(0, BLOCK_K // per_word)
        w = tl.load(w_ptr + rows[:, None] * (K // per_word) + word[None, :],
                    mask=live[:, None] & (word < K // per_word)[None, :], other=0)
        bits = ((w[:, :, None] >> shifts[None, None, :]) & ((1 << BITS) - 1)) | 0x4B000000
        q = tl.reshape(bits.to(tl.float32, bitcast=True) - 8388608.0, [BLOCK_N, BLOCK_K])
        col = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + col, mask=col < K, other=0.0).to(tl.float32)
        partial = tl.sum(tl.reshape(q * x[None, :], [BLOCK_N, groups, GROUP]), axis=2)
        x_sums = tl.sum(tl.reshape(x, [groups, GROUP]), axis=1)
        group = k0 // GROUP + tl.arange(0, groups)
        meta = rows[:, None] * groups_per_row + group[None, :]
        in_row = live[:, None] & (group < groups_per_row)[None, :]
        scale = tl.load(s_ptr + meta, mask=in_row, other=0.0).to(tl.float32)
        offset = tl.load(o_ptr + meta, mask=in_row, other=0.0).to(tl.float32)
        acc += tl.sum(scale * partial + offset * x_sums[None, :], axis=1)
    tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=live)

@triton.jit
def int4_gemv(x_ptr, w_ptr, s_ptr, o_ptr, y_ptr, N, K: tl.constexpr, GROUP: tl.constexpr,
              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    packed_gemv(x_ptr, w_ptr, s_ptr, o_ptr, y_ptr, N, K, GROUP, 4, BLOCK_N, BLOCK_K)

@triton.jit
def int8_gemv(x_ptr, w_ptr, s_ptr, o_ptr, y_ptr, N, K: tl.constexpr, GROUP: tl.constexpr,
              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    packed_gemv(x_ptr, w_ptr, s_ptr, o_ptr, y_ptr, N, K, GROUP, 8, BLOCK_N, BLOCK_K)


# cache_results: the timings go to Triton's cache folder (inductor points it into its own, which the compile
# cache keeps), so a new process reuses the choice: no tuning in a warm start, and the same kernels as before.
_CONFIGS = [triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w) for n, k, w in CONFIGS]
KERNELS = {bits: (kernel, triton.autotune(_CONFIGS, key=["N", "K"], cache_results=True)(kernel))
           for bits, kernel in ((4, int4_gemv), (8, int8_gemv))}
