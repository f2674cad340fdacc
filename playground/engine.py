"""The measuring engine: `generate(config)` runs a configuration and measures it truthfully.

It yields `Phase` events (loading, warm-up, repeat, profiling), a `Token` event for every token
as it is produced, and ends with one `Result` whose record holds every figure. The UI, the CLI
and the tests all just iterate it.

Why the numbers can be trusted:
- every clock read follows a device synchronize (in `_Recorder.put`, which every backend calls once
  before prefill and once after each step), so host timestamps are when the GPU finished;
- prefill (TTFT) and decode (tok/s) are separate figures; decode never includes prefill;
- warm-up passes, and the cold first pass that pays for compilation, are timed and reported apart
  from the steady-state repeats;
- kernel names and GPU busy % come from one extra profiled pass, never from the timed repeats;
- device work runs under one lock, so two runs never interleave on the device.

What generates is the configured backend (`playground.backends`); the engine never asks which.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import queue
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil
import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from playground import (attention, backends, capabilities, kernels, memory, parallel, quantization, roofline,
                        speculative, warm)
from playground.compat import cudagraph_trees_in_this_thread
from playground.config import ConfigError, RunConfig
from playground.hardware import OtherCpuLoad, memory_bandwidth_gb_s, synchronize
from playground.loader import (MODELS, TORCH_DTYPES, LoadedModel, LoadError, ModelCache, cache_key,
                               explain_load_error, hub_download_bytes, matmul_shape, max_context, model_source)
from playground.backends import request
from playground.diagnostics import HEADLINES
from playground.metrics import (PassTiming, StepCounts, aggregate_tok_s, kv_bytes_per_token_measured, padding,
                                paired_verdict, prefill_flops, speculation, summarize)
from playground.checkpoint import random_checkpoint
from playground.presets import PRESETS
from playground.record import RunRecord, environment

PROFILE_NEW_TOKENS = 9  # one prefill step and eight decode steps are enough to name the kernels
POLL_S = 0.02  # how often the consumer picks up tokens; timings are taken in the generate thread
LOAD_POLL_S = 0.5  # how often a long load or a first compiled call reports progress
RSS_SAMPLE_S = 0.005  # CPU memory sampling period: a psutil read costs about 20 µs
DEVICE_LOCK = threading.Lock()
# All device work runs on this one thread: CUDA graphs captured by torch.compile (reduce-overhead)
# belong to the thread that recorded them, and the profiler wants one thread too.
DEVICE_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="device")
log = logging.getLogger("playground")


def _init_profiler_on_main_thread() -> None:
    """Start torch's profiler once on the thread that imported torch, before any profiled pass.

    Kineto binds its client to that thread; first started on the device thread instead, it prints
    "ERROR: External init callback must run in same thread as registerClient", which reads like a
    failed run. Started here first, it stays quiet. The cost (about 1.5 s on a small CPU) is the
    profiler's one-time start, which the first profiled pass would otherwise pay.
    """
    if threading.current_thread() is threading.main_thread():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            pass


_init_profiler_on_main_thread()


@dataclass(frozen=True)
class Phase:
    phase: str  # loading | warmup | repeat | compiling (a first compiled call's progress, within its pass) | profiling
    detail: str = ""
    index: int = 0  # 1-based pass number within the phase
    total: int = 0


@dataclass(frozen=True)
class Token:
    pass_name: str
    index: int  # position in the generated output, from 0
    token_id: int
    text: str  # the text this token adds (may be "" while a multi-byte character is incomplete)
    t_ms: float  # time since this pass's prefill started
    draft: bool = False  # an accepted draft: emitted by the target step that verified it, before its own token


@dataclass(frozen=True)
class Result:
    record: RunRecord


Event = Phase | Token | Result


class Stopped(Exception):
    """The user asked to stop; the run ends without a record in the history."""


@dataclass
class PassOutput:
    timing: PassTiming
    ids: list[int]
    kv_cache_bytes: int
    peak_mem_bytes: int
    inference_mode: bool
    phases: dict[str, kernels.PhaseKernels] = field(default_factory=dict)
    steps: StepCounts | None = None  # speculative decoding's counts (spec != none)


class _StopOnEvent(StoppingCriteria):
    """Ends generate within one step once `event` is set (Stop button, closed stream)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids, scores, **kwargs) -> bool:
        return self.event.is_set()


class _Recorder(BaseStreamer):
    """Timestamps generate's callbacks: the first is the prompt (prefill starts), then one per step.

    A step hands over one token per sequence, or under speculative decoding (batch 1) its accepted drafts
    and the target's own token together, as a (1, k) tensor; all k get the step's timestamp.

    With `mark_phases` it also opens `playground::prefill` / `playground::decode` profiler ranges
    so the profiled pass can be split by phase.
    """

    def __init__(self, device: str, sink: queue.SimpleQueue, mark_phases: bool = False) -> None:
        self.device, self.sink, self.mark_phases = device, sink, mark_phases
        self.prefill_start: float | None = None
        self.times: list[float] = []
        self.ids: list[int] = []
        self.emitted: list[int] = []  # tokens per step
        self._range = None

    def _mark(self, name: str | None) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
        self._range = torch.autograd.profiler.record_function(kernels.PHASE_PREFIX + name).__enter__() if name else None

    def put(self, value: torch.Tensor) -> None:
        # A token already on the host was computed before it was copied, so its clock read needs no
        # device-wide sync (which would also wait for a step a backend queued after it).
        if self.prefill_start is None or value.device.type != "cpu":
            synchronize(self.device)
        now = time.perf_counter()
        if self.prefill_start is None:
            self.prefill_start = now
            if self.mark_phases:
                self._mark("prefill")
            return
        tokens = value[0].tolist() if value.dim() == 2 else [int(value[0])]  # row 0 of the batch
        self.emitted.append(len(tokens))
        for position, token_id in enumerate(tokens):  # accepted drafts first, then the target's own token
            self.times.append(now)
            self.ids.append(token_id)
            self.sink.put((len(self.ids) - 1, token_id, now - self.prefill_start, position < len(tokens) - 1))
        if self.mark_phases:
            self._mark("decode")

    def end(self) -> None:
        if self.mark_phases:
            self._mark(None)


class _SpeculationProbe:
    """Measures speculative decoding while a pass runs: hooks count the target model's forward passes and
    the drafts each verifies (its input beyond the prompt on the first pass, beyond the one new token after),
    and time every forward pass of the draft model between device synchronizes."""

    def __init__(self, lm: LoadedModel, prompt_tokens: int) -> None:
        self.lm, self.prompt_tokens = lm, prompt_tokens
        self.drafted: list[int] = []
        self.draft_spans: list[tuple[float, float]] = []  # (start, end) of each draft forward pass
        self._hooks: list = []
        self._started = 0.0

    def _target_step(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        positions = ids.shape[1] if ids is not None else kwargs["inputs_embeds"].shape[1]
        self.drafted.append(positions - (1 if self.drafted else self.prompt_tokens))

    def _draft_start(self, module, args) -> None:
        synchronize(self.lm.device)
        self._started = time.perf_counter()

    def _draft_end(self, module, args, output) -> None:
        synchronize(self.lm.device)
        self.draft_spans.append((self._started, time.perf_counter()))

    def __enter__(self) -> _SpeculationProbe:
        self._hooks.append(self.lm.model.register_forward_pre_hook(self._target_step, with_kwargs=True))
        if self.lm.draft is not None:
            draft = self.lm.draft.model
            self._hooks += [draft.register_forward_pre_hook(self._draft_start),
                            draft.register_forward_hook(self._draft_end)]
        return self

    def __exit__(self, *exc) -> None:
        for hook in self._hooks:
            hook.remove()

    def counts(self, recorder: _Recorder, drafting: backends.Drafting | None) -> StepCounts:
        """The pass's counts, from the hooks or from what the backend measured itself (`drafting`); draft
        time is what falls in decode, from the first token to the last."""
        first, last = recorder.times[0], recorder.times[-1]
        if drafting is not None:
            return StepCounts(drafting.drafted, tuple(recorder.emitted), drafting.draft_s, drafting.draft_calls,
                              last - first, drafting.verify_s)
        decoding = [end - start for start, end in self.draft_spans if start >= first and end <= last]
        return StepCounts(tuple(self.drafted), tuple(recorder.emitted), sum(decoding), len(decoding), last - first)


class IncrementalDecoder:
    """Text for one token at a time without re-decoding the whole output (O(1) per token).

    Holds back text while a multi-byte character is incomplete, so no U+FFFD ever reaches the user.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = self.read = 0

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        before = self.tokenizer.decode(self.ids[self.prefix:self.read], skip_special_tokens=True)
        after = self.tokenizer.decode(self.ids[self.prefix:], skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return after[len(before):]
        return ""


_NOT_COMPILED = object()
_compiled_sdpa_backend: object = _NOT_COMPILED  # forced SDPA backend of the process's compiled graphs


def _compiling_under(backend: str | None) -> contextlib.AbstractContextManager:
    """Make a compiled run trace and compile under its own forced SDPA backend; enter on the device thread.

    torch.compile keys none of its caches on the SDPA backend flags, so without this a graph made
    under one choice is replayed under another (seen on the H200: `sdpa:math` after `sdpa`
    replayed cuDNN with no recompile). Two layers need handling:
    - dynamo's in-process code cache: `torch._dynamo.reset()` when the choice differs from the
      last compiled run's (it also frees the CUDA graphs, which belong to this thread);
    - inductor's FX-graph and AOTAutograd caches, in memory and on disk: a forced choice compiles
      with them off (neither read nor written), so they only ever hold graphs made under torch's
      own choice, and the forced run's cold start is a real compile.
    """
    global _compiled_sdpa_backend
    cudagraph_trees_in_this_thread()
    if _compiled_sdpa_backend is not _NOT_COMPILED and _compiled_sdpa_backend != backend:
        torch._dynamo.reset()
    _compiled_sdpa_backend = backend
    if backend is None:
        return contextlib.nullcontext()
    return torch.compiler.config.patch(force_disable_caches=True)


class _RssGrowth:
    """Peak growth of the process's RSS while the block runs, sampled every RSS_SAMPLE_S on a side thread.

    A CPU has no counter like CUDA's max_memory_allocated, and the whole RSS grows over a session
    (libraries, earlier models, allocator slack), so later runs would look bigger. The growth from the
    block's start is what this call added: KV cache, activations, logits.
    """

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.peak = self.start = 0
        self.done = threading.Event()

    def _sample(self) -> None:
        while not self.done.wait(RSS_SAMPLE_S):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> _RssGrowth:
        self.peak = self.start = self.process.memory_info().rss
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.sampler.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def growth_bytes(self) -> int:
        return self.peak - self.start


def _drain(sink: queue.SimpleQueue, timeout: float | None = None) -> list:
    """Wait for the next item (none after `timeout` seconds: []), then let more pile up for POLL_S and take them all.

    Waking once per POLL_S instead of once per token keeps this consumer from fighting the
    generate thread for the GIL, which costs decode speed on small CPUs.
    """
    try:
        items = [sink.get(timeout=timeout)]
    except queue.Empty:
        return []
    time.sleep(POLL_S)
    while not sink.empty():
        items.append(sink.get())
    return items


def _generate_on_device(backend: backends.Backend, call: functools.partial, config: RunConfig, device: str,
                        profile: bool, probe: contextlib.AbstractContextManager) -> dict[str, Any]:
    """One timed generate `call` on the device thread: clock reads after a sync; optionally under the profiler."""
    result: dict[str, Any] = {}
    torch.manual_seed(config.seed)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    rss = _RssGrowth() if device == "cpu" else contextlib.nullcontext()
    with rss, probe, torch.inference_mode(), attention.sdpa_context(config.attn):
        result["inference_mode"] = torch.is_inference_mode_enabled()
        synchronize(device)
        result["call_start"] = time.perf_counter()
        if profile:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if device == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            with torch.profiler.profile(activities=activities) as prof:
                out = call()
            result["phases"] = kernels.phases_from_profile(prof)
        else:
            out = call()
        synchronize(device)
        result["end"] = time.perf_counter()
    result["kv"] = backend.kv_cache_bytes(out)
    result["drafting"] = backend.speculation(out)
    # what the call used beyond the weights: CUDA's peak counts them, the RSS growth does not
    result["mem"] = torch.cuda.max_memory_allocated() if device == "cuda" else rss.growth_bytes
    return result


def _run_pass(config: RunConfig, lm: LoadedModel, input_ids: torch.Tensor, new_tokens: int, stop: threading.Event,
              pass_name: str, profile: bool = False, compiling: bool = False) -> Iterator[Token | Phase]:
    """Run one generate call on the device thread and yield its tokens as they come; returns a PassOutput.

    On a first compiled call (`compiling`), a "compiling" phase with the seconds so far is yielded whenever no
    token has come for LOAD_POLL_S: the prefill and the decode step each compile on their first call, which
    takes minutes on a large model."""
    sink: queue.SimpleQueue = queue.SimpleQueue()
    done = object()
    recorder = _Recorder(lm.device, sink, mark_phases=profile)
    backend = backends.get(config.backend)
    call = functools.partial(backend.generate, config, lm, input_ids, new_tokens, recorder,
                             StoppingCriteriaList([_StopOnEvent(stop)]))
    probe = _SpeculationProbe(lm, input_ids.shape[1]) if speculative.REGISTRY[config.spec].speculates else None

    def work() -> dict[str, Any]:
        try:
            compiling = contextlib.nullcontext() if config.compile == "off" else _compiling_under(config.sdpa_backend)
            with compiling:
                return _generate_on_device(backend, call, config, lm.device, profile,
                                           probe or contextlib.nullcontext())
        finally:
            sink.put(done)  # wakes the consumer whether generate returned or raised

    decoder = IncrementalDecoder(lm.tokenizer)
    worker = DEVICE_THREAD.submit(work)
    started, finished = time.perf_counter(), False
    try:
        while not finished:
            items = _drain(sink, LOAD_POLL_S if compiling else None)
            if not items:
                yield Phase("compiling", f"first call, {time.perf_counter() - started:.0f} s so far")
            for item in items:
                if item is done:
                    finished = True
                    break
                index, token_id, t_s, draft = item
                yield Token(pass_name, index, token_id, decoder.add(token_id), t_s * 1e3, draft)
    finally:
        if not finished:  # the consumer went away mid-pass: stop generating, free the device
            stop.set()
        concurrent.futures.wait([worker])
    result = worker.result()  # re-raises what generate raised
    if stop.is_set():
        raise Stopped(f"stopped after {len(recorder.ids)} tokens of {pass_name}")
    if not recorder.times:
        raise RuntimeError("generate produced no tokens")
    timing = PassTiming(recorder.prefill_start, tuple(recorder.times), result["end"], result["call_start"])
    return PassOutput(timing, recorder.ids, result["kv"], result["mem"], result["inference_mode"],
                      result.get("phases", {}), probe.counts(recorder, result["drafting"]) if probe else None)


def prompt_ids(config: RunConfig, tokenizer, model_config) -> torch.Tensor:
    """The prompt's ids, (1, n) on the CPU: the text tokenized, or a seeded synthetic prompt of non-special ids.

    Refuses an empty prompt and one that with the new tokens overflows the model's context. Needs no
    weights, so the UI runs the same check before Run.
    """
    if config.prompt is not None:
        ids = tokenizer(config.prompt, return_tensors="pt")["input_ids"]
    else:
        vocab = min(len(tokenizer), model_config.vocab_size)
        special = set(tokenizer.all_special_ids)
        pool = torch.tensor([i for i in range(vocab) if i not in special])
        g = torch.Generator().manual_seed(config.seed)
        ids = pool[torch.randint(len(pool), (1, config.prompt_tokens), generator=g)]
    if ids.shape[1] == 0:
        raise ConfigError("the prompt encodes to zero tokens")
    total, context = ids.shape[1] + config.new_tokens, max_context(model_config)
    if context and total > context:
        raise ConfigError(f"prompt ({ids.shape[1]} tokens) + new tokens ({config.new_tokens}) = {total} exceeds "
                          f"the model's context of {context} tokens")
    return ids


def _blank_record(config: RunConfig) -> RunRecord:
    return RunRecord(
        model=config.model, backend=config.backend, quant=config.quant, spec=config.spec,
        draft_tokens=config.draft_tokens, draft_model=config.draft_model, attn=config.attn, use_cache=config.use_cache,
        cache_impl=config.cache_impl, cache_impl_effective=config.cache_impl_effective,
        dtype=config.dtype, compile=config.compile, device=config.device, batch_size=config.batch_size,
        prompt_tokens=config.prompt_tokens, new_tokens=config.new_tokens, mode=config.mode,
        repeats=config.repeats, warmup=config.warmup, label=config.label, config=config.to_dict(),
    )


def _fill_figures(record: RunRecord, config: RunConfig, lm: LoadedModel, cold: PassOutput,
                  steady: list[PassOutput]) -> None:
    timings = [p.timing for p in steady]
    ttft, decode, e2e = (summarize([getattr(t, name) for t in timings]) for name in ("ttft_ms", "decode_tok_s", "e2e_ms"))
    itl = summarize([x for t in timings for x in t.itl_ms])
    record.ttft_ms, record.ttft_ms_std = ttft.mean, ttft.std
    if decode:
        record.decode_tok_s, record.decode_tok_s_std = decode.mean, decode.std
        record.aggregate_decode_tok_s, record.aggregate_decode_tok_s_std = (
            aggregate_tok_s(decode.mean, config.batch_size), aggregate_tok_s(decode.std, config.batch_size))
    if itl:
        record.itl_ms_mean, record.itl_ms_p50, record.itl_ms_p90, record.itl_ms_p99 = itl.mean, itl.p50, itl.p90, itl.p99
    record.e2e_ms, record.e2e_ms_std = e2e.mean, e2e.std
    record.ttft_ms_runs = [t.ttft_ms for t in timings]
    if all(t.decode_tok_s for t in timings):
        record.decode_tok_s_runs = [t.decode_tok_s for t in timings]
    record.tokens_generated = steady[-1].timing.tokens
    record.cold_ttft_ms, record.cold_e2e_ms = cold.timing.ttft_ms, cold.timing.e2e_ms
    if config.compile != "off":
        record.compile_s = max(0.0, cold.timing.e2e_ms - e2e.mean) / 1e3
    record.weights_mb = lm.param_bytes / 2**20
    if lm.device == "cuda":
        record.peak_mem_mb, record.peak_mem_kind = max(p.peak_mem_bytes for p in steady) / 2**20, "cuda_max_allocated"
    else:
        record.peak_mem_mb = (lm.param_bytes + max(p.peak_mem_bytes for p in steady)) / 2**20
        record.peak_mem_kind = "weights_plus_rss_growth"
    record.inference_mode = all(p.inference_mode for p in steady)
    record.model_training = lm.model.training
    record.kv_cache_mb = steady[-1].kv_cache_bytes / 2**20
    record.kv_bytes_per_token = memory.kv_cache_bytes(lm.model.config, 1, 1, record.dtype_effective)
    record.kv_bytes_per_token_measured = kv_bytes_per_token_measured(
        steady[-1].kv_cache_bytes, config.batch_size, record.prompt_tokens, record.tokens_generated)
    record.output_ids = steady[-1].ids
    record.output_text = lm.tokenizer.decode(steady[-1].ids, skip_special_tokens=True)
    record.itl_ms = steady[-1].timing.itl_ms
    shape = matmul_shape(lm.model)
    if shape and record.ttft_ms:
        flops = prefill_flops(shape, record.prompt_tokens, config.batch_size)
        record.prefill_tflop_s = flops / (record.ttft_ms / 1e3) / 1e12
    bandwidth = memory_bandwidth_gb_s() if lm.device == "cuda" else None
    if bandwidth and record.decode_tok_s:
        _fill_roofline(record, config, lm, bandwidth, steady[-1].kv_cache_bytes)
    if steady[-1].steps is not None:
        _fill_speculation(record, config, [p.steps for p in steady])
    else:
        record.spec_effective = "none"


def _fill_speculation(record: RunRecord, config: RunConfig, passes: list[StepCounts]) -> None:
    last, figures = passes[-1], speculation(passes)
    record.target_steps, record.drafted_tokens, record.accepted_tokens = (
        last.target_steps, sum(last.drafted), last.accepted)
    record.acceptance_rate, record.tokens_per_step = figures.acceptance_rate, figures.tokens_per_step
    record.draft_share_pct, record.draft_step_ms = figures.draft_share_pct, figures.draft_step_ms
    record.verify_step_ms = figures.verify_step_ms
    record.draft_tokens_max = max(max(p.drafted) for p in passes)
    record.spec_effective = config.spec if record.draft_tokens_max else "none"
    if not record.draft_tokens_max:
        record.fallback = "; ".join(filter(None, [record.fallback, f"spec={config.spec} drafted no token: every "
                                                  "target step ran alone (prompt lookup finds no n-gram of the "
                                                  "output in the prompt)"]))


def _fill_roofline(record: RunRecord, config: RunConfig, lm: LoadedModel, bandwidth: float, kv_held: int) -> None:
    kind = roofline.kv_read(config.use_cache, config.cache_impl_effective, config.backend, config.attn)
    per_token = memory.kv_cache_bytes(lm.model.config, 1, config.batch_size, record.dtype_effective)
    step = roofline.step_bytes(roofline.decode_weight_bytes(lm.model), kind, per_token, record.prompt_tokens,
                               record.tokens_generated, kv_held)
    record.bandwidth_gb_s = bandwidth
    record.roofline_weight_mb, record.roofline_kv_mb, record.roofline_kv_read = (
        step.weights / 2**20, step.kv / 2**20, step.kv_read)
    record.roofline_tok_s = roofline.roofline_tok_s(bandwidth, step)
    record.bandwidth_roofline_pct = 100 * record.decode_tok_s / record.roofline_tok_s


def _fill_kernels(record: RunRecord, config: RunConfig, profiled: PassOutput) -> None:
    phases = profiled.phases
    record.attn_kernels = {phase: seen.names for phase, seen in phases.items()}
    record.attn_families = {phase: seen.families for phase, seen in phases.items()}
    record.matmul_kernels = {phase: seen.matmuls for phase, seen in phases.items()}
    decode = phases.get("decode")
    steps = profiled.timing.tokens - 1
    if decode and decode.kernel_us and steps > 0 and record.itl_ms_mean:
        # GPU kernel time per decode step (profiled) over wall time per step (timed repeats, unprofiled):
        # the profiler slows the host, so its own wall clock would understate how busy the GPU is.
        record.gpu_busy_pct = min(100.0, 100 * decode.kernel_us / steps / (record.itl_ms_mean * 1e3))
        record.decode_top_kernels = [(name, us / steps) for name, us in decode.top_kernels]
    if decode and steps > 0 and config.parallel == "tp":
        record.comm_ms_per_step = decode.comm_us / steps / 1e3
    notes = [n for n in (record.fallback, kernels.fallback(config.attn, phases),
                         kernels.quant_fallback(config.quant, phases)) if n]
    record.fallback = "; ".join(notes) or None


def _key(config: RunConfig, device: str, dtype: str) -> tuple:
    return cache_key(config.model, device, dtype, config.transformers_attn, config.trust_remote_code, config.quant,
                     config.parallel)


def check_memory(config: RunConfig, models: ModelCache, device: str, dtype: str,
                 alongside: bool = False) -> memory.Estimate:
    """Refuse, with the numbers, a run whose weights and KV cache cannot fit in free memory; else the estimate.
    `alongside`: the models held now stay loaded beside it (an interleaved A-vs-B run), so their memory is not free."""
    key = _key(config, device, dtype)
    # before tokenizing, a text prompt has at most one token per UTF-8 byte (plus specials)
    prompt_tokens = config.prompt_tokens or len(config.prompt.encode("utf-8")) + 2
    model_config = models.config_for(config.model, config.trust_remote_code)
    try:
        est = memory.estimate(config, model_config, device, dtype, prompt_tokens,
                              0 if alongside else models.held_bytes, reuse=models.holds(key))
    except ValueError as exc:  # e.g. a config that AutoModelForCausalLM cannot build
        raise LoadError(explain_load_error(config.model, model_source(config.model), exc)) from exc
    memory.refuse_if_too_big(est, device, prompt_tokens + config.new_tokens, config.batch_size)
    return est


def _load_with_progress(config: RunConfig, models: ModelCache, device: str, dtype: str,
                        keep: tuple | None = None) -> Iterator[Phase]:
    """Load on the device thread, saying every LOAD_POLL_S how long it has taken and, for a hub id, how many
    bytes have arrived in the Hugging Face cache so far; returns (model, reused)."""
    quant = "" if config.quant == "none" else f", quantized {config.quant}"
    where = {"none": device, "device_map": "the GPUs (device_map=auto)",
             "tp": f"{device} rank {parallel.rank()} of {config.devices}"}[config.parallel]
    what = f"{config.model} ({dtype}, {config.transformers_attn}{quant}) on {where}"
    yield Phase("loading", what)
    hub = model_source(config.model) == "hub"
    before = hub_download_bytes(config.model) if hub else 0
    start = time.perf_counter()
    future = DEVICE_THREAD.submit(models.get, config.model, device, dtype, config.transformers_attn,
                                  config.trust_remote_code, config.quant, config.parallel, keep=keep)
    while True:
        try:
            return future.result(timeout=LOAD_POLL_S)
        except concurrent.futures.TimeoutError:
            fetched = f"downloaded {(hub_download_bytes(config.model) - before) / 1e6:,.0f} MB · " if hub else ""
            yield Phase("loading", f"{what} · {fetched}{time.perf_counter() - start:.0f} s")


def _attach_draft(config: RunConfig, models: ModelCache, lm: LoadedModel) -> Iterator[Phase]:
    """Load (or reuse) the draft model a method needs onto the target's device and dtype, and refuse one whose
    vocabulary differs from the target's; a method without a draft detaches any."""
    if not speculative.REGISTRY[config.spec].draft_model:
        models.attach_draft(lm, None)
        return
    yield Phase("loading", f"draft model {config.draft_model} ({lm.dtype}) on {lm.device}")
    DEVICE_THREAD.submit(models.attach_draft, lm, config.draft_model, config.trust_remote_code).result()
    draft = lm.draft
    reason = speculative.vocabulary_mismatch(lm.tokenizer, draft.tokenizer, lm.model.config.vocab_size,
                                             draft.model.config.vocab_size)
    if reason:
        raise ConfigError(f"draft_model={config.draft_model} cannot draft for {config.model}: {reason}")


def _measure_ranks(config: RunConfig, record: RunRecord, stop: threading.Event) -> Iterator[Event]:
    """A tensor-parallel run: every rank runs this engine on its shard, and rank 0's events come through
    here; its record becomes this run's."""
    for event in parallel.run_ranks(config, stop):
        if isinstance(event, Result):
            vars(record).update(vars(event.record))
            return
        yield event
    if stop.is_set():
        raise Stopped("stopped by the user; every rank was ended")
    raise RuntimeError("tensor-parallel rank 0 ended without a result")


@dataclass
class _Side:
    """One configuration on its way through a run: what it loaded, the passes it has timed, its record."""

    name: str
    config: RunConfig
    record: RunRecord
    stop: threading.Event
    lm: LoadedModel | None = None
    input_ids: torch.Tensor | None = None
    outputs: list[PassOutput] = field(default_factory=list)  # warm-up passes first, then the timed repeats
    artifacts: Path | None = None
    cached: bool = False
    counts_before: tuple = ()
    stage: str = "checking the request"
    done: bool = False  # its record is final: measured, refused or failed

    @property
    def key(self) -> tuple | None:
        return self.lm.key if self.lm else None

    @property
    def timed(self) -> list[PassOutput]:
        return self.outputs[self.config.warmup:]


def _split_ranks(side: _Side, stop: threading.Event, models: ModelCache, device: str, dtype: str) -> Iterator[Event]:
    config, record = side.config, side.record
    text = models.config_for(config.model, config.trust_remote_code).get_text_config()
    heads = (text.num_attention_heads, getattr(text, "num_key_value_heads", None) or text.num_attention_heads)
    reason = parallel.unsplittable(config.parallel, config.devices, heads)
    if reason:
        raise ConfigError(f"parallel={config.parallel} cannot run here: {reason}")
    if model_source(config.model) == "preset" and PRESETS[config.model].random_weights:  # once, not per rank
        yield Phase("loading", f"writing {config.model}'s random weights ({dtype}) as a checkpoint for the ranks")
        DEVICE_THREAD.submit(random_checkpoint, config.model, TORCH_DTYPES[dtype]).result()
    yield from _measure_ranks(config, record, stop)


def _prepare(side: _Side, stop: threading.Event, models: ModelCache, keep: tuple | None = None) -> Iterator[Event]:
    """Check the request against this host, load the model (keeping `keep`'s loaded beside it), build the prompt,
    and ask the backend whether it can run it. A tensor-parallel run is measured whole here, in its ranks."""
    config, record = side.config, side.record
    device, dtype = capabilities.check(config)
    record.device_effective, record.dtype_effective = device, dtype
    if config.parallel == "tp" and parallel.rank() is None:
        yield from _split_ranks(side, stop, models, device, dtype)
        side.done = True
        return
    record.max_batch_predicted = check_memory(config, models, device, dtype, alongside=keep is not None).max_batch
    lm, reused = yield from _load_with_progress(config, models, device, dtype, keep)
    side.lm = lm
    record.model_source, record.random_weights, record.num_params = lm.source, lm.random_weights, lm.num_params
    record.load_s, record.model_reused = (0.0 if reused else lm.load_s), reused
    record.attn_effective = lm.attn_effective
    if lm.attn_effective != config.transformers_attn:
        record.fallback = f"transformers loaded attn_implementation={lm.attn_effective} instead of {config.transformers_attn}"
    record.quant_weights = quantization.quantized_weights(lm.model)
    record.quant_effective = lm.quant if record.quant_weights else "none"
    if record.quant_effective != config.quant:
        record.fallback = "; ".join(filter(None, [record.fallback, f"quant={config.quant} was requested but "
                                                  "torchao left every linear weight unquantized"]))
    yield from _attach_draft(config, models, lm)
    prompt = prompt_ids(config, lm.tokenizer, lm.model.config)
    side.input_ids = request.padded_batch(config, prompt, request.pad_token_id(lm.tokenizer)).to(lm.device)
    record.prompt_tokens = side.input_ids.shape[1]
    pad = padding(request.row_lengths(prompt.shape[1], config.batch_size, config.length_spread_pct), prompt.shape[1])
    record.prompt_real_tokens, record.prompt_padded_tokens, record.padding_pct = (
        pad.real_tokens, pad.padded_tokens, pad.padding_pct)
    reason = backends.get(config.backend).unsupported(config, lm, side.input_ids.shape[1] + config.new_tokens)
    if reason:
        raise ConfigError(f"backend={config.backend} cannot run this: {reason}")
    if config.compile != "off":
        warm.keep_inductor_cache()
    side.artifacts = _compile_artifacts(config, device)
    side.cached = side.artifacts is not None and warm.load(side.artifacts)
    side.counts_before = (warm.cache_hits(), warm.compiles(), warm.steps_loaded(), len(warm.not_kept))


def _own_draft(side: _Side, models: ModelCache) -> None:
    """Put the side's draft, or none, back on its target: the other side may share the loaded model."""
    config = side.config
    draft = config.draft_model if speculative.REGISTRY[config.spec].draft_model else None
    if side.lm.draft is not None or draft:
        DEVICE_THREAD.submit(models.attach_draft, side.lm, draft, config.trust_remote_code).result()


def _one_pass(side: _Side, stop: threading.Event, models: ModelCache, phase: str, index: int,
              total: int) -> Iterator[Event]:
    """One warm-up or timed pass of the side's configuration; its first pass is the cold one (it compiles)."""
    config = side.config
    _own_draft(side, models)
    detail = ""
    if not side.outputs and config.compile != "off":
        detail = "first call: compiling" + (" from the compile cache" if side.cached else "")
    yield Phase(phase, detail, index, total)
    side.outputs.append((yield from _run_pass(config, side.lm, side.input_ids, config.new_tokens, stop,
                                              f"{phase} {index}/{total}", compiling=bool(detail))))
    if len(side.outputs) == 1 and side.artifacts:
        side.record.compile_cache = _compile_cache_use(side.artifacts, *side.counts_before)


def _warm_up(side: _Side, stop: threading.Event, models: ModelCache) -> Iterator[Event]:
    for i in range(side.config.warmup):
        yield from _one_pass(side, stop, models, "warmup", i + 1, side.config.warmup)


def _repeat(side: _Side, stop: threading.Event, models: ModelCache, total: int) -> Iterator[Event]:
    yield from _one_pass(side, stop, models, "repeat", len(side.timed) + 1, total)


def _finish(side: _Side, stop: threading.Event, models: ModelCache) -> Iterator[Event]:
    """The figures from the timed repeats, then a separate profiled pass that names the kernels."""
    config, record, lm = side.config, side.record, side.lm
    record.repeats_run = len(side.timed)
    record.compiled = backends.get(config.backend).compiled(config, lm)
    if config.compile != "off" and not record.compiled:
        record.fallback = "; ".join(filter(None, [record.fallback,
                                                 f"compile was requested but {config.backend} did not compile"]))
    _fill_figures(record, config, lm, side.outputs[0], side.timed)
    if config.profile_kernels:
        yield Phase("profiling", "separate pass under torch.profiler to name the attention kernels")
        _own_draft(side, models)
        profiled = yield from _run_pass(config, lm, side.input_ids, min(config.new_tokens, PROFILE_NEW_TOKENS), stop,
                                        "profile", profile=True)
        _fill_kernels(record, config, profiled)
    side.done = True


def _compile_artifacts(config: RunConfig, device: str) -> Path | None:
    """The warm-start file of a compiled run, or None: not compiled, or compiled under a forced SDPA
    backend, which compiles with torch's caches off (`_compiling_under`)."""
    if config.compile == "off" or config.sdpa_backend:
        return None
    return warm.artifact_path(config, torch.cuda.get_device_name() if device == "cuda" else device)


def _compile_cache_use(artifacts: Path, hits_before: int, compiles_before: int, loaded_before: int,
                       not_kept_before: int) -> str:
    """How the cold pass compiled: from the cache, anew (then its artifacts are saved), or not at all; with how many
    saved steps it loaded (no trace) and why any step was traced but not kept."""
    loaded = warm.steps_loaded() - loaded_before
    if warm.cache_hits() > hits_before:
        use = "hit" + (f" ({loaded} saved step{'s' * (loaded > 1)} loaded, not traced)" if loaded else "")
        if not artifacts.is_file():  # saved steps fit settings the artifacts are not kept for (e.g. temperature)
            warm.save(artifacts)
    elif warm.compiles() == compiles_before:
        use = "reused (compiled earlier in this process)"
    else:
        use = "miss (artifacts saved)" if warm.save(artifacts) else "miss"
    not_kept = warm.not_kept[not_kept_before:]
    return use + ("; traced, not kept: " + "; ".join(not_kept) if not_kept else "")


def _stage_name(phase: Phase) -> str:
    if phase.phase == "loading":
        return "loading the model"
    return f"running {phase.phase} {phase.index}/{phase.total}" if phase.total else f"{phase.phase}"


def describe(phase: Phase) -> str:
    """One line for a progress display: the stage and what it says, e.g. how long a compile has taken."""
    return f"{_stage_name(phase)} · {phase.detail}" if phase.detail else _stage_name(phase)


def _describe_failure(exc: Exception, config: RunConfig) -> str:
    """The exception in the user's terms, with where it came from when it says nothing itself."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if "No available kernel" in text and config.sdpa_backend:
        return (f"torch has no {config.sdpa_backend} SDPA kernel for these inputs (forced by attn={config.attn}); "
                "its warnings say why, e.g. grouped-query heads or an explicit mask. Use plain sdpa to let torch choose.")
    if not text:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        text = f"raised in {Path(frame.filename).name}:{frame.lineno} ({frame.name})"
    return f"{type(exc).__name__}: {text}"


MAX_PAIRS = 12  # an unsure A-vs-B verdict takes more interleaved pairs, up to this many in all
MAX_EXTRA_S = 20.0  # and for no longer than this, nor than the planned repeats took


def _failure(side: _Side, exc: Exception) -> None:
    """Turn what a side's step raised into its record's status and reason."""
    record = side.record
    if isinstance(exc, ConfigError):
        record.status, record.reason = "invalid", str(exc)
    elif isinstance(exc, LoadError):
        record.status, record.reason = "error", str(exc)
    elif isinstance(exc, Stopped):
        record.status, record.reason = "stopped", str(exc)
    elif isinstance(exc, torch.cuda.OutOfMemoryError):
        record.status = "error"
        record.reason = (f"the GPU ran out of memory while {side.stage} ({str(exc).splitlines()[0][:160]}); lower "
                         "the prompt length, new tokens or batch size, or pick a smaller model or dtype. "
                         "The model was unloaded and its memory freed.")
    else:  # any other failure becomes a clear record; the caller keeps serving
        log.exception("run failed: %s", side.config)
        record.status, record.reason = "error", _describe_failure(exc, side.config)
    side.done = True


def _stop_requested(side: _Side) -> bool:
    """Whether the user asked to stop before this side's next step: then it ends stopped, with nothing more run."""
    if side.stop.is_set() and not side.done:
        _failure(side, Stopped("stopped by the user before this side finished"))
    return side.done


def _step(side: _Side, steps: Iterator[Event], models: ModelCache) -> Iterator[tuple[str, Event]]:
    """A side's step with its events tagged by side; a failure ends that side alone, with a clear record."""
    out_of_memory = False
    if _stop_requested(side):
        return
    try:
        for event in steps:
            if isinstance(event, Phase):
                side.stage = _stage_name(event)
            yield side.name, event
    except Exception as exc:
        out_of_memory = isinstance(exc, torch.cuda.OutOfMemoryError)
        _failure(side, exc)
    if out_of_memory:
        models.clear()  # after the handler, so the traceback no longer pins the model's tensors
        side.lm = None


def _alive(sides: list[_Side]) -> list[_Side]:
    return [s for s in sides if not s.done]


def _why_not_interleaved(first: _Side, second: _Side, models: ModelCache) -> str | None:
    """Why B's repeats cannot take turns with A's in this process, or None: then both stay loaded."""
    a, b = first.config, second.config
    if "tp" in (a.parallel, b.parallel):
        return "a tensor-parallel side runs in processes of its own"
    if first.done:
        return "A did not run"
    if a.compile != "off" and b.compile != "off" and a.sdpa_backend != b.sdpa_backend:
        return "the sides compile under different SDPA kernels, which one process cannot hold compiled at once"
    drafts = {(c.draft_model, c.trust_remote_code) for c in (a, b) if speculative.REGISTRY[c.spec].draft_model}
    if len(drafts) > 1:
        return "the sides draft with different draft models"
    try:
        device, dtype = capabilities.check(b)
        if models.holds(_key(b, device, dtype)) or first.key == _key(b, device, dtype):
            return None
        check_memory(b, models, device, dtype, alongside=True)
    except ConfigError as exc:
        return f"B does not fit beside A ({exc})"
    except (LoadError, OSError, ValueError):
        return "B's size is unknown before it loads"
    return None


def _unsure(sides: list[_Side], figure: str) -> bool:
    """Whether the interleaved pairs so far leave the verdict on `figure` open."""
    field, higher_is_better = HEADLINES[figure]

    def values(side: _Side) -> list[float]:
        if field == "ttft_ms":
            return [p.timing.ttft_ms for p in side.timed]
        rows = side.config.batch_size if field == "aggregate_decode_tok_s" else 1
        return [(p.timing.decode_tok_s or 0.0) * rows for p in side.timed]

    verdict = paired_verdict(values(sides[0]), values(sides[1]), higher_is_better)
    return verdict is not None and verdict.call == "unsure"


def _interleave(sides: list[_Side], stop: threading.Event, models: ModelCache, figure: str,
                extra_s: float | None) -> Iterator[tuple[str, Event]]:
    """The timed repeats in pairs, A1 B1 B2 A2 A3 B3 ..., so a drift of the host lands on both sides and going
    second in a pair favours neither; then, while the verdict on `figure` is open, more pairs within the time cap."""
    planned = max(s.config.repeats for s in sides)
    other_load = OtherCpuLoad()
    other_load.start()
    started = time.perf_counter()
    for pair in range(planned):
        for side in _pair_order(sides, pair):
            yield from _step(side, _repeat(side, stop, models, planned), models)
    spent = time.perf_counter() - started
    budget = min(spent, MAX_EXTRA_S) if extra_s is None else extra_s
    extra_start = time.perf_counter()
    while (len(_alive(sides)) == 2 and len(sides[0].timed) < MAX_PAIRS and _unsure(sides, figure)
           and time.perf_counter() - extra_start < budget):
        for side in _pair_order(sides, len(sides[0].timed)):
            yield from _step(side, _repeat(side, stop, models, len(side.timed) + 1), models)
    load = other_load.stop()
    for side in sides:
        side.record.host_other_cpu_pct = load


def _pair_order(sides: list[_Side], pair: int) -> list[_Side]:
    """The live sides in the order pair `pair` runs them: A first in even pairs, B first in odd ones, so whatever
    the second run of a pair gains or loses (a warmer cache, a busier core) falls on each side equally."""
    alive = _alive(sides)
    return alive if pair % 2 == 0 else alive[::-1]


def _in_turn(side: _Side, stop: threading.Event, models: ModelCache) -> Iterator[tuple[str, Event]]:
    """One side's timed repeats, all in a row."""
    other_load = OtherCpuLoad()
    other_load.start()
    for _ in range(side.config.repeats):
        if not side.done:
            yield from _step(side, _repeat(side, stop, models, side.config.repeats), models)
    side.record.host_other_cpu_pct = other_load.stop()


def _measure(sides: list[_Side], stop: threading.Event, models: ModelCache, figure: str,
             extra_s: float | None) -> Iterator[tuple[str, Event]]:
    """Load and warm up A; where B can stay loaded beside it, load and warm up B and time their repeats in turn;
    else (blocks) finish A first. A failed side ends alone; the other goes on."""
    first, rest = sides[0], sides[1:]
    yield from _step(first, _prepare(first, stop, models), models)
    if not first.done:
        yield from _step(first, _warm_up(first, stop, models), models)
    why = _why_not_interleaved(first, rest[0], models) if rest else None
    if rest and why is None:
        pair_id = uuid.uuid4().hex[:12]
        for side in sides:
            side.record.pairing, side.record.pair_id = "interleaved", pair_id
        second = rest[0]
        yield from _step(second, _prepare(second, stop, models, keep=first.key), models)
        if not second.done:
            yield from _step(second, _warm_up(second, stop, models), models)
        if not second.done:
            yield from _interleave(sides, stop, models, figure, extra_s)
        else:
            yield from _in_turn(first, stop, models)
        for side in _alive(sides):
            yield from _step(side, _finish(side, stop, models), models)
        return
    for i, side in enumerate(sides):
        if rest:
            side.record.pairing = f"blocks: {why}"
        if i:
            yield from _step(side, _prepare(side, stop, models), models)
            if not side.done:
                yield from _step(side, _warm_up(side, stop, models), models)
        if not side.done:
            yield from _in_turn(side, stop, models)
        if not side.done:
            yield from _step(side, _finish(side, stop, models), models)


def generate_sides(configs: dict[str, RunConfig], stop: threading.Event | None = None, models: ModelCache = MODELS,
                   figure: str = "decode", extra_s: float | None = None) -> Iterator[tuple[str, Event]]:
    """Run one configuration, or A and B measured together, yielding (side, event); each side ends with a `Result`.

    Two sides have their timed repeats interleaved where both models fit in memory (`record.pairing` says how
    they were timed), and take more pairs while the verdict on `figure` (a `diagnostics.HEADLINES` name) is
    open, for at most `extra_s` more seconds (None: as long as the planned repeats took, at most MAX_EXTRA_S).
    `record.status` is `ok`, `invalid` (the request cannot run here; `reason` says why), `error` (it failed
    while running; `reason` says what to change) or `stopped`.
    """
    stop = stop or threading.Event()
    sides = [_Side(name, config, _blank_record(config), stop) for name, config in configs.items()]
    with DEVICE_LOCK:
        yield from _measure(sides, stop, models, figure, extra_s)
        for side in sides:
            side.record.env = environment()
    for side in sides:
        yield side.name, Result(side.record)


def generate(config: RunConfig, stop: threading.Event | None = None, models: ModelCache = MODELS) -> Iterator[Event]:
    """Run `config` and yield its events; the last event is always a `Result`, whatever happened."""
    for _, event in generate_sides({"": config}, stop, models):
        yield event


def run(config: RunConfig, stop: threading.Event | None = None, models: ModelCache = MODELS,
        on_phase: Callable[[Phase], None] | None = None) -> RunRecord:
    """Run `config` to the end and return its record (for callers that do not stream tokens; `on_phase` hears
    each phase, as the CLI's progress line does)."""
    for event in generate(config, stop, models):
        if isinstance(event, Phase) and on_phase:
            on_phase(event)
        if isinstance(event, Result):
            return event.record
    raise AssertionError("generate ended without a Result")
