"""What a publicly hosted playground allows, and how GPU work runs on a ZeroGPU Space.

A local app trusts its user: any local directory, any size the engine accepts. A hosted one
(on a Hugging Face Space, or with `PLAYGROUND_HOSTED=1` / `app.py --hosted`) serves strangers, so
it refuses local paths and remote code, can pin the models to an allowlist, and bounds the work
one request may queue on the shared device: its sizes, with the prompt counted in the model's own
tokens, and its estimated cost on this host (a 7B shape or a compile on a CPU takes minutes). `HostingPolicy.check` raises the engine's own
`ConfigError`, so a refusal reaches the user exactly like any other invalid request.

On ZeroGPU a GPU is attached only inside functions decorated with `spaces.GPU`, for a duration
declared up front; `gpu_runner` wraps the engine's generator that way, with a duration estimated
from the request. Without `spaces` (or outside ZeroGPU) the engine runs unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from playground.config import ConfigError, RunConfig
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
# Run-cost estimate, conservative for a shared host: seconds to compile, bytes/s streamed per decode
# step (decode reads every weight), FLOP/s of prefill and bytes/s of loading (random init on a CPU).
COMPILE_S = {"cpu": 300.0, "cuda": 60.0}
DECODE_BYTES_S = {"cpu": 10e9, "cuda": 1e12}
PREFILL_FLOP_S = {"cpu": 50e9, "cuda": 50e12}
LOAD_BYTES_S = {"cpu": 0.5e9, "cuda": 2e9}
COMPILE_ON_ZERO_GPU = "torch.compile is not supported on ZeroGPU"
# ZeroGPU duration estimate: seconds to load a model, to prefill 1k tokens, and per decoded token,
# generous for an 8B model in bf16 on a shared GPU; the scheduler refuses very long durations.
ZERO_GPU_LOAD_S, ZERO_GPU_PREFILL_S_PER_1K, ZERO_GPU_S_PER_TOKEN = 20.0, 0.5, 0.05
ZERO_GPU_MIN_S, ZERO_GPU_MAX_S = 20, 120


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name}={text!r} must be a whole number of at least 1")
    return int(text)


def zero_gpu_available(environ: Mapping[str, str] = os.environ) -> bool:
    """True on a ZeroGPU Space: `spaces` installed and SPACES_ZERO_GPU set (its decorator is a no-op otherwise)."""
    return bool(environ.get("SPACES_ZERO_GPU")) and importlib.util.find_spec("spaces") is not None


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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, hosted_flag: bool = False) -> HostingPolicy:
        """Hosted on a Space (SPACE_ID set), with PLAYGROUND_HOSTED=1 or `--hosted`; limits overridable by env."""
        allowlist = tuple(m.strip() for m in environ.get(ALLOWLIST_ENV, "").split(",") if m.strip()) or None
        zero_gpu = zero_gpu_available(environ)
        if not (hosted_flag or _flag(environ.get(HOSTED_ENV)) or environ.get("SPACE_ID")):
            return cls(model_allowlist=allowlist, zero_gpu=zero_gpu,
                       max_queue=_env_int(environ, LIMIT_ENVS["max_queue"], LOCAL_QUEUE))
        limits = {name: _env_int(environ, env, HOSTED_LIMITS[name]) for name, env in LIMIT_ENVS.items()}
        return cls(hosted=True, allow_local_paths=False, allow_trust_remote_code=False, model_allowlist=allowlist,
                   zero_gpu=zero_gpu, **limits)

    def check(self, config: RunConfig) -> None:
        """Raise ConfigError naming the rule or limit this request breaks; None when it may run here."""
        for rule in (self._check_model, self._check_numbers, self._check_compile, self._check_prompt,
                     self._check_cost):
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

    def _check_cost(self, config: RunConfig) -> None:
        if self.max_run_s is None:
            return
        seconds, device = run_cost_s(config)
        if seconds > self.max_run_s:
            raise ConfigError(f"this run would take about {seconds:,.0f} s of {device} time here "
                              f"({'compile, ' if config.compile != 'off' else ''}{config.model}, "
                              f"{config.warmup + config.repeats} passes of {config.new_tokens} tokens); this app "
                              f"allows {self.max_run_s} s a run ({LIMIT_ENVS['max_run_s']}): pick a smaller model, "
                              "fewer tokens or passes, compile off, or run the playground locally")

    def compile_unavailable(self, mode: str) -> str | None:
        """Why a torch.compile mode cannot be chosen here, or None."""
        return COMPILE_ON_ZERO_GPU if self.zero_gpu and mode != "off" else None

    def describe(self) -> str:
        """One line for the page saying what hosted mode limits, so a refusal is never a surprise."""
        if not self.hosted:
            return ""
        limits = ", ".join(f"{_label(name)} ≤ {getattr(self, name)}" for name in LIMIT_ENVS)
        models = f"models: {', '.join(self.model_allowlist)}" if self.model_allowlist else "presets and hub ids"
        return (f"Hosted mode: {models}; no local paths or remote code; {limits}. Your runs are kept for this "
                "browser session only and are not shown to anyone else.")

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


@functools.lru_cache(maxsize=32)
def _parameter_count(model: str, trust_remote_code: bool) -> int:
    from playground import memory
    from playground.loader import MODELS

    return memory.parameter_count(MODELS.config_for(model, trust_remote_code))


def run_cost_s(config: RunConfig) -> tuple[float, str]:
    """(estimated seconds, device) of `config` on this host: load, compile, and every pass's prefill and decode."""
    from playground import capabilities, memory
    from playground.loader import LoadError

    host = capabilities.host()
    device = host.resolve_device(config.device)
    dtype = host.resolve_dtype(config.dtype, device)
    try:
        params = _parameter_count(config.model, config.trust_remote_code)
    except LoadError as exc:
        raise ConfigError(f"cannot estimate the run's cost for this app's limit: {exc}") from exc
    weight_bytes = params * memory.DTYPE_BYTES.get(dtype, 4)
    passes = config.warmup + config.repeats + int(config.profile_kernels)
    prefill = 2 * params * prompt_token_count(config) * config.batch_size / PREFILL_FLOP_S[device]
    decode = config.new_tokens * weight_bytes / DECODE_BYTES_S[device]
    compile_s = COMPILE_S[device] if config.compile != "off" else 0.0
    return weight_bytes / LOAD_BYTES_S[device] + compile_s + passes * (prefill + decode), device


# ---- ZeroGPU ---------------------------------------------------------------------------------------

def gpu_duration_s(config: RunConfig) -> int:
    """Seconds of GPU to reserve for `config`: load + every pass's prefill and decode, bounded for the scheduler."""
    passes = config.warmup + config.repeats + int(config.profile_kernels)
    prompt_tokens = prompt_token_count(config)
    per_pass = prompt_tokens / 1000 * ZERO_GPU_PREFILL_S_PER_1K + config.new_tokens * ZERO_GPU_S_PER_TOKEN
    estimate = ZERO_GPU_LOAD_S + passes * per_pass * max(1.0, config.batch_size / 8)
    return int(min(ZERO_GPU_MAX_S, max(ZERO_GPU_MIN_S, estimate)))


def gpu_runner(generate: Callable[..., Iterator], zero_gpu: bool) -> Callable[..., Iterator]:
    """`generate(config, stop)` as is, or on ZeroGPU wrapped in `spaces.GPU(duration=gpu_duration_s)`.

    The ZeroGPU worker is another process that receives pickled arguments, so the stop switch
    cannot travel: Stop closes the stream instead, which `spaces` turns into closing the
    generator there, and the engine stops within one decode step on close.
    """
    if not zero_gpu:
        return generate
    import spaces

    @spaces.GPU(duration=gpu_duration_s)
    def on_gpu(config: RunConfig) -> Iterator:
        yield from generate(config)

    return lambda config, stop=None: on_gpu(config)
