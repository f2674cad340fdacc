"""One batch-1 projection per weight format: which kernel reads quantized weights at full bandwidth.

Decode at batch 1 is a chain of matrix-vector products, each bound by reading its weight. A
weight-only format pays only if its kernel streams the narrow weights at close to the bandwidth a
bf16 matrix-vector product reaches; this times each format's linear alone, on the projection
shapes of a model, compiled as the fast backend compiles its step (coordinate-descent tuning, a CUDA
graph), and prints µs per call and the bandwidth achieved on the bytes the weight really holds. The L2
cache is flushed before each call, since a decode step reads each weight once (`--l2-flush-mb 0`: calls
back to back, as `results/h200/2026-12-04-gemlite-speculation-spread/quant_matmul_8b.txt` was made).

Formats are `playground.quantization`'s entries (torchao configs; the gemlite ones need the gemlite package).

    python -m benchmarks.quant_matmul --model llama-3.1-8b-shape     # CUDA
"""

from __future__ import annotations

import argparse

import torch

from playground import quantization
from playground.fast.generate import decode_compile_options
from playground.presets import PRESETS, preset_config


def shapes(model: str) -> dict[str, tuple[int, int]]:
    """(out_features, in_features) of each projection, q/k/v and gate/up fused as the fast backend runs them."""
    c = preset_config(PRESETS[model])
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv = c.num_key_value_heads * head_dim
    return {"qkv": (c.num_attention_heads * head_dim + 2 * kv, c.hidden_size),
            "o": (c.hidden_size, c.num_attention_heads * head_dim),
            "gate_up": (2 * c.intermediate_size, c.hidden_size), "down": (c.hidden_size, c.intermediate_size),
            "lm_head": (c.vocab_size, c.hidden_size)}


def quantized_linear(out_f: int, in_f: int, fmt: str) -> torch.nn.Linear:
    linear = torch.nn.Linear(in_f, out_f, bias=False, device="cuda", dtype=torch.bfloat16)
    quantization.quantize(linear, fmt)
    return linear


def graph_us(calls, iters: int) -> float:
    """Mean µs per iteration of `calls()`, replayed as one CUDA graph of `iters` iterations (no launch overhead)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            calls()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / iters


def time_us(fn, x: torch.Tensor, flush: torch.Tensor | None, iters: int = 200) -> float:
    """Mean µs per call. Calls of one weight in a row keep a weight smaller than the L2 cache in it, which a
    decode step, reading each weight once, never does; with `flush` (larger than L2) each call follows a write
    of it, and the writes' own time, replayed alone, is subtracted."""
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    if flush is None:
        return graph_us(lambda: fn(x), iters)

    def flushed():
        flush.zero_()
        fn(x)

    return graph_us(flushed, iters) - graph_us(flush.zero_, iters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b-shape")
    parser.add_argument("--formats", default=",".join(quantization.NAMES))
    parser.add_argument("--projections", default="qkv,o,gate_up,down,lm_head")
    parser.add_argument("--l2-flush-mb", type=int, default=256,
                        help="write this many MB between calls, so each weight is read from memory as in a "
                             "decode step (0: calls back to back, a small weight staying in L2)")
    args = parser.parse_args()
    options = decode_compile_options("max-autotune-no-cudagraphs", torch.bfloat16)
    flush = (torch.empty(args.l2_flush_mb * 2 ** 20, dtype=torch.uint8, device="cuda") if args.l2_flush_mb
             else None)
    reads = f"L2 flushed ({args.l2_flush_mb} MB written) before each call" if flush is not None else "calls back to back"
    print(f"{args.model}, batch 1, bf16 activations, {reads}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}\n")
    print("| projection | (out, in) | format | µs | GB/s on its bytes | weight MB |")
    print("|---|---|---|---|---|---|", flush=True)
    for name in args.projections.split(","):
        out_f, in_f = shapes(args.model)[name]
        x = torch.randn(1, in_f, device="cuda", dtype=torch.bfloat16)
        for fmt in args.formats.split(","):
            try:
                linear = quantized_linear(out_f, in_f, fmt)
                fn = torch.compile(lambda v, m=linear: m(v), options=options, fullgraph=True)
                us = time_us(fn, x, flush)
                nbytes = quantization.tensor_bytes(linear.weight)
                print(f"| {name} | {out_f}, {in_f} | {fmt} | {us:.1f} | {nbytes / us / 1e3:.0f} | "
                      f"{nbytes / 1e6:.1f} |", flush=True)
            except Exception as exc:  # a format this host cannot run: its reason is the row
                print(f"| {name} | {out_f}, {in_f} | {fmt} | failed: {type(exc).__name__}: {str(exc)[:160]} | | |",
                      flush=True)
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
