"""Whether torch's ahead-of-time Dynamo compile ("precompile") can give the fast decode step a warm start.

A warm process that loads inductor's cached artifacts still traces the step with Dynamo anew, which the
8B shape's first call pays on every start. `torch.compile(fn).aot_compile(example)` keeps Dynamo's
output and inductor's code together (`save_compiled_function`), and `torch.compiler.load_compiled_function`
brings it back in another process without tracing. This script compiles the fast backend's decode step
(`playground.fast.forward.decode_one_token`, with the options the fast backend compiles it with) that way,
saves it, and in a child process loads it and takes one step on a freshly loaded model of the same preset,
against the eager step's token from the same position; then calls it with a model of another shape, whose
state its guards must refuse.

    PYTHONPATH=. python3 results/cpu/precompile_step.py tiny-random-llama stdlib-llama-tiny
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from playground.fast.forward import decode_one_token
from playground.fast.generate import decode_compile_options, fast_generate, own_code
from playground.loader import MODELS


def prefilled(preset: str):
    """(model, state) with an 8-token prompt prefilled and one token decoded, on the CPU in fp32."""
    model = MODELS.get(preset, "cpu", "fp32", "sdpa")[0].model
    ids = torch.arange(1, 9)[None]
    return model, fast_generate(model, input_ids=ids, max_new_tokens=4, compile_mode="off", eos_token_id=[],
                                pad_token_id=0).past_key_values


def one_step(step, model, state) -> int:
    """The token `step` writes from the state's current position, which is put back after it."""
    pos = state.pos.clone()
    token = int(step(model, state, False)[0])
    state.pos.copy_(pos)
    return token


def compile_and_save(preset: str, path: Path) -> None:
    model, state = prefilled(preset)
    step = torch.compile(own_code(decode_one_token), options=decode_compile_options("default", torch.float32),
                         fullgraph=True, dynamic=False)
    started = time.perf_counter()
    compiled = step.aot_compile(((model, state, False), {}))
    print(f"aot_compile: {time.perf_counter() - started:.1f} s")
    compiled.save_compiled_function(str(path))
    print(f"saved: {path.stat().st_size / 1e6:.2f} MB (weights {sum(p.nbytes for p in model.parameters()) / 1e6:.1f} MB"
          " are inputs, not part of it)")


def load_and_run(preset: str, other: str, path: Path) -> None:
    model, state = prefilled(preset)
    started = time.perf_counter()
    with path.open("rb") as f:
        step = torch.compiler.load_compiled_function(f)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    token = one_step(step, model, state)
    print(f"new process: load {loaded:.2f} s, first call {1e3 * (time.perf_counter() - started):.1f} ms, token "
          f"{token}, eager step's token {one_step(decode_one_token, model, state)}")
    other_model, other_state = prefilled(other)
    try:
        one_step(step, other_model, other_state)
        print(f"{other}: ran (its guards did not refuse another shape)")
    except RuntimeError as e:
        print(f"{other}: refused by the loaded step's guards: {str(e).split('verbose_code_parts=')[-1].splitlines()[0]}")


def main(preset: str, other: str) -> None:
    with torch.inference_mode(), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "decode_step.bin"
        compile_and_save(preset, path)
        child = [sys.executable, __file__, "--load", preset, other, str(path)]
        print(subprocess.run(child, capture_output=True, text=True, check=True).stdout, end="")


if __name__ == "__main__":
    if sys.argv[1] == "--load":
        with torch.inference_mode():
            load_and_run(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
    else:
        main(sys.argv[1], sys.argv[2])
