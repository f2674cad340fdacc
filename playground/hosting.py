"""What a publicly hosted playground allows, and how GPU work runs on a ZeroGPU Space.

A local app trusts its user: any local directory, any size the engine accepts. A hosted one
(on a Hugging Face Space, or with `PLAYGROUND_HOSTED=1` / `app.py --hosted`) serves strangers, so
it refuses local paths and remote code, can pin the models to an allowlist, and bounds the work
one request may queue on the shared device: its sizes, with the prompt counted in the model's own
tokens, and its estimated cost on this host (a 7B shape or a compile on a CPU takes minutes).
`HostingPolicy.check` raises the engine's own `ConfigError`, so a refusal reaches the user exactly
like any other invalid request. `run_cost` is that estimate; the page shows it before Run.

On ZeroGPU a GPU is attached only inside functions decorated with `spaces.GPU`, for a duration
declared up front; `gpu_runner` wraps the engine's generator that way, declaring the run's
estimated cost. A visitor has minutes of GPU a day, so hosted runs there are bounded tighter, the
`large` share (half the GPU) bounds memory, and compile settings are refused: ZeroGPU runs only
ahead-of-time compiled code, a path this app does not take yet. Without `spaces` (or outside
ZeroGPU) the engine runs unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from playground.config import AOT, ConfigError, RunConfig
from playground.presets import PRESETS

HOSTED_ENV = "PLAYGROUND_HOSTED"
ALLOWLIST_ENV = "PLAYGROUND_MODEL_ALLOWLIST"
LIMIT_ENVS = {  # field -> environment variable that overrides its hosted default
    "max_prompt_tokens": "PLAYGROUND_MAX_PROMPT_TOKENS", "max_new_tokens": "PLAYGROUND_MAX_NEW_TOKENS",
    "max_repeats": "PLAYGROUND_MAX_REPEATS", "max_batch_size": "PLAYGROUND_MAX_BATCH_SIZE",
    "max_queue": "PLAYGROUND_MAX_QUEUE", "max_run_s": "PLAYGROUND_MAX_RUN_S",
}
HOSTED_LIMITS = dict(max_prompt_tokens=4096, max_new_tokens=512, max_repeats=5, max_batch_size=4, max_queue=16,
                     max_run_s=120)
LOCAL_QUEUE = 16  # the local app's queue: one user, but many API scripts may queue at once
SPECIAL_TOKENS = 8  # no tokenizer makes more tokens than UTF-8 bytes, plus a few specials: a cheap upper bound
# Run-cost estimate, conservative for a shared host. A decode step costs the slower of the host's launch
# overhead (eager transformers, per layer: 1.3-1.9 ms on the H200 with 1B and 8B shapes, 1.2 ms on a 2-core
# CPU with the default model) and reading every weight once; prefill costs 2 FLOP per parameter per token;
# loading streams the weights (random init on a CPU); a compile is a flat guess. CUDA rates are half an RTX
# PRO 6000 Blackwell (1.8 TB/s whole), ZeroGPU's default share.
STEP_S_PER_LAYER = {"cpu": 1.5e-3, "cuda": 2e-3}
DECODE_BYTES_S = {"cpu": 10e9, "cuda": 0.8e12}
PREFILL_FLOP_S = {"cpu": 50e9, "cuda": 50e12}
LOAD_BYTES_S = {"cpu": 0.5e9, "cuda": 2e9}
# torch.compile's first call: the default model compiled in about 30 s on a 2-core CPU (benchmarks.comparisons);
# the CUDA figure is a flat guess.
COMPILE_S = {"cpu": 30.0, "cuda": 60.0}
# Per-step factors that reading the weights alone misses on a CPU: torchao dequantizes quantized weights before
# every matmul (int8 decoded at 0.34x fp32 with the default model), and a tensor-parallel split over processes
# pays sharded-tensor overhead and an exchange in every layer (0.06x) (results/cpu/).
QUANT_STEP_FACTOR = {"cpu": 3.0, "cuda": 1.0}
TP_STEP_FACTOR = {"cpu": 16.0, "cuda": 1.0}

# ---- ZeroGPU as `spaces` 0.51.3 and the Spaces docs describe it -------------------------------------------
ZERO_GPU_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")  # the torch versions ZeroGPU runs
ZERO_GPU_PYTHON = ("3.10.13", "3.12.12")
ZERO_GPU_DEVICE = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
ZERO_GPU_CAPABILITY = (12, 0)  # sm_120: workstation Blackwell, not the datacenter B200's sm_100
ZERO_GPU_BYTES = 101_973_950_464  # the whole GPU as CUDA reports it (95 GiB)
ZERO_GPU_SIZES = {"large": ZERO_GPU_BYTES // 2, "xlarge": ZERO_GPU_BYTES}  # large, half the GPU, is the default
ZERO_GPU_SIZE_ENV = "PLAYGROUND_ZERO_GPU_SIZE"
COMPILE_ON_ZERO_GPU = "torch.compile is unavailable on ZeroGPU (it runs only ahead-of-time compiled code)"
# Each `spaces.GPU` call attaches a GPU and loads the model in a fresh worker: a flat allowance for it,
# a guess that no Space has measured yet.
ZERO_GPU_START_S = 3.0
ZERO_GPU_MIN_S, ZERO_GPU_MAX_S = 10, 120  # bounds of the declared duration; a run over the limit is refused
# A run may cost at most half an unauthenticated visitor's daily 2 minutes of ZeroGPU.
ZERO_GPU_LIMITS = dict(max_run_s=60)


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name}={text!r} must be a whole number of at least 1")
    return int(text)


def on_zero_gpu(environ: Mapping[str, str] = os.environ) -> bool:
    """True on a ZeroGPU Space (SPACES_ZERO_GPU set), whether or not `spaces` is installed."""
    return _flag(environ.get("SPACES_ZERO_GPU"))


def zero_gpu_available(environ: Mapping[str, str] = os.environ) -> bool:
    """True on a ZeroGPU Space with `spaces` installed (its decorator is a no-op anywhere else)."""
    return on_zero_gpu(environ) and importlib.util.find_spec("spaces") is not None


def zero_gpu_size(environ: Mapping[str, str] = os.environ) -> str:
    """The GPU share this app asks ZeroGPU for: `large` (half the GPU, the default) or `xlarge` (all of it, at
    twice the quota), from PLAYGROUND_ZERO_GPU_SIZE."""
    size = environ.get(ZERO_GPU_SIZE_ENV, "").strip().lower() or "large"
    if size not in ZERO_GPU_SIZES:
        raise ValueError(f"{ZERO_GPU_SIZE_ENV}={size!r} must be one of {', '.join(ZERO_GPU_SIZES)}")
    return size


@dataclass(frozen=True)
class HostingPolicy:
    """Limits beyond the engine's own; None means no limit beyond what the engine accepts."""

    hosted: bool = False
    allow_local_paths: bool = True
    allow_trust_remote_code: bool = True
    model_allowlist: tuple[str, ...] | None = None
    max_prompt_tokens: int | None = None
    max_new_tokens: int | None = None
    max_repeats: int | None = None  # applies to repeats and to warm-up passes
    max_batch_size: int | None = None
    max_queue: int = LOCAL_QUEUE
    max_run_s: int | None = None  # estimated seconds of device time one run may take
    zero_gpu: bool = False
    gpu_size: str = "large"  # the ZeroGPU share asked for, when zero_gpu
    stack_problems: tuple[str, ...] = ()  # what the start-up check (playground.stack) found wrong, for the page

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, hosted_flag: bool = False) -> HostingPolicy:
        """Hosted on a Space (SPACE_ID set), with PLAYGROUND_HOSTED=1 or `--hosted`; limits overridable by env."""
        allowlist = tuple(m.strip() for m in environ.get(ALLOWLIST_ENV, "").split(",") if m.strip()) or None
        zero_gpu = zero_gpu_available(environ)
        if not (hosted_flag or _flag(environ.get(HOSTED_ENV)) or environ.get("SPACE_ID")):
            return cls(model_allowlist=allowlist, zero_gpu=zero_gpu,
                       max_queue=_env_int(environ, LIMIT_ENVS["max_queue"], LOCAL_QUEUE))
        defaults = {**HOSTED_LIMITS, **(ZERO_GPU_LIMITS if zero_gpu else {})}
        limits = {name: _env_int(environ, env, defaults[name]) for name, env in LIMIT_ENVS.items()}
        return cls(hosted=True, allow_local_paths=False, allow_trust_remote_code=False, model_allowlist=allowlist,
                   zero_gpu=zero_gpu, gpu_size=zero_gpu_size(environ), **limits)

    def check(self, config: RunConfig) -> None:
        """Raise ConfigError naming the rule or limit this request breaks; None when it may run here."""
        for rule in (self._check_model, self._check_draft, self._check_numbers, self._check_compile,
                     self._check_parallel, self._check_prompt, self._check_gpu_share, self._check_cost):
            rule(config)

    def _check_model(self, config: RunConfig) -> None:
        if not self.allow_trust_remote_code and config.trust_remote_code:
            raise ConfigError("trust_remote_code is refused in hosted mode: a public app must not run a "
                              "repository's own Python code")
        if self.model_allowlist is not None and config.model not in self.model_allowlist:
            raise ConfigError(f"model {config.model!r} is not on this app's allowlist ({ALLOWLIST_ENV}): "
                              f"choose one of {', '.join(self.model_allowlist)}")
        if not self.allow_local_paths and _is_local_path(config.model):
            raise ConfigError(f"model {config.model!r} is a local path, refused in hosted mode: use a preset or a "
                              "Hugging Face id (owner/name)")

    def _check_draft(self, config: RunConfig) -> None:
        """A hosted draft is a shipped one or an allowlisted model: the memory pre-flight and the cost estimate
        count the target only, so any other draft (a local folder, a hub id, a 70B-shape preset) could load
        what no check has weighed."""
        from playground import speculative

        if not self.hosted or not speculative.REGISTRY[config.spec].draft_model:
            return
        allowed = sorted(set(speculative.DRAFT_MODELS) | set(self.model_allowlist or ()))
        if config.draft_model not in allowed:
            raise ConfigError(f"draft_model {config.draft_model!r} is refused in hosted mode: a hosted run drafts "
                              f"with {', '.join(allowed)}; run the playground locally for another draft")

    def _check_prompt(self, config: RunConfig) -> None:
        limit = self.max_prompt_tokens
        if limit is None:
            return
        if config.prompt_tokens is not None and config.prompt_tokens > limit:
            raise ConfigError(f"prompt_tokens={config.prompt_tokens} is over this app's limit of {limit} prompt "
                              f"tokens ({LIMIT_ENVS['max_prompt_tokens']})")
        if config.prompt is None or len(config.prompt.encode("utf-8")) + SPECIAL_TOKENS <= limit:
            return
        tokens = prompt_token_count(config)
        if tokens > limit:
            raise ConfigError(f"the prompt is {tokens:,} tokens for {config.model} ({len(config.prompt):,} "
                              f"characters); this app takes prompts of up to {limit} tokens "
                              f"({LIMIT_ENVS['max_prompt_tokens']})")

    def _check_numbers(self, config: RunConfig) -> None:
        for name, limit in (("new_tokens", self.max_new_tokens), ("repeats", self.max_repeats),
                            ("warmup", self.max_repeats), ("batch_size", self.max_batch_size)):
            value = getattr(config, name)
            if limit is not None and value > limit:
                raise ConfigError(f"{name}={value} is over this app's limit of {limit}; lower it to {limit} or "
                                  "run the playground locally for longer runs")

    def _check_compile(self, config: RunConfig) -> None:
        if self.zero_gpu and config.compile != "off":
            raise ConfigError(f"compile={config.compile}: {COMPILE_ON_ZERO_GPU}")

    def _check_parallel(self, config: RunConfig) -> None:
        if self.hosted and config.parallel != "none":
            raise ConfigError(f"parallel={config.parallel}: a hosted run gets one device, and splitting a model "
                              "starts processes or spreads it over GPUs a visitor does not get; run the playground "
                              "locally on a machine with several GPUs")

    def _check_gpu_share(self, config: RunConfig) -> None:
        """On ZeroGPU the free memory CUDA reports is the whole GPU's; a `large` task gets half of it."""
        if not self.zero_gpu:
            return
        from playground import memory

        shape = _model_shape(config.model, config.trust_remote_code)
        dtype = "bf16" if config.dtype == "auto" else config.dtype  # auto is bf16 on every ZeroGPU GPU
        kv = memory.kv_cache_bytes(shape.config, prompt_token_count(config) + config.new_tokens, config.batch_size,
                                   dtype) if config.use_cache else 0
        needed = (shape.params * memory.DTYPE_BYTES[dtype] + kv) * memory.HEADROOM
        share = ZERO_GPU_SIZES[self.gpu_size]
        if needed > share:
            bigger = (f"; {ZERO_GPU_SIZE_ENV}=xlarge gives the whole {ZERO_GPU_BYTES / 2**30:.0f} GiB"
                      if self.gpu_size != "xlarge" else "")
            raise ConfigError(f"this run needs about {needed / 2**30:.1f} GiB but ZeroGPU's {self.gpu_size} share is "
                              f"{share / 2**30:.1f} GiB{bigger}: pick a smaller model or dtype, or fewer tokens")

    def _check_cost(self, config: RunConfig) -> None:
        if self.max_run_s is None:
            return
        cost = run_cost(config)
        if cost.seconds > self.max_run_s:
            raise ConfigError(f"this run would take about {cost.seconds:,.0f} s of {cost.device} time here "
                              f"({'compile, ' if config.compile != 'off' else ''}{config.model}, "
                              f"{config.warmup + config.repeats} passes of {config.new_tokens} tokens); this app "
                              f"allows {self.max_run_s} s a run ({LIMIT_ENVS['max_run_s']}): pick a smaller model, "
                              "fewer tokens or passes, compile off, or run the playground locally")

    def compile_unavailable(self, mode: str) -> str | None:
        """Why a torch.compile mode cannot be chosen here, or None."""
        return COMPILE_ON_ZERO_GPU if self.zero_gpu and mode not in ("off", AOT) else None

    def describe(self) -> str:
        """For the page: what hosted mode limits, so a refusal is never a surprise, and what the stack check found."""
        if not self.hosted:
            return ""
        limits = ", ".join(f"{_label(name)} ≤ {getattr(self, name)}" for name in LIMIT_ENVS)
        models = f"models: {', '.join(self.model_allowlist)}" if self.model_allowlist else "presets and hub ids"
        zero = (f" ZeroGPU, {self.gpu_size} share: every run shows its estimated GPU seconds before it starts."
                if self.zero_gpu else "")
        text = (f"Hosted mode: {models}; no local paths or remote code; {limits}. Your runs are kept for this "
                f"browser session only and are not shown to anyone else.{zero}")
        if self.stack_problems:
            text += "\n\n⚠ **This Space's stack does not match what the playground needs:** " + \
                "; ".join(self.stack_problems) + "."
        return text

    def replace(self, **changes) -> HostingPolicy:
        return dataclasses.replace(self, **changes)


def _label(limit: str) -> str:
    """'max_new_tokens' -> 'new tokens', 'max_run_s' -> 'run seconds'."""
    words = limit.removeprefix("max_").split("_")
    return " ".join(words[:-1] + ["seconds"] if words[-1] == "s" else words)


def _is_local_path(name: str) -> bool:
    """A directory on this machine, judged as the loader judges it (a preset name is never a path)."""
    name = name.strip()
    return name not in PRESETS and (name.startswith((".", "/", "~", "\\")) or Path(name).expanduser().exists())


def prompt_token_count(config: RunConfig) -> int:
    """Tokens of one prompt as the engine will prefill them: the model's own tokenizer, specials included."""
    if config.prompt_tokens is not None:
        return config.prompt_tokens
    from playground.loader import LoadError, load_tokenizer

    try:
        tokenizer = load_tokenizer(config.model, config.trust_remote_code)
    except LoadError as exc:
        raise ConfigError(f"cannot count the prompt's tokens for this app's limit: {exc}") from exc
    return len(tokenizer(config.prompt)["input_ids"])


class ModelShape(NamedTuple):
    config: object  # the model's transformers config
    params: int
    layers: int


@functools.lru_cache(maxsize=32)
def _model_shape(model: str, trust_remote_code: bool) -> ModelShape:
    from playground import memory
    from playground.loader import MODELS, LoadError

    try:
        config = MODELS.config_for(model, trust_remote_code)
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        return ModelShape(config, memory.parameter_count(config), int(getattr(text, "num_hidden_layers", 0) or 1))
    except LoadError as exc:
        raise ConfigError(f"cannot estimate what this run costs here: {exc}") from exc


@dataclass(frozen=True)
class RunCost:
    """A run's estimated device seconds in parts, so the page can say how it was reckoned."""

    device: str
    load_s: float  # weights onto the device, plus a ZeroGPU worker's start
    compile_s: float
    passes: int  # warm-up and repeats, each a full generate
    pass_s: float  # prefill and decode of one pass
    profile_s: float  # the short profiled pass that names the kernels

    @property
    def seconds(self) -> float:
        return self.load_s + self.compile_s + self.passes * self.pass_s + self.profile_s

    def summary(self) -> str:
        """'≈ 9 GPU s (load 3.1 s + 4 passes × 1.4 s + profile 0.1 s)'."""
        unit = "GPU s" if self.device == "cuda" else f"s of {self.device.upper()}"
        parts = [f"load {self.load_s:.1f} s"] + ([f"compile {self.compile_s:.0f} s"] if self.compile_s else [])
        parts.append(f"{self.passes} passes × {self.pass_s:.1f} s")
        parts += [f"profile {self.profile_s:.1f} s"] if self.profile_s else []
        return f"≈ {self.seconds:,.0f} {unit} ({' + '.join(parts)})"


def _pass_s(config: RunConfig, shape: ModelShape, device: str, weight_bytes: int, tokens: int) -> float:
    """One generate of `tokens` tokens: prefill at PREFILL_FLOP_S, then each step the slower of the host's launch
    overhead and reading the weights; without a KV cache each step prefills the whole sequence again."""
    prompt = prompt_token_count(config)
    flop_s = PREFILL_FLOP_S[device] / config.batch_size
    step = max(shape.layers * STEP_S_PER_LAYER[device], weight_bytes / DECODE_BYTES_S[device])
    step *= (QUANT_STEP_FACTOR[device] if config.quant != "none" else 1.0) * (
        TP_STEP_FACTOR[device] if config.parallel == "tp" else 1.0)
    if not config.use_cache:
        step = max(step, 2 * shape.params * (prompt + tokens / 2) / flop_s)
    return 2 * shape.params * prompt / flop_s + tokens * step


def run_cost(config: RunConfig, zero_gpu: bool = False, host=None) -> RunCost:
    """What `config` is estimated to cost on this host (or `host`, a capabilities.Host): load, compile, and
    every pass. Nominal rates (the constants above), not a measurement; on ZeroGPU each run also starts a worker."""
    from playground import capabilities, memory
    from playground.engine import PROFILE_NEW_TOKENS

    host = host or capabilities.host()
    device = host.resolve_device(config.device)
    dtype = host.resolve_dtype(config.dtype, device)
    shape = _model_shape(config.model, config.trust_remote_code)
    weight_bytes = shape.params * memory.DTYPE_BYTES.get(dtype, 4)
    load_s = weight_bytes / LOAD_BYTES_S[device] + (ZERO_GPU_START_S if zero_gpu else 0.0)
    profile_s = (_pass_s(config, shape, device, weight_bytes, min(config.new_tokens, PROFILE_NEW_TOKENS))
                 if config.profile_kernels else 0.0)
    return RunCost(device, load_s, COMPILE_S[device] if config.compile != "off" else 0.0,
                   config.warmup + config.repeats, _pass_s(config, shape, device, weight_bytes, config.new_tokens),
                   profile_s)


def pair_seconds(configs: dict[str, RunConfig]) -> tuple[float, float]:
    """Estimated seconds of a run of these sides on this host: (planned, at most). Planned adds each side's
    cost, loads and passes; at most adds the extra pairs an open verdict takes (as long again as the timed
    repeats, within the engine's cap)."""
    from playground.engine import MAX_EXTRA_S

    costs = [run_cost(c) for c in configs.values()]
    planned = sum(c.seconds for c in costs)
    repeats = sum(c.pass_s * cfg.repeats for c, cfg in zip(costs, configs.values()))
    return planned, planned + (min(repeats, MAX_EXTRA_S) if len(configs) == 2 else 0.0)


# ---- ZeroGPU ---------------------------------------------------------------------------------------

def gpu_duration_s(config: RunConfig) -> int:
    """Seconds of GPU to declare for `config`: its estimated cost, within the scheduler's bounds."""
    return int(min(ZERO_GPU_MAX_S, max(ZERO_GPU_MIN_S, math.ceil(run_cost(config, zero_gpu=True).seconds))))


def pair_duration_s(configs: dict[str, RunConfig], figure: str = "decode") -> int:
    """Seconds of GPU to declare for a run of one or both sides: their estimated costs added, within the bounds."""
    return int(min(ZERO_GPU_MAX_S, sum(gpu_duration_s(c) for c in configs.values())))


def gpu_runner(generate: Callable[..., Iterator], zero_gpu: bool) -> Callable[..., Iterator]:
    """`generate(configs, stop, figure)` as is, or on ZeroGPU wrapped in `spaces.GPU(duration=pair_duration_s,
    size=...)`, with no repeats beyond the planned ones, which the declared duration has no room for.

    The ZeroGPU worker is another process that receives pickled arguments, so the stop switch
    cannot travel: Stop closes the stream instead, which `spaces` turns into closing the
    generator there, and the engine stops within one decode step on close.
    """
    if not zero_gpu:
        return generate
    import spaces

    @spaces.GPU(duration=pair_duration_s, size=zero_gpu_size())
    def on_gpu(configs: dict[str, RunConfig], figure: str = "decode") -> Iterator:
        yield from generate(configs, None, figure=figure, extra_s=0.0)

    return lambda configs, stop=None, figure="decode": on_gpu(configs, figure)
