"""Batch-1 decode attention alone, in a CUDA graph: flash-attn per num_splits, and the math written out for inductor.

A one-off probe kept with its output (attn_probe.txt); run from the repository root on a CUDA machine with flash-attn:
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) python3 results/h100/2026-12-07-fixed-kernels-default/attn_probe.py
Each figure is the median of 5 replays of a graph of 200 calls, in µs per call. "math" is the attention written out
with each query head's keys as a broadcast view (the computation of `written_attention` in playground/fast/forward.py),
compiled with the fast step's options, tuned or in inductor's deterministic mode (fixed).
"""
import sys, torch
from flash_attn import flash_attn_with_kvcache

def timed(fn, calls=200):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls): fn()
    g.replay(); torch.cuda.synchronize()
    t = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        t.append(a.elapsed_time(b) * 1000 / calls)
    return sorted(t)[2]

def math_attn(q, k, v, lens):
    """q (1,1,h,d), k/v (1,L,hk,d) flash layout; each q head against its kv head, keys < lens visible."""
    b, _, h, d = q.shape; L, hk = k.shape[1], k.shape[2]
    kk = k.transpose(1, 2).unsqueeze(2).expand(b, hk, h // hk, L, d).reshape(b * h, L, d)  # a view per group
    vv = v.transpose(1, 2).unsqueeze(2).expand(b, hk, h // hk, L, d).reshape(b * h, L, d)
    s = torch.bmm(q.reshape(b * h, 1, d), kk.transpose(1, 2)).float() * d ** -0.5  # (bh, 1, L)
    s = s.masked_fill(torch.arange(L, device=q.device) >= lens, float("-inf"))
    o = torch.bmm(s.softmax(-1).to(v.dtype), vv)  # (bh, 1, d)
    return o.view(b, 1, h, d)

opts = lambda det: {"coordinate_descent_tuning": True, "triton.cudagraphs": False, "triton.enable_pdl": True,
                    **({"deterministic": True} if det else {})}
for name, d in (("1b", 64), ("8b", 128)):
    L = 768
    k = torch.randn(1, L, 8, d, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
    q = torch.randn(1, 1, 32, d, device="cuda", dtype=torch.bfloat16)
    for n in (512, 767):
        lens = torch.full((1,), n, dtype=torch.int32, device="cuda")
        ref = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, causal=True)
        row = [f"flash splits {s}: {timed(lambda: flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, causal=True, num_splits=s)):5.2f}"
               for s in (0, 1, 2, 4, 8)]
        for det in (False, True):
            torch._dynamo.reset()
            f = torch.compile(math_attn, fullgraph=True, options=opts(det))
            err = (f(q, k, v, lens) - ref).abs().max().item()
            row.append(f"math {'fixed' if det else 'tuned'}: {timed(lambda: f(q, k, v, lens)):5.2f} (max err {err:.3g})")
        print(f"{name} d={d} filled={n} (µs per call)\n  " + "\n  ".join(row), flush=True)
