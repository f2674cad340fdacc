"""What a compiled decode step costs the host, with plain weights and with quantized ones (torchao tensor subclasses).

A CUDA graph replays a step's kernels without the host, but every call still runs Python before the replay:
Dynamo's guards on the step's inputs, and AOTAutograd's runtime wrapper. A quantized weight is a torchao tensor
subclass, and Dynamo's guards flatten each one into its inner tensors twice a call and check its metadata,
in Python. If the host's share exceeds the step's GPU time, the GPU waits: on the H200 an 8B step with
quantized weights (gemlite's kernels) kept the GPU busy 64% of the time, a bf16 step 100%
(results/h200/2026-12-04-gemlite-speculation-spread/); whether these guards are all of that wait is what
this measures on a GPU.

This compiles the fast backend's decode step without CUDA graphs and times it per call, and profiles
the host's Python: calls to `__tensor_flatten__` per step and the time spent under them, and the time in
the guards' metadata checks of subclass inputs. On a CPU the step's compute is host time too, so the
overhead column, not the step time, is the figure that carries over to a GPU.

    python -m benchmarks.step_overhead                              # CPU: the shipped model, none and int8
    python -m benchmarks.step_overhead --skip-guards                # the same, Dynamo's guards not evaluated
    python -m benchmarks.step_overhead --model llama-3.2-1b-shape --dtype bf16 --quant none,int8,int8-gemlite   # CUDA
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Callable

import torch

from playground.fast.generate import compiled_steps, fast_generate
from playground.loader import ModelCache
from playground.presets import DEFAULT_MODEL
from playground.quantization import quantized_weights

# Host functions that run per call only because inputs are tensor subclasses: Dynamo's guards (torch 2.13 names)
SUBCLASS_WORK = ("__tensor_flatten__", "metadata_checker")


def compiled_step(model, state, device: str) -> Callable:
    """The fast backend's own decode step, compiled without CUDA graphs (so each call runs the graph's launches
    and its Python both, and the host's share can be profiled apart)."""
    mode = "max-autotune-no-cudagraphs" if device == "cuda" else "default"
    return compiled_steps(model, state, mode, compile_prefill=False)[1]


def measure(model, device: str, prompt_tokens: int, steps: int, skip_guards: bool = False) -> dict:
    """µs per step, subclass flattens per step and µs in the subclass work per step; `skip_guards` times the
    calls with Dynamo's guard evaluation skipped (`torch.compiler.set_stance`), which is unsafe in general and
    here tells the guards' share apart."""
    ids = torch.randint(0, model.config.vocab_size, (1, prompt_tokens), device=device,
                        generator=torch.Generator(device).manual_seed(0))
    state = fast_generate(model, input_ids=ids, max_new_tokens=steps + 8, eos_token_id=[],
                          pad_token_id=0).past_key_values  # a state of the right size, eager
    step = compiled_step(model, state, device)
    with torch.inference_mode():
        def run(n: int = steps) -> float:
            state.pos.fill_(prompt_tokens)  # the first generated token's position: the same steps each time
            if device == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=skip_guards):
                for _ in range(n):
                    step(model, state, False)
            if device == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - began) / n * 1e6

        with torch.compiler.set_stance("default"):
            step(model, state, False)  # compile with the guards on
        run(3)  # settle
        per_step = min(run() for _ in range(3))
        profile = cProfile.Profile()
        profile.enable()
        run()
        profile.disable()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, primitive calls, tottime, cumtime, callers)}
    flatten = sum(v[1] for k, v in stats.items() if k[2] == "__tensor_flatten__")
    overhead = sum(v[3] for k, v in stats.items() if k[2] in SUBCLASS_WORK)
    return {"step_us": per_step, "flatten_calls": flatten / steps, "subclass_us": overhead / steps * 1e6}


def main(argv: list[str] | None = None) -> None:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="bf16" if cuda else "fp32")
    parser.add_argument("--quant", default="none,int8", help="comma-separated playground.quantization names")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--skip-guards", action="store_true", help="time with Dynamo's guard evaluation skipped")
    args = parser.parse_args(argv)
    device = "cuda" if cuda else "cpu"
    print(f"{args.model}, {args.dtype}, {device}, torch {torch.__version__}; the decode step compiled without CUDA "
          f"graphs, {args.steps} steps, best of 3{', guard evaluation skipped' if args.skip_guards else ''}\n")
    print("| quant | weights | µs per step | subclass flattens per step | µs per step in subclass flattening and "
          "metadata guards (profiled) |\n|---|---|---|---|---|", flush=True)
    for quant in args.quant.split(","):
        cache = ModelCache()  # one model per setting: a quantized model is not turned back
        model = cache.get(args.model, device, args.dtype, "sdpa", quant=quant)[0].model
        figures = measure(model, device, args.prompt_tokens, args.steps, args.skip_guards)
        print(f"| {quant} | {quantized_weights(model) or 'plain tensors'} | {figures['step_us']:.0f} | "
              f"{figures['flatten_calls']:.0f} | {figures['subclass_us']:.0f} |", flush=True)
        del model, cache
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
