"""The hand-written GEMV (playground/fast/gemv.py) on each projection of a model, int4 and int8, against bf16.

For each projection: the bf16 matrix-vector product (torch's, cuBLAS) and the packed kernel at each width
with the block shape its autotuner chose, L2 flushed before each call as in benchmarks/quant_matmul.py;
prints µs per call, the bandwidth on the bytes each reads, the block shape, and the kernel's error against
the same packed weights dequantized in float32 (relative to the largest output). Its question: does building
floats from the bits take int4 past the 2 TB/s every library int4 kernel stopped at on the H200?

    python -m benchmarks.gemv --model llama-3.1-8b-shape --bits 4,8        # CUDA, Triton
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.quant_matmul import shapes, time_us
from playground.fast import gemv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b-shape")
    parser.add_argument("--projections", default="qkv,o,gate_up,down,lm_head")
    parser.add_argument("--bits", default="4,8", help=f"comma-separated, of {gemv.BITS}")
    parser.add_argument("--l2-flush-mb", type=int, default=256)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("the packed GEMV is a Triton kernel for CUDA GPUs; this machine has none")
    widths = [int(b) for b in args.bits.split(",")]
    if set(widths) - set(gemv.BITS):
        parser.error(f"--bits takes {gemv.BITS}, not {args.bits}")
    flush = torch.empty(args.l2_flush_mb * 2 ** 20, dtype=torch.uint8, device="cuda") if args.l2_flush_mb else None
    print(f"{args.model}, batch 1, bf16 activations, L2 flushed ({args.l2_flush_mb} MB) before each call, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| projection | (out, in) | bf16 µs | bf16 GB/s | bits | µs | GB/s | vs bf16 | block n, k, warps | rel. error |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    torch.manual_seed(0)
    for name in args.projections.split(","):
        out_f, in_f = shapes(args.model)[name]
        weight = torch.randn(out_f, in_f, device="cuda", dtype=torch.bfloat16) * 0.02
        x = torch.randn(1, in_f, device="cuda", dtype=torch.bfloat16)
        bf16_us = time_us(lambda v: torch.nn.functional.linear(v, weight), x, flush, iters=100)
        for bits in widths:
            packed = gemv.pack(weight, bits)
            reference = x.float() @ gemv.dequantize(*packed).T
            error = ((gemv.gemv(x, *packed).float() - reference).abs().max() / reference.abs().max()).item()
            packed_us = time_us(lambda v: gemv.gemv(v, *packed), x, flush, iters=100)
            config = gemv.tuned_config(out_f, in_f, bits)
            print(f"| {name} | {out_f}, {in_f} | {bf16_us:.1f} | {weight.numel() * 2 / bf16_us / 1e3:.0f} | {bits} | "
                  f"{packed_us:.1f} | {gemv.packed_bytes(*packed) / packed_us / 1e3:.0f} | {bf16_us / packed_us:.2f}x | "
                  f"{', '.join(map(str, config)) if config else '-'} | {error:.1e} |", flush=True)
            del packed
        del weight


if __name__ == "__main__":
    main()
