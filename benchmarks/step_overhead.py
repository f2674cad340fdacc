"""What a compiled decode step costs the host per call, with plain weights and with quantized ones (torchao tensor subclasses).

A CUDA graph replays a step's kernels without the host, but a call through torch.compile still runs Python
before the replay: Dynamo's guards on the step's inputs, and AOTAutograd's runtime wrapper. A quantized
weight is a torchao tensor subclass, and Dynamo's guards flatten each one into its inner tensors twice a call
and check its metadata, in Python. If the host's share exceeds the step's GPU time, the GPU waits: on the
H200 an 8B step with quantized weights (gemlite's kernels) replayed by torch's own CUDA graphs kept the GPU
busy 64% of the time, a bf16 step 100% (results/h200/2026-12-04-gemlite-speculation-spread/).

Each way of calling the fast backend's decode step is timed per call, and its host Python profiled (calls to
`__tensor_flatten__` per step and the time under them and the guards' metadata checks):

- "no graph": compiled without CUDA graphs, so each call runs the guards and launches every kernel;
- "torch's graphs" (CUDA only): inductor's CUDA graphs, as "reduce-overhead" gives them: guards, then a replay;
- "captured" (CUDA only): the fast backend's own step, a graph it captured once and replays (`CapturedStep`).

µs per step is the steady rate with the device synchronised at the end; host µs per call is the time until
the last call returns, before that synchronisation: where it is below the step's time, the host runs ahead
and the GPU never waits. On a CPU the step's compute is host time too, so there the overhead column, not the
step time, is the figure that carries over to a GPU.

    python -m benchmarks.step_overhead                              # CPU: the shipped model, none and int8
    python -m benchmarks.step_overhead --skip-guards                # the same, Dynamo's guards not evaluated
    python -m benchmarks.step_overhead --model llama-3.2-1b-shape --dtype bf16 --quant none,int8-gemlite   # CUDA
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Callable

import torch

from playground.fast.forward import decode_one_token
from playground.fast.fuse import fused_layers
from playground.fast.generate import compile_step, decode_compile_options, fast_generate, own_code
from playground.loader import ModelCache
from playground.presets import DEFAULT_MODEL
from playground.quantization import quantized_weights

# Host functions that run per call only because inputs are tensor subclasses: Dynamo's guards (torch 2.13 names)
SUBCLASS_WORK = ("__tensor_flatten__", "metadata_checker")
CALLS = ("no graph", "torch's graphs", "captured")  # the ways a step is called; the last two need CUDA


def step_called(call: str, model, state) -> Callable:
    """The decode step compiled for `state` and called the way `call` names."""
    if call == "no graph":
        return compile_step(decode_one_token, state, "default")
    if call == "captured":
        return compile_step(decode_one_token, state, "reduce-overhead")
    # torch's graphs copy in every input whose address may change and skip graphs that mutate one: mark the
    # state and the fused weights (not module parameters) as fixed, as the fast backend did before it captured
    fused = [t for layer in fused_layers(model) for f in (layer.qkv, layer.gate_up) for t in (f.weight, f.bias)]
    for tensor in state.tensors() + [t for t in fused if t is not None]:
        torch._dynamo.mark_static_address(tensor)
    options = {**decode_compile_options("reduce-overhead", state.cos.dtype), "triton.cudagraphs": True}
    compiled = torch.compile(own_code(decode_one_token), options=options, fullgraph=True, dynamic=False)

    def replay(model, state, sample):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(model, state, sample)

    return replay


def measure(model, device: str, prompt_tokens: int, steps: int, call: str = "no graph",
            skip_guards: bool = False) -> dict:
    """µs per step, host µs per call, subclass flattens per step and µs in the subclass work per step; `skip_guards`
    times the calls with Dynamo's guard evaluation skipped (`torch.compiler.set_stance`), which is unsafe in
    general and here tells the guards' share apart."""
    ids = torch.randint(0, model.config.vocab_size, (1, prompt_tokens), device=device,
                        generator=torch.Generator(device).manual_seed(0))
    state = fast_generate(model, input_ids=ids, max_new_tokens=steps + 8, eos_token_id=[],
                          pad_token_id=0).past_key_values  # a state of the right size, eager
    step = step_called(call, model, state)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.inference_mode():
        def run(n: int = steps) -> tuple[float, float]:
            state.pos.fill_(prompt_tokens)  # the first generated token's position: the same steps each time
            sync()
            began = time.perf_counter()
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=skip_guards):
                for _ in range(n):
                    step(model, state, False)
            launched = time.perf_counter()
            sync()
            return (time.perf_counter() - began) / n * 1e6, (launched - began) / n * 1e6

        with torch.compiler.set_stance("default"):
            for _ in range(3):  # compile with the guards on; a captured step warms up, then captures
                step(model, state, False)
        run(3)  # settle
        per_step, host = min(run() for _ in range(3))
        profile = cProfile.Profile()
        profile.enable()
        run()
        profile.disable()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, primitive calls, tottime, cumtime, callers)}
    flatten = sum(v[1] for k, v in stats.items() if k[2] == "__tensor_flatten__")
    overhead = sum(v[3] for k, v in stats.items() if k[2] in SUBCLASS_WORK)
    return {"step_us": per_step, "host_us": host, "flatten_calls": flatten / steps,
            "subclass_us": overhead / steps * 1e6}


def main(argv: list[str] | None = None) -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="bf16" if cuda else "fp32")
    parser.add_argument("--quant", default="none,int8", help="comma-separated playground.quantization names")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--calls", default=",".join(CALLS), help=f"comma-separated, of {', '.join(CALLS)}")
    parser.add_argument("--skip-guards", action="store_true", help="time with Dynamo's guard evaluation skipped")
    args = parser.parse_args(argv)
    device = "cuda" if cuda else "cpu"
    calls, offered = args.calls.split(","), CALLS if cuda else CALLS[:1]  # the others need CUDA
    if unknown := [c for c in calls if c not in offered]:
        parser.error(f"--calls {','.join(unknown)}: this host offers {', '.join(offered)}")
    print(f"{args.model}, {args.dtype}, {device}, torch {torch.__version__}; {args.steps} steps, best of 3"
          f"{', guard evaluation skipped' if args.skip_guards else ''}\n")
    print("| quant | weights | step called | µs per step | host µs per call | subclass flattens per step | µs per step "
          "in subclass flattening and metadata guards (profiled) |\n|---|---|---|---|---|---|---|", flush=True)
    for quant in args.quant.split(","):
        cache = ModelCache()  # one model per setting: a quantized model is not turned back
        model = cache.get(args.model, device, args.dtype, "sdpa", quant=quant)[0].model
        for call in calls:
            torch._dynamo.utils.counters.clear()
            figures = measure(model, device, args.prompt_tokens, args.steps, call, args.skip_guards)
            skipped = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]  # torch fell back to no graph
            print(f"| {quant} | {quantized_weights(model) or 'plain tensors'} | "
                  f"{call}{' (torch skipped its graphs)' if skipped else ''} | {figures['step_us']:.0f} | "
                  f"{figures['host_us']:.0f} | {figures['flatten_calls']:.0f} | {figures['subclass_us']:.0f} |",
                  flush=True)
            torch._dynamo.reset()
        del model, cache


if __name__ == "__main__":
    main()
