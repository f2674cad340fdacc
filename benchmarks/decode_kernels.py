"""Every GPU kernel of one fast-backend decode step, in launch order, with the idle gaps between them.

`fast_decode` gives tok/s and the eight costliest kernels; this shows the whole step, which is
what to read before changing the decoder: a batch-1 step on the Llama-3.2-1B shape is about 230
kernels, and a slow one (a projection well below the bandwidth of the others, an argmax in one
thread block) or a run of tiny ones stands out here.

Each Triton kernel inductor compiled in this process is listed with the bandwidth it reached: the bytes
inductor counts for its arguments (`kernel_num_gb`, which it keeps when `benchmark_kernel` is on, as it is
here) over its time per launch. For a projection's matrix-vector product that is its weight over its time;
flash-attn's and other library kernels have no count, nor do kernels a saved step loaded from disk.

After a cold run of the same shape (compile and graph capture), the prompt is prefilled again and
only the `--new-tokens` - 1 decode steps that follow are profiled, so every kernel seen is a decode
step's. The launch-order listing is the last step, whose span (first kernel start to last kernel
end) is the step time when the GPU is the bottleneck; kernel time below that span is launch or
dependency gaps.

With `--verify K` the step profiled is speculative decoding's verify step instead: the target over K drafts
plus the last kept token at once, as the fast backend verifies a round under greedy decoding. Beside a
decode step's listing of the same model it shows what a round's verify costs beyond one plain step.

    python -m benchmarks.decode_kernels --model llama-3.2-1b-shape --attn flash_attention_2   # CUDA
    python -m benchmarks.decode_kernels --model DIR --verify 5     # the verify step of 5 drafts a round
    python -m benchmarks.decode_kernels     # CPU: tiny preset, eager, CPU ops instead of kernels (a smoke test)
"""

from __future__ import annotations

import argparse
import functools
import re
from collections import Counter

import torch

from benchmarks import add_fast_step_arguments
from playground.config import KERNELS
from playground.fast.generate import compiled_steps, fast_generate, kernel_choice
from playground.fast.speculative import compiled_verify
from playground.hardware import memory_bandwidth_gb_s
from playground.kernels import top_kernels
from playground.loader import MODELS


LAUNCH = re.compile(r'"(grid|block)": \[(\d+), (\d+), (\d+)\]')


def launch_shape(event) -> str:
    """"grid 132x1x1 block 256" from a GPU kernel's profiler metadata, or "" where the profiler gives none (CPU).

    Two compiles can give a kernel of the same name other launch settings (coordinate-descent tuning picks
    its block sizes and warps), which this tells apart from the same kernel running at another speed."""
    found = {kind: (x, y, z) for kind, x, y, z in LAUNCH.findall(getattr(event, "metadata_json", "") or "")}
    if "grid" not in found or "block" not in found:
        return ""
    block = found["block"]
    return f"grid {'x'.join(found['grid'])} block {block[0] if block[1:] == ('1', '1') else 'x'.join(block)}"


def step_events(prof, device: str, steps: int) -> tuple[Counter, Counter, list]:
    """(µs per step by kernel, launches per step by kernel, the last step's events in launch order).

    The profile holds `steps` identical decode steps and nothing else.
    """
    kind = "CUDA" if device == "cuda" else "CPU"
    events = sorted((e for e in prof.events() if e.device_type.name == kind and not e.name.startswith("Profiler")),
                    key=lambda e: e.time_range.start)
    total_us = top_kernels([(e.name, e.time_range.elapsed_us()) for e in events], n=None)
    count = Counter(e.name for e in events)
    us = Counter({name: total / steps for name, total in total_us})
    launches = Counter({name: n // steps for name, n in count.items()})
    return us, launches, events[-(len(events) // steps):]


def inductor_kernel_gb() -> dict[str, float]:
    """GB each Triton kernel inductor compiled in this process moves per launch, by its own count of the kernel's
    arguments, by kernel name (the name the profiler shows). Inductor counts only under `benchmark_kernel`."""
    from torch._inductor.codecache import PyCodeCache

    found = {}
    for module in list(PyCodeCache.modules):
        for value in list(vars(module).values()):
            meta = getattr(value, "inductor_meta", None)
            if isinstance(meta, dict) and meta.get("kernel_name") and meta.get("kernel_num_gb"):
                found[meta["kernel_name"]] = meta["kernel_num_gb"]
    return found


def bandwidth(gb: float | None, us_per_launch: float) -> str:
    return f"{gb / us_per_launch * 1e3:5.2f} TB/s" if gb and us_per_launch > 0 else "      -   "


def roofline_step_us(span_us: float, us: Counter, launches: Counter, gb: dict[str, float], gb_s: float) -> float:
    """The step's span had every kernel with a byte count moved its bytes at `gb_s`, every other kernel and gap as
    measured: the most that faster projections alone could buy, before fusing or dropping the rest."""
    counted = [name for name in us if gb.get(name)]
    return span_us - sum(us[name] for name in counted) + sum(gb[name] * launches[name] for name in counted) / gb_s * 1e6


def print_bandwidth_summary(us: Counter, launches: Counter, gb: dict[str, float], span_us: float,
                            gb_s: float | None) -> None:
    """What the kernels with a byte count move per step together, at what rate, and the step at `gb_s`."""
    counted = [name for name in us if gb.get(name)]
    if not counted:
        print("\nno kernel has inductor's byte count (library kernels, a CPU run, or a step loaded from disk)")
        return
    step_gb = sum(gb[name] * launches[name] for name in counted)
    step_us = sum(us[name] for name in counted)
    print(f"\ninductor's kernels with a byte count: {step_us:.1f} of {sum(us.values()):.1f} µs a step, "
          f"{step_gb * 1e3:.1f} MB a step, {bandwidth(step_gb, step_us).strip()} together")
    if gb_s:
        ceiling = roofline_step_us(span_us, us, launches, gb, gb_s)
        print(f"at this card's copy bandwidth ({gb_s / 1e3:.2f} TB/s) they would take {step_gb / gb_s * 1e6:.1f} µs: "
              f"the step, every other kernel and gap as measured, {ceiling:.1f} µs ({1e6 / ceiling:.0f} steps/s)")


def print_step(label: str, us: Counter, launches: Counter, last: list, shown: int,
               gb: dict[str, float] | None = None, gb_s: float | None = None) -> None:
    span = last[-1].time_range.end - last[0].time_range.start
    busy = sum(e.time_range.elapsed_us() for e in last)
    print(f"{label}: {sum(launches.values())} kernels per step, {sum(us.values()):.1f} µs of kernel time per step")
    print(f"last step: span {span:.1f} µs, kernel time {busy:.1f} µs, gaps {span - busy:.1f} µs "
          "(negative: kernels overlapped, as with programmatic dependent launch; on CPU, ops nest)\n")
    print("launch order (first and last kernels of the step):")
    previous_end = None
    for i, e in enumerate(last):
        gap = 0.0 if previous_end is None else e.time_range.start - previous_end
        previous_end = e.time_range.end
        if i < shown or i >= len(last) - shown // 2:
            print(f"  {i:4d} {e.time_range.elapsed_us():8.1f} µs  gap {gap:6.1f}  {e.name[:100]}")
        elif i == shown:
            print("   ...")
    shapes = {e.name: launch_shape(e) for e in last}
    gb = gb or {}
    print("\nby kernel, costliest first (µs per step, launches per step, µs per launch, bandwidth on inductor's byte "
          "count, launch settings):")
    for name, per_step in us.most_common(20):
        per_launch = per_step / launches[name]
        print(f"  {per_step:8.1f} µs  x{launches[name]:<3d} {per_launch:7.1f}  {bandwidth(gb.get(name), per_launch)}  "
              f"{name[:100]}{'  ' + shapes[name] if shapes.get(name) else ''}")
    print_bandwidth_summary(us, launches, gb, span, gb_s)


def main() -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fast_step_arguments(parser, cuda)
    parser.add_argument("--shown", type=int, default=24, help="kernels listed from the start of the step")
    parser.add_argument("--verify", type=int, default=0, metavar="K",
                        help="profile the speculative verify step of K drafts instead of a decode step")
    parser.add_argument("--kernels", choices=KERNELS, default=KERNELS[0],
                        help="the compiled steps' kernel choice, as the kernel-choice setting takes it")
    args = parser.parse_args()
    device = "cuda" if cuda else "cpu"
    if args.new_tokens < 2:
        parser.error("--new-tokens must be at least 2: the first token comes from prefill, not a decode step")
    if args.verify + 1 > args.new_tokens:
        parser.error("--verify K needs --new-tokens of at least K + 1: the cache holds the prompt and the new tokens")
    torch._inductor.config.benchmark_kernel = True  # inductor keeps each kernel's byte count (inductor_kernel_gb)
    model = MODELS.get(args.model, device, args.dtype, args.attn)[0].model
    ids = torch.randint(0, model.config.vocab_size, (1, args.prompt_tokens), device=device,
                        generator=torch.Generator(device).manual_seed(0))
    with kernel_choice(args.kernels):
        profile_step(model, ids, args)


def profile_step(model, ids: torch.Tensor, args: argparse.Namespace) -> None:
    """Compile the step (not profiled), then profile `args.new_tokens` - 1 decode steps (or verify steps)."""
    cuda = ids.is_cuda
    device = ids.device.type
    cold = fast_generate(model, input_ids=ids, max_new_tokens=args.new_tokens, compile_mode=args.compile,
                         eos_token_id=[], pad_token_id=0)  # compile and capture, not profiled
    steps = args.new_tokens - 1
    with torch.inference_mode():  # that run's state and compiled steps, reused as fast_generate reuses them
        state = cold.past_key_values
        prefill_fn, decode_fn = compiled_steps(model, state, args.compile, compile_prefill=True)
        prefill_fn(model, state, ids, False)
        step = functools.partial(decode_fn, model, state, False)
        if args.verify:  # verifies the same positions every call (it leaves `state.pos` alone)
            step = functools.partial(compiled_verify(state, args.compile, args.verify + 1, greedy=True), model, state)
            step(), step()  # compile, then capture: neither is profiled
        activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
        with torch.profiler.profile(activities=[activity]) as prof:
            for _ in range(steps):
                step()
            if cuda:
                torch.cuda.synchronize()
    what = f"verify step of {args.verify} drafts" if args.verify else "decode step"
    print_step(f"{args.model} {args.dtype} {args.attn} compile={args.compile} kernels={args.kernels}, "
               f"prompt {args.prompt_tokens}, {what}",
               *step_events(prof, device, steps), args.shown, inductor_kernel_gb(), memory_bandwidth_gb_s())


if __name__ == "__main__":
    main()
