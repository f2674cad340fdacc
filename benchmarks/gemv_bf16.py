"""Batch-1 bf16 projections: inductor's compiled matmul-as-reduction, cuBLAS, and a Triton GEMV over block shapes.

On the H200 the Llama-3.2-1B shape's gate/up projection (16384 x 2048, 67 MB) took 24-30 µs inside the compiled
step, about 2.5 TB/s, the same time as on an H100 (3.35 TB/s peak), while the 8B shape's gate/up (4096 wide) read
4.5 TB/s: at a 2048-wide row the reduction kernel, not the memory, sets the pace. This times each projection of a
model shape alone, L2 flushed before each call as in a decode step, in a replayed CUDA graph:
- `fixed` and `tuned`: `F.linear` compiled with the step's options under each kernel choice (the step's kernels);
- `cublas`: `F.linear` uncompiled;
- `triton`: a plain GEMV written for the question (each program a block of rows, the width read in chunks into a
  2-D accumulator, software-pipelined over `STAGES`), at every block shape in `GRID`; the best is printed with
  its shape, so the table says whether any launch config of a kernel this simple reads these rows faster.

    python -m benchmarks.gemv_bf16 --model llama-3.2-1b-shape     # CUDA
"""

from __future__ import annotations

import argparse
import itertools

import torch
import torch.nn.functional as F

from benchmarks.quant_matmul import shapes, time_us
from playground.fast.generate import decode_compile_options, kernel_choice

# (BLOCK_N rows, BLOCK_K columns, warps, pipeline stages)
GRID = [(n, k, w, s) for (n, k), w, s in itertools.product(
    [(1, 2048), (2, 1024), (4, 512), (8, 256), (8, 512), (16, 128), (16, 256), (32, 128), (64, 64)], (4, 8), (1, 3))]


def launch_configs(in_features: int) -> list[tuple[int, int, int, int]]:
    """The GRID entries the kernel can run at this width: it reads columns unmasked, so BLOCK_K must divide it."""
    return [config for config in GRID if in_features % config[1] == 0]


def triton_gemv():
    """The Triton kernel and its launcher (Triton is imported only on a GPU run)."""
    import triton
    import triton.language as tl

    @triton.jit
    def gemv(x_ptr, w_ptr, y_ptr, N, K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             STAGES: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        live = rows < N
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):
            cols = k0 + tl.arange(0, BLOCK_K)
            w = tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=live[:, None], other=0.0,
                        eviction_policy="evict_first")
            x = tl.load(x_ptr + cols)
            acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
        tl.store(y_ptr + rows, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=live)

    def launch(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, config: tuple) -> torch.Tensor:
        block_n, block_k, warps, stages = config
        n, k = weight.shape
        gemv[(triton.cdiv(n, block_n),)](x, weight, out, n, k, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages,
                                          num_warps=warps)
        return out

    return launch


def compiled_linear(weight: torch.Tensor, kernels: str):
    with kernel_choice(kernels):
        options = decode_compile_options("reduce-overhead", torch.bfloat16)
    return torch.compile(lambda v: F.linear(v, weight), options=options, fullgraph=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.2-1b-shape")
    parser.add_argument("--projections", default="qkv,o,gate_up,down,lm_head")
    args = parser.parse_args()
    flush = torch.empty(256 * 2 ** 20, dtype=torch.uint8, device="cuda")
    launch = triton_gemv()
    print(f"{args.model}, batch 1, bf16, L2 flushed before each call, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}\n")
    print("| projection | (out, in) | fixed µs | tuned µs | cuBLAS µs | Triton GEMV best µs (BLOCK_N, BLOCK_K, warps, "
          "stages) | fastest TB/s |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for name in args.projections.split(","):
        out_f, in_f = shapes(args.model)[name]
        weight = torch.randn(out_f, in_f, device="cuda", dtype=torch.bfloat16) / in_f ** 0.5
        x = torch.randn(1, in_f, device="cuda", dtype=torch.bfloat16)
        reference = F.linear(x.float(), weight.float())
        times = {kernels: time_us(compiled_linear(weight, kernels), x, flush) for kernels in ("fixed", "tuned")}
        torch._dynamo.reset()
        times["cublas"] = time_us(lambda v: F.linear(v, weight), x, flush)
        out = torch.empty(out_f, device="cuda", dtype=torch.bfloat16)
        best = (float("inf"), None)
        for config in launch_configs(in_f):
            try:
                got = launch(x, weight, out, config)
                torch.testing.assert_close(got.float(), reference[0], rtol=2e-2, atol=2e-2)
                best = min(best, (time_us(lambda v, c=config: launch(v, weight, out, c), x, flush), config))
            except Exception as exc:  # a block shape this GPU cannot launch (too much shared memory): skip it
                print(f"<!-- {name} {config}: {type(exc).__name__}: {str(exc)[:120]} -->", flush=True)
        nbytes = weight.numel() * weight.element_size()
        fastest = min(*times.values(), best[0])
        print(f"| {name} | {out_f}, {in_f} | {times['fixed']:.1f} | {times['tuned']:.1f} | {times['cublas']:.1f} | "
              f"{best[0]:.1f} {best[1]} | {nbytes / fastest / 1e6:.2f} |", flush=True)


if __name__ == "__main__":
    main()
