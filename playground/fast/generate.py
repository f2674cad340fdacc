"""`fast_generate`: a drop-in for `model.generate` on the paths the engine uses, over the fast decoder.

Per token the host does only this: call the (compiled) step, and, when someone listens, read the
new ids back for the streamer, the stopping criteria and the EOS check. Everything else (cache
writes, position, EOS masking for min_new_tokens, sampling, padding of ended rows) happens on the
device inside the step.

Prefill runs eager unless compiling: then it is compiled once with dynamic shapes (no CUDA graphs,
whose fixed shapes would mean one graph per prompt length). Prefill at a real prompt length is
compute-bound, so launch overhead matters little there; the decode step is where graphs pay.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import types
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

from playground.config import AOT, COMPILE_MODES, KERNELS
from playground.fast import aot, precompile
from playground.fast.forward import decode_one_token, prefill
from playground.fast.fuse import fused_layers
from playground.fast.state import StaticState, cache_len_for, state_cache
from playground.fast.support import padding_reason, unsupported_reason



@dataclass
class FastOutput:
    sequences: torch.Tensor  # (batch, prompt + generated) int64, like generate's
    past_key_values: StaticState  # `.layers[i].keys/.values`: the static cache (whole allocation)
    state_reused: bool  # the cache (and any compiled graphs) came from an earlier run of this shape

    @property
    def kv_cache_bytes(self) -> int:
        return self.past_key_values.kv_cache_bytes


def sdpa_backends_enabled() -> tuple[bool, ...]:
    """The SDPA backends an `sdpa_kernel` context leaves on: a compiled graph bakes in the kernel it chose."""
    cuda = torch.backends.cuda
    return (cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(), cuda.cudnn_sdp_enabled(),
            cuda.math_sdp_enabled())


_kernels = contextvars.ContextVar("playground_fast_kernels", default=KERNELS[0])


@contextlib.contextmanager
def kernel_choice(kernels: str) -> Iterator[None]:
    """Steps first compiled inside take their kernels' launch configs as `kernels` says (config.KERNELS).

    "tuned": coordinate descent times candidates and keeps any that measures 0.1% faster, so where it
    stops follows the timing noise: per projection, cold compiles in separate processes landed up to 38%
    apart (results/h100/2026-12-07-tuning-spread-and-kv-append/). "fixed": inductor's deterministic mode
    times nothing and keeps its own first config for each kernel, the same in every compile (there within
    1%, at the same speed a layer, the 1B head 11% slower). Whole 1B steps on the H100: two fixed compiles
    0.4% apart, two tuned ones 12.7%, on either side of fixed; the 8B step 2.6% slower fixed than tuned; each
    cold compile 13-30 s shorter (results/h100/2026-12-07-fixed-kernels-default/). Like an `sdpa_kernel`
    context, the choice is part of each compiled step's key.
    """
    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r} is not one of: {', '.join(KERNELS)}")
    token = _kernels.set(kernels)
    try:
        yield
    finally:
        _kernels.reset(token)


def current_kernels() -> str:
    """The kernel choice steps compiled now take (`kernel_choice`)."""
    return _kernels.get()


def fixed_kernels_reason() -> str | None:
    """Why this torch cannot fix the kernels (no inductor deterministic mode), or None."""
    if hasattr(torch._inductor.config, "deterministic"):
        return None
    return (f"kernels=fixed needs inductor's deterministic mode, which torch {torch.__version__} does not have: "
            "choose kernels=tuned, or a torch that has it")


def decode_compile_options(compile_mode: str, dtype: torch.dtype) -> dict:
    """Inductor options of `compile_mode`, coordinate-descent tuning in half precision (as gpt-fast does), and PDL;
    never torch's own CUDA graphs (a mode that asks for graphs gets `CapturedStep`'s instead). Under
    `kernel_choice("fixed")`, inductor's deterministic mode as well: the same rewrite, no kernel timed.

    With tuning on, inductor rewrites a one-row matmul (every projection at batch 1) as a Triton
    multiply-and-reduce that it fuses with its neighbours and tunes for bandwidth; without it each
    projection is a separate cuBLAS call. fp32 keeps cuBLAS: it is the dtype that proves the fast
    path computes what transformers computes, and a reduction in another order would blur that.

    Programmatic dependent launch (Hopper and newer; inductor ignores it elsewhere) lets each
    Triton kernel start while the previous one drains, waiting only before it reads that one's
    output. A batch-1 step is about 230 small kernels, so the drain gaps add up: on the H200 a
    Llama-3.2-1B-shape step ran about 4% faster with it (results/h200/2026-12-03-fast-pdl-argmax). Numerics do not
    change. Inductor leaves it off by default and reads `TORCHINDUCTOR_ENABLE_PDL` ("1" is on);
    here it is on unless that variable is set to anything else.
    """
    tuning = dtype in (torch.float16, torch.bfloat16)
    options = {**torch._inductor.list_mode_options(compile_mode), "coordinate_descent_tuning": tuning,
               "triton.cudagraphs": False}
    if current_kernels() == "fixed":
        options["deterministic"] = True
    if hasattr(torch._inductor.config.triton, "enable_pdl"):  # absent from older torch releases
        options["triton.enable_pdl"] = os.environ.get("TORCHINDUCTOR_ENABLE_PDL", "1") == "1"
    return options


def replays_graphs(compile_mode: str) -> bool:
    """Whether `compile_mode` means CUDA graphs ("reduce-overhead", "max-autotune")."""
    return bool(torch._inductor.list_mode_options(compile_mode).get("triton.cudagraphs"))


class CapturedStep:
    """A compiled step captured as one CUDA graph per argument set, and replayed by the playground itself.

    torch's own CUDA graphs (inductor's under "reduce-overhead") run Dynamo's guards before every replay,
    in Python: they check each weight, and flatten each quantized weight (a torchao tensor subclass)
    twice a call. On the H200 that kept an 8B step with int8 weights waiting on the host a third of the
    time (results/h200/2026-12-04-gemlite-speculation-spread/). Nothing those guards check changes
    between calls of one step: every tensor it reads or writes lives at a fixed address in its state or
    the model (state.py), and a step is compiled per state. So the first call of each argument set
    compiles and runs the step on a side stream (autotuning and lazy initialisation stay out of the
    capture), the second captures it and replays it, and every later call is one `CUDAGraph.replay()`.
    As with torch's graphs, the outputs live in the graph's memory and its next replay overwrites them.
    """

    def __init__(self, compiled: Callable) -> None:
        self.compiled = compiled
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, object] | None] = {}  # None: warmed up, not captured

    def __call__(self, model, state: StaticState, *args):
        if args not in self.graphs:
            self.graphs[args] = None
            return self._warm_up(model, state, *args)
        if self.graphs[args] is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # other threads may use the GPU
                out = self.compiled(model, state, *args)
            self.graphs[args] = (graph, out)
        graph, out = self.graphs[args]
        graph.replay()
        return out

    def _warm_up(self, model, state: StaticState, *args):
        main, side = torch.cuda.current_stream(), torch.cuda.Stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out = self.compiled(model, state, *args)
        main.wait_stream(side)
        return out


def compile_step(fn: Callable, state: StaticState, compile_mode: str) -> Callable:
    """`fn(model, state, *args)` compiled for `state` under `compile_mode`, replayed as a `CapturedStep` where the
    mode means CUDA graphs and the state is on a GPU."""
    compiled = kept_on_disk(lambda: torch_compiled(fn, state, compile_mode), fn,
                            decode_compile_options(compile_mode, state.cos.dtype))
    return CapturedStep(compiled) if replays_graphs(compile_mode) and state.tokens.is_cuda else compiled


def torch_compiled(fn: Callable, state: StaticState, compile_mode: str) -> Callable:
    """torch.compile of `fn` for `state` with the step's options, before any capture."""
    with precompile.savable():
        return torch.compile(own_code(fn), options=decode_compile_options(compile_mode, state.cos.dtype),
                             fullgraph=True, dynamic=False)


def kept_on_disk(make: Callable[[], Callable], fn: Callable, options: dict) -> Callable:
    """`make()`'s compiled `fn`, saved to and loaded from the compile cache where this torch can
    (playground.fast.precompile), keyed with `options` and the SDPA backends left on."""
    if not precompile.available():
        return make()
    return precompile.PrecompiledStep(make, fn, dict(options, sdpa_backends=sdpa_backends_enabled()))


def own_code(fn: Callable) -> Callable:
    """`fn` with a code object of its own, to compile for one state.

    Dynamo keeps compiled graphs on the code object and refuses a ninth (its recompile limit), a hard
    error under fullgraph=True. Every state (model, batch size, dtype, cache length) guards its own graph,
    so a process that runs nine settings, or a comparison's two models and their drafts over a
    session, would fail there; with its own code object no step checks the guards of the others.
    Dynamo still remembers which sizes changed per source location, not per code object, so the steps
    compile with dynamic=False: a later state's graph is as static as the first one's.
    """
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _prefill_compile_mode(compile_mode: str) -> str | None:
    """The prefill's torch.compile mode: the decode step's without CUDA graphs (one graph per prompt length)."""
    return "max-autotune-no-cudagraphs" if compile_mode == "max-autotune" else None


def compiled_steps(model, state: StaticState, compile_mode: str, compile_prefill: bool) -> tuple[Callable, Callable]:
    """(prefill, decode_one_token) for `compile_mode`, compiled once per state and SDPA choice and kept with it.

    No torch.compile cache is keyed on the SDPA flags, so a new compile under another choice would
    still replay the first graph: the engine's `_compiling_under` makes each choice compile anew.
    """
    if compile_mode == "off":
        return prefill, decode_one_token
    key = (compile_mode, compile_prefill, sdpa_backends_enabled(), current_kernels())
    if key not in state.compiled and compile_mode == AOT:  # prefill stays eager: one package per prompt length
        ahead = aot.decode_step(model, state)  # launches each kernel from C++, still one launch per kernel
        state.compiled[key] = (prefill, CapturedStep(ahead) if state.tokens.is_cuda else ahead)
    if key not in state.compiled:
        prefill_fn = prefill
        if compile_prefill:
            mode = _prefill_compile_mode(compile_mode)

            def compiled_prefill() -> Callable:
                with precompile.savable():
                    return torch.compile(own_code(prefill), mode=mode, dynamic=True, fullgraph=True)

            prefill_fn = kept_on_disk(compiled_prefill, prefill, dict(mode=mode, dynamic=True))
        state.compiled[key] = (prefill_fn, compile_step(decode_one_token, state, compile_mode))
    return state.compiled[key]


def _eos_ids(model, eos_token_id) -> list[int]:
    if eos_token_id is None:
        eos_token_id = model.generation_config.eos_token_id
    if eos_token_id is None:
        return []
    return [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)


def _reset(state: StaticState, eos: list[int], eos_until: int, pad_id: int, temperature: float,
           starts: torch.Tensor | None = None) -> None:
    """Per-run settings, written in place so compiled graphs see them; `starts` None: no row is padded."""
    state.eos_mask.zero_()
    if eos:
        state.eos_mask[torch.tensor(eos, device=state.eos_mask.device)] = True
    state.eos_until.fill_(eos_until)
    state.pad_id.fill_(pad_id)
    state.finished.zero_()
    state.temperature.fill_(temperature)
    if starts is None:
        state.start.zero_()
    else:
        state.start.copy_(starts)


def _stop_requested(criteria: Sequence[Callable], ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """(batch,) bool: rows any criterion ends; a criterion may answer a bool or a (batch,) tensor."""
    done = torch.zeros(ids.shape[0], dtype=torch.bool)
    for criterion in criteria:
        done |= torch.as_tensor(criterion(ids, scores)).cpu()
    return done


def row_starts(attention_mask: torch.Tensor) -> torch.Tensor:
    """(batch,) each row's first prompt column: the number of left-padding zeros in its mask."""
    return (attention_mask == 0).sum(dim=1)


def is_left_padding(attention_mask: torch.Tensor) -> bool:
    """Each row 0s, then 1s to its last column: never decreasing, and the last column a 1."""
    mask = attention_mask.long()  # a bool mask's diff would be an xor
    return bool(((mask == 0) | (mask == 1)).all() and (mask.diff(dim=1) >= 0).all() and mask[:, -1].all())


def _check_request(model, input_ids, attention_mask, max_new_tokens, min_new_tokens, do_sample, temperature,
                   top_k, top_p, compile_mode) -> None:
    if compile_mode not in COMPILE_MODES:
        raise ValueError(f"compile_mode={compile_mode!r} is not one of: {', '.join(COMPILE_MODES)}")
    reason = unsupported_reason(model, total_tokens=input_ids.shape[1] + max_new_tokens, compile_mode=compile_mode)
    if reason:
        raise ValueError(reason)
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must be (batch, prompt_len) with prompt_len >= 1, got {tuple(input_ids.shape)}")
    if attention_mask is not None:
        if attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must match input_ids {tuple(input_ids.shape)}")
        if not is_left_padding(attention_mask):
            raise ValueError("the fast backend takes left padding only: each row's mask must be zeros, then ones "
                             "to the end of the prompt, with at least one one")
        reason = padding_reason(model) if not bool(attention_mask.all()) else None
        if reason:
            raise ValueError(reason)
    if max_new_tokens < 1 or (min_new_tokens or 0) > max_new_tokens:
        raise ValueError(f"need 1 <= max_new_tokens and min_new_tokens <= max_new_tokens, got "
                         f"{max_new_tokens}, {min_new_tokens}")
    if do_sample and (temperature is not None and temperature <= 0):
        raise ValueError(f"sampling needs temperature > 0, got {temperature}")
    if do_sample and (top_k not in (None, 0) or top_p not in (None, 1.0)):
        raise ValueError(f"the fast backend samples from the full distribution; top_k={top_k}, top_p={top_p} "
                         "are not implemented")


def fast_generate(model, *, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                  max_new_tokens: int, min_new_tokens: int | None = None, do_sample: bool = False,
                  temperature: float | None = None, top_k: int | None = None, top_p: float | None = None,
                  streamer=None, stopping_criteria: Sequence[Callable] | None = None, compile_mode: str = "off",
                  eos_token_id: int | list[int] | None = None, pad_token_id: int | None = None,
                  compile_prefill: bool = True) -> FastOutput:
    """Generate like `model.generate(...)` (greedy or temperature sampling) with the fast decoder.

    `streamer.put` gets the prompt (batch, prompt_len) on the CPU before prefill, then each new
    token (batch,); `stopping_criteria` and EOS end the run (rows that end early are padded with
    `pad_token_id`, as generate does); `min_new_tokens` masks EOS until reached. `compile_mode`
    other than "off" (CUDA only) compiles the decode step for CUDA-graph replay, and the prefill
    with dynamic shapes unless `compile_prefill` is False. Raises ValueError with the reason for
    anything it cannot run. It always decodes from its own static KV cache.
    """
    _check_request(model, input_ids, attention_mask, max_new_tokens, min_new_tokens, do_sample, temperature,
                   top_k, top_p, compile_mode)
    batch, prompt_len = input_ids.shape
    min_new = min_new_tokens or 0
    eos = _eos_ids(model, eos_token_id)
    if pad_token_id is None:
        pad_token_id = model.generation_config.pad_token_id
    pad_token_id = pad_token_id if pad_token_id is not None else (eos[0] if eos else 0)
    cache_len = cache_len_for(prompt_len + max_new_tokens, getattr(model.config, "max_position_embeddings", None))
    criteria = list(stopping_criteria or [])
    eos_can_end = bool(eos) and min_new < max_new_tokens
    listening = streamer is not None or criteria or eos_can_end

    starts = row_starts(attention_mask) if attention_mask is not None else torch.zeros(batch, dtype=torch.long)
    padded = bool(starts.any())

    fused_layers(model)
    with torch.inference_mode():
        state, reused = state_cache(model).get(model, batch, cache_len, padded)
        _reset(state, eos, prompt_len + min_new - 1, pad_token_id,
               1.0 if temperature is None else float(temperature), starts)
        prefill_fn, decode_fn = compiled_steps(model, state, compile_mode, compile_prefill)
        if streamer is not None:
            streamer.put(input_ids.cpu())
        _, logits = prefill_fn(model, state, input_ids.to(state.tokens.device), do_sample)
        listener = Listener(batch, streamer, criteria, eos, pad_token_id, state.tokens.device) if listening else None
        generated = decode_n_tokens(model, state, decode_fn, logits, prompt_len, max_new_tokens, do_sample, listener)
        if streamer is not None:
            streamer.end()
        sequences = state.tokens[:, : prompt_len + generated].clone()
    return FastOutput(sequences, state, reused)


def decode_n_tokens(model, state: StaticState, decode_fn: Callable, logits: torch.Tensor, prompt_len: int,
                    max_new_tokens: int, sample: bool, listener: Listener | None) -> int:
    """Run decode steps until max_new_tokens or every row has ended; returns the number of new tokens.

    Without a listener nothing is read back and the device runs ahead of Python. With one, the
    step that makes token g + 1 is launched before token g is read back (as transformers' deferred
    stop check does), so the device computes while the host streams and checks; a run that ends at
    token g has computed one token more, which is never streamed or returned. The first token is
    read before any decode step is launched, so its time is prefill alone (TTFT) and decode time
    spans exactly the launches of steps 2..n.
    """
    if listener is None:
        for _ in range(max_new_tokens - 1):
            decode_fn(model, state, sample)
        return max_new_tokens
    for generated in range(1, max_new_tokens + 1):
        column = prompt_len + generated - 1  # where token `generated` sits in state.tokens
        listener.fetch(state, column, logits)
        read_now = generated == 1  # token 1 is read before step 2 starts: its time is prefill alone
        if read_now and listener.all_ended(state, column + 1):
            return generated
        if generated < max_new_tokens:
            _, logits = decode_fn(model, state, sample)
        if not read_now and listener.all_ended(state, column + 1):
            return generated
    return max_new_tokens


class Listener:
    """The host side of each step: hand the new ids to the streamer, then ask criteria and EOS whether to stop.

    `fetch` queues the copy of one token column to the host and returns at once; `all_ended` waits
    for that copy only (not for steps queued after it), so its clock reads and checks overlap the
    next step on the device. A stopping criterion that answers with a device tensor (transformers'
    own do) makes each check wait for the queued step; the engine's answers with a host bool.
    """

    def __init__(self, batch: int, streamer, criteria: Sequence[Callable], eos: list[int], pad_id: int,
                 device: torch.device) -> None:
        self.streamer, self.criteria = streamer, list(criteria)
        self.eos = torch.tensor(eos, dtype=torch.long)
        self.pad_id = pad_id
        self.ended = torch.zeros(batch, dtype=torch.bool)
        cuda = device.type == "cuda"
        self.host = torch.zeros(batch, dtype=torch.long, pin_memory=cuda)
        self.stream = torch.cuda.current_stream(device) if cuda else None  # where the copy runs
        self.copied = torch.cuda.Event() if cuda else None
        self.scores: torch.Tensor | None = None

    def fetch(self, state: StaticState, column: int, logits: torch.Tensor) -> None:
        self.host.copy_(state.tokens[:, column], non_blocking=self.copied is not None)
        if self.criteria:  # a replayed graph overwrites its logits on the next step: criteria get a copy
            self.scores = logits.clone()
        if self.copied is not None:
            self.copied.record(self.stream)

    def all_ended(self, state: StaticState, length: int) -> bool:
        if self.copied is not None:
            self.copied.synchronize()
        token_cpu = self.host.clone()
        if self.streamer is not None:
            self.streamer.put(token_cpu)
        if self.criteria:
            stop = _stop_requested(self.criteria, state.tokens[:, :length], self.scores)
            newly = stop & ~self.ended  # on the host: a device read here would wait for the queued step
            if bool(newly.any()):
                newly = newly.to(state.finished.device)
                state.finished |= newly  # rows ended here are padded from the next token on,
                if length < state.cache_len:  # including the one already computed
                    state.tokens[:, length].masked_fill_(newly, self.pad_id)
            self.ended |= stop
        self.ended |= torch.isin(token_cpu, self.eos)
        return bool(self.ended.all())
