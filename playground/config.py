"""What a run asks for: one validated, serialisable configuration.

A `RunConfig` refuses nonsense when it is built (a static cache without a cache, compile without
warm-up, flash kernels in fp32, ...) and never rewrites a request: anything that cannot run is an
error that names the field and says why. Checks that need the host (is there a GPU, is flash-attn
installed) live in `playground.capabilities`; checks that need the loaded model (context length)
live in the engine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

DTYPES = ("auto", "fp32", "fp16", "bf16")
ATTENTIONS = (
    "eager",
    "sdpa",
    "sdpa:flash",
    "sdpa:efficient",
    "sdpa:cudnn",
    "sdpa:math",
    "flash_attention_2",
    "flash_attention_3",
    "flash_attention_4",
    "flex_attention",
)
CACHE_IMPLS = ("dynamic", "static")
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
DEVICES = ("auto", "cpu", "cuda")
MODES = ("benchmark", "free")
BACKENDS = ("transformers", "fast")

# The flash-attn packages have fp16/bf16 kernels only: asking for them in fp32 cannot work anywhere.
FLASH_PACKAGE_ATTENTIONS = ("flash_attention_2", "flash_attention_3", "flash_attention_4")

MAX_NEW_TOKENS = 32_768
MAX_PROMPT_TOKENS = 131_072
MAX_REPEATS = 100
MAX_BATCH_SIZE = 256
MAX_NAME_PART_BYTES = 255  # the longest file name Linux and macOS allow, so a longer part can name nothing


class ConfigError(ValueError):
    """A request that cannot run as asked; the message names the field and the reason."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class RunConfig:
    model: str = "stdlib-llama-tiny"
    backend: str = "transformers"
    dtype: str = "auto"
    attn: str = "sdpa"
    use_cache: bool = True
    cache_impl: str = "dynamic"
    compile: str = "off"
    prompt: str | None = None
    prompt_tokens: int | None = None
    new_tokens: int = 64
    mode: str = "benchmark"
    batch_size: int = 1
    temperature: float = 0.0
    seed: int = 0
    repeats: int = 3
    warmup: int = 1
    device: str = "auto"
    trust_remote_code: bool = False
    profile_kernels: bool = True
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for check in (self._check_choices, self._check_numbers, self._check_prompt, self._check_combinations):
            check()

    def _check_choices(self) -> None:
        for name, allowed in (
            ("dtype", DTYPES),
            ("attn", ATTENTIONS),
            ("cache_impl", CACHE_IMPLS),
            ("compile", COMPILE_MODES),
            ("device", DEVICES),
            ("mode", MODES),
            ("backend", BACKENDS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} is not one of: {', '.join(allowed)}")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model is empty: give a preset name, a Hugging Face id or a local directory")
        longest = max(self.model.replace("\\", "/").split("/"), key=len)
        if len(longest.encode("utf-8", "surrogatepass")) > MAX_NAME_PART_BYTES:
            raise ConfigError(f"model name part {longest[:24]!r}… is {len(longest):,} characters: no directory or "
                              f"Hugging Face id has a part over {MAX_NAME_PART_BYTES} bytes")
        for name in ("use_cache", "trust_remote_code", "profile_kernels"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")

    def _check_numbers(self) -> None:
        for name, low, high in (
            ("new_tokens", 1, MAX_NEW_TOKENS),
            ("batch_size", 1, MAX_BATCH_SIZE),
            ("repeats", 1, MAX_REPEATS),
            ("warmup", 0, MAX_REPEATS),
            ("seed", 0, 2**63 - 1),
        ):
            value = getattr(self, name)
            if not _is_int(value) or not low <= value <= high:
                raise ConfigError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
        if not isinstance(self.temperature, (int, float)) or isinstance(self.temperature, bool):
            raise ConfigError(f"temperature must be a number, got {self.temperature!r}")
        if not 0.0 <= self.temperature <= 10.0:
            raise ConfigError(f"temperature must be from 0 (greedy) to 10, got {self.temperature}")

    def _check_prompt(self) -> None:
        if (self.prompt is None) == (self.prompt_tokens is None):
            raise ConfigError("give exactly one of prompt (text) or prompt_tokens (a synthetic prompt of N tokens)")
        if self.prompt is not None:
            if not isinstance(self.prompt, str):
                raise ConfigError(f"prompt must be text, got {type(self.prompt).__name__}")
            if not self.prompt.strip():
                raise ConfigError("prompt is empty or only whitespace: type some text or use a synthetic prompt")
            try:
                self.prompt.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ConfigError(f"prompt contains invalid Unicode (a lone surrogate at character {exc.start})") from None
        elif not _is_int(self.prompt_tokens) or not 1 <= self.prompt_tokens <= MAX_PROMPT_TOKENS:
            raise ConfigError(
                f"prompt_tokens must be a whole number from 1 to {MAX_PROMPT_TOKENS}, got {self.prompt_tokens!r}"
            )

    def _check_combinations(self) -> None:
        if self.cache_impl == "static" and not self.use_cache:
            raise ConfigError("cache_impl=static needs use_cache on: a static cache with the cache off would never be used")
        if self.compile != "off":
            if not (self.use_cache and self.cache_impl == "static"):
                raise ConfigError(
                    f"compile={self.compile} needs use_cache on and cache_impl=static: transformers compiles the "
                    "decode step only with a static cache (a dynamic or absent cache changes shape every token "
                    "and would recompile each step)"
                )
            if self.warmup < 1:
                raise ConfigError(
                    f"compile={self.compile} needs warmup >= 1: the first call compiles, and without a warm-up "
                    "that time would land in the measured repeats"
                )
        if self.backend == "fast":
            if not (self.use_cache and self.cache_impl == "static"):
                raise ConfigError("backend=fast always decodes from its own static KV cache: set use_cache on and "
                                  "cache_impl=static")
            if not (self.attn.startswith("sdpa") or self.attn == "flash_attention_2"):
                raise ConfigError(f"backend=fast computes attention with SDPA or flash-attn only: choose sdpa, "
                                  f"sdpa:<backend> or flash_attention_2, not {self.attn}")
        if self.dtype == "fp32" and self.attn in FLASH_PACKAGE_ATTENTIONS:
            raise ConfigError(f"attn={self.attn} runs only in fp16 or bf16; choose dtype fp16 or bf16 (or auto on a GPU)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def sdpa_backend(self) -> str | None:
        """The forced SDPA backend of `sdpa:<backend>`, or None."""
        return self.attn.split(":", 1)[1] if self.attn.startswith("sdpa:") else None

    @property
    def transformers_attn(self) -> str:
        """The `attn_implementation` handed to transformers (forced SDPA backends are plain `sdpa` there)."""
        return "sdpa" if self.attn.startswith("sdpa") else self.attn

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown configuration field(s): {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)
