"""What a run asks for: one validated, serialisable configuration.

A `RunConfig` refuses nonsense when it is built (a static cache without a cache, compile without
warm-up, flash kernels in fp32, ...) and never rewrites a request: anything that cannot run is an
error that names the field and says why. Checks that need the host (is there a GPU, is flash-attn
installed) live in `playground.capabilities`; checks that need the loaded model (context length)
live in the engine.

Each field a user sets carries its `Setting` (label, help, choices, bounds, default): the UI controls, the
API parameters, the CLI options and the printers' columns are generated from `SETTINGS`, and every
default lives here.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from playground import attention, backends, quantization, speculative
from playground import parallel as splits
from playground.presets import DEFAULT_MODEL

DTYPES = ("auto", "fp32", "fp16", "bf16")
ATTENTIONS = attention.NAMES
AUTO_CACHE = "auto"  # the backend's own KV cache layout: `cache_layout` says which
CACHE_IMPLS = (AUTO_CACHE, "dynamic", "static")
AOT = "aot"  # not a torch.compile mode: the fast backend's decode step exported and compiled ahead of time
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune", AOT)
# how a compiled fast step's kernels get their launch configs: inductor's own, the same every compile (the default:
# two cold compiles of the 1B shape landed 0.4% apart on an H100, tuned ones 12.7%), or timed while compiling
KERNELS = ("fixed", "tuned")
DEVICES = ("auto", "cpu", "cuda")
MODES = ("benchmark", "free")
BACKENDS = backends.NAMES
QUANTS = quantization.NAMES
SPECS = speculative.NAMES

MAX_NEW_TOKENS = 32_768
MAX_PROMPT_TOKENS = 131_072
MAX_REPEATS = 100
MAX_BATCH_SIZE = 4096  # enough for the largest batch an 8B model fits on a 141 GB GPU at a short context
MAX_NAME_PART_BYTES = 255  # the longest file name Linux and macOS allow, so a longer part can name nothing


class ConfigError(ValueError):
    """A request that cannot run as asked; the message names the field and the reason."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Setting:
    """How one RunConfig field is asked for and shown. The UI controls, the API parameters, the CLI options and
    the printers' settings columns are all built from these, so a new lever is one field here."""

    label: str  # the UI control's label
    help: str  # what it changes, for the CLI's --help
    choices: tuple[str, ...] = ()  # the allowed values; empty: text, a number or true/false
    bounds: tuple[int, int] | None = None  # a whole number's lowest and highest allowed value
    side: bool = False  # set per side, so A and B can differ; else shared by both sides
    sweep: bool = False  # the CLI takes a comma-separated list and sweeps it
    load: bool = False  # changing it reloads the model, so a sweep changes it least often
    column: str = ""  # its header in the settings columns of a results table; "": not shown there
    effective: bool = False  # the columns show what ran (`<name>_effective` of the record), not what was asked
    flag: str = ""  # the CLI option's name where it is not the field's (--cache for use_cache)
    api: str = ""  # the API parameter's name where it is not the field's
    choice_labels: dict[str, str] = field(default_factory=dict)  # UI wording of a choice, where plain is unclear
    name: str = ""  # filled from the field, with its default and type
    default: Any = None
    type: Any = None


def _setting(default: Any, label: str, help: str, **options: Any) -> Any:
    return field(default=default, metadata={"setting": Setting(label, help, **options)})


@dataclass(frozen=True)
class RunConfig:
    model: str = _setting(DEFAULT_MODEL, "Model", "presets (see `python -m playground models`), Hugging Face ids or "
                          "local directories",
                          sweep=True, load=True, column="model")
    backend: str = _setting("transformers", "backend", "transformers generate, or the fast static-cache decoder",
                            choices=BACKENDS, side=True, sweep=True, column="backend",
                            choice_labels={"transformers": "transformers generate", "fast": "fast: static cache + "
                                           "compiled decode step (Llama-family)"})
    dtype: str = _setting("auto", "dtype", "weight dtype", choices=DTYPES, side=True, sweep=True, load=True,
                          column="dtype", effective=True)
    attn: str = _setting("sdpa", "attention implementation", "attention implementation", choices=ATTENTIONS,
                         side=True, sweep=True, load=True, column="attn")
    quant: str = _setting("none", "weight quantization", "weight-only quantization of the linear layers (torchao)",
                          choices=QUANTS, side=True, sweep=True, load=True, column="quant", effective=True,
                          choice_labels={q.name: q.label for q in quantization.REGISTRY.values()})
    use_cache: bool = _setting(True, "KV cache", "KV cache", side=True, sweep=True, column="cache", flag="cache")
    cache_impl: str = _setting(AUTO_CACHE, "cache impl", "KV cache layout; auto: the backend's own (static for the "
                               "fast backend and for a compiled step, else dynamic)", choices=CACHE_IMPLS, side=True,
                               sweep=True, column="cache impl", effective=True,
                               choice_labels={AUTO_CACHE: "auto: the backend's own"})
    compile: str = _setting("off", "torch.compile", "torch.compile mode, or aot: the fast backend's decode step "
                            "exported and compiled ahead of time (AOTInductor), kept on disk",
                            choices=COMPILE_MODES, side=True, sweep=True, column="compile")
    kernels: str = _setting(KERNELS[0], "kernel choice", "the fast backend's compiled steps: fixed takes inductor's "
                            "own launch configs and times none (its deterministic mode: the same kernels every "
                            "compile), tuned times them for each kernel while compiling (two compiles can land "
                            "several percent apart)",
                            choices=KERNELS, side=True, sweep=True, column="kernels",
                            choice_labels={"fixed": "fixed: the same kernels every compile",
                                           "tuned": "tuned: launch configs timed per compile"})
    spec: str = _setting("none", "speculative decoding", "propose tokens cheaply and verify them in one target step: "
                         "a draft model or n-grams from the prompt", choices=SPECS, side=True, sweep=True,
                         column="spec", effective=True,
                         choice_labels={m.name: m.label for m in speculative.REGISTRY.values()})
    draft_tokens: int = _setting(5, "draft tokens", "tokens proposed per target step (speculative decoding)",
                                 bounds=(1, speculative.MAX_DRAFT_TOKENS), side=True, sweep=True, column="draft k")
    draft_model: str = _setting(speculative.DEFAULT_DRAFT_MODEL, "draft model", "the draft for spec=draft: a "
                                "shipped draft, a preset, a local directory or a Hugging Face id with the target's "
                                "tokenizer", side=True, sweep=True, column="draft")
    prompt: str | None = _setting(None, "prompt", "prompt text")
    prompt_tokens: int | None = _setting(None, "synthetic tokens", "synthetic prompt lengths",
                                         bounds=(1, MAX_PROMPT_TOKENS), sweep=True, column="prompt")
    new_tokens: int = _setting(64, "max new tokens", "tokens to generate", bounds=(1, MAX_NEW_TOKENS), sweep=True,
                               column="new", api="max_new_tokens")
    mode: str = _setting("benchmark", "mode", "benchmark: exactly N tokens; free: EOS may end", choices=MODES)
    batch_size: int = _setting(1, "batch size", "batch sizes: sequences generated together",
                               bounds=(1, MAX_BATCH_SIZE), side=True, sweep=True, column="batch")
    length_spread_pct: int = _setting(0, "prompt length spread %", "how uneven the batch's prompts are: row i keeps "
                                      "a prefix of 100 - spread x i/(batch-1) percent of the prompt, left-padded "
                                      "(0: every row the whole prompt)", bounds=(0, 100), side=True, sweep=True,
                                      column="spread %")
    parallel: str = _setting("none", "split across devices", "one device, accelerate's device_map over the GPUs, "
                             "or transformers' tensor parallel with one process per device", choices=splits.NAMES,
                             side=True, sweep=True, load=True, column="parallel",
                             choice_labels={m.name: m.label for m in splits.REGISTRY.values()})
    devices: int = _setting(2, "devices", "GPUs (or CPU processes) tensor parallel splits the model across; "
                            "device_map uses every visible GPU",
                            bounds=(2, splits.MAX_DEVICES), side=True, sweep=True, column="devices")
    temperature: float = _setting(0.0, "temperature", "sampling temperature from 0 (greedy) to 10")
    seed: int = _setting(0, "seed", "random seed for sampling and synthetic prompts", bounds=(0, 2**63 - 1))
    repeats: int = _setting(3, "repeats", "measured passes per run; results are mean ± stddev",
                            bounds=(1, MAX_REPEATS))
    warmup: int = _setting(1, "warm-up", "unmeasured passes first", bounds=(0, MAX_REPEATS))
    device: str = _setting("auto", "device", "where to run", choices=DEVICES, sweep=True, load=True,
                           column="device", effective=True)
    trust_remote_code: bool = False
    profile_kernels: bool = True
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for check in (self._check_choices, self._check_numbers, self._check_prompt, self._check_combinations):
            check()

    def _check_choices(self) -> None:
        for name, setting in SETTINGS.items():
            value = getattr(self, name)
            if setting.choices and value not in setting.choices:
                raise ConfigError(f"{name}={value!r} is not one of: {', '.join(setting.choices)}")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model is empty: give a preset name, a Hugging Face id or a local directory")
        if not isinstance(self.draft_model, str) or (self._speculation.draft_model and not self.draft_model.strip()):
            raise ConfigError("draft_model is empty: give a shipped draft, a preset, a local directory or a Hugging "
                              "Face id")
        longest = max(self.model.replace("\\", "/").split("/"), key=len)
        if len(longest.encode("utf-8", "surrogatepass")) > MAX_NAME_PART_BYTES:
            raise ConfigError(f"model name part {longest[:24]!r}… is {len(longest):,} characters: no directory or "
                              f"Hugging Face id has a part over {MAX_NAME_PART_BYTES} bytes")
        for name in _BOOLEANS:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")

    def _check_numbers(self) -> None:
        for name, setting in SETTINGS.items():
            value = getattr(self, name)
            if setting.bounds is None or (value is None and setting.default is None):  # an optional count left out
                continue
            low, high = setting.bounds
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

    def _check_combinations(self) -> None:
        if self.cache_impl == "static" and not self.use_cache:
            raise ConfigError("cache_impl=static needs use_cache on: a static cache with the cache off would never be used")
        if self.compile != "off":
            if self.cache_impl_effective != "static":
                raise ConfigError(
                    f"compile={self.compile} needs use_cache on and cache_impl=static (or {AUTO_CACHE}): transformers "
                    "compiles the decode step only with a static cache (a dynamic or absent cache changes shape every "
                    "token and would recompile each step)"
                )
            if self.warmup < 1:
                raise ConfigError(
                    f"compile={self.compile} needs warmup >= 1: the first call compiles, and without a warm-up "
                    "that time would land in the measured repeats"
                )
        if self.compile == AOT and not backends.REGISTRY[self.backend].compiles_ahead:
            raise ConfigError(f"compile={AOT} runs on backend {' or '.join(backends.AHEAD_OF_TIME)} only: "
                              f"{self.backend} compiles with torch.compile")
        if self.kernels != KERNELS[0] and (not backends.REGISTRY[self.backend].tunes_kernels
                                           or self.compile in ("off", AOT)):
            raise ConfigError(f"kernels={self.kernels} applies to the steps backend "
                              f"{' or '.join(backends.TUNED)} compiles with torch.compile (compile default, "
                              f"reduce-overhead or max-autotune); with backend={self.backend} and "
                              f"compile={self.compile} the playground times no launch config, so leave it at "
                              f"{KERNELS[0]}")
        if self.kernels == "fixed" and self.compile == "max-autotune" and backends.REGISTRY[self.backend].tunes_kernels:
            raise ConfigError("compile=max-autotune times kernels while compiling and kernels=fixed times none: "
                              "choose kernels=tuned to autotune, or compile=reduce-overhead for the same CUDA graphs "
                              "with fixed kernels")
        if backends.REGISTRY[self.backend].static_cache_only and self.cache_impl_effective != "static":
            raise ConfigError(f"backend={self.backend} always decodes from its own static KV cache: set use_cache on "
                              f"and cache_impl={AUTO_CACHE} or static")
        if self.backend not in self._attention.backends:
            raise ConfigError(f"backend={self.backend} takes attn {attention.listed(attention.taken_by(self.backend))} "
                              f"only, not {self.attn}")
        if self.dtype != "auto" and self.dtype not in self._attention.dtypes:  # e.g. flash-attn has no fp32 kernels
            allowed = " or ".join(self._attention.dtypes)
            raise ConfigError(f"attn={self.attn} runs only in {allowed}; choose dtype {allowed} (or auto on a GPU)")
        quant = quantization.REGISTRY[self.quant]
        if self.backend not in quant.backends:
            raise ConfigError(f"quant={self.quant} runs on backend {' or '.join(quant.backends)} only")
        if self.dtype != "auto" and self.dtype not in quant.dtypes:
            raise ConfigError(f"quant={self.quant} kernels take only {' or '.join(quant.dtypes)} activations; "
                              f"choose dtype {' or '.join(quant.dtypes)}")
        self._check_speculation()
        self._check_parallel()

    def _check_parallel(self) -> None:
        if self.parallel == "none":
            return
        clashes = [f"backend={self.backend}" if self.backend != "transformers" else "",
                   f"spec={self.spec}" if self.spec != "none" else "",
                   f"quant={self.quant}" if self.quant != "none" else ""]
        if any(clashes):
            raise ConfigError(f"parallel={self.parallel} runs on backend transformers without speculation or "
                              f"quantization: set {' and '.join(filter(None, clashes))} back (the model is split by "
                              "transformers and accelerate, whose split weights the fast backend, the draft and "
                              "torchao do not take)")

    def _check_speculation(self) -> None:
        method = self._speculation
        if not method.speculates:
            return
        if self.backend not in method.backends:
            raise ConfigError(f"spec={self.spec} runs on backend {' or '.join(method.backends)} only: the "
                              f"{self.backend} backend has no speculative step yet")
        if not self.use_cache:
            raise ConfigError(f"spec={self.spec} needs use_cache on: the target verifies the drafts against its KV "
                              "cache and crops the rejected ones from it")
        if self.compile == AOT:
            raise ConfigError(f"spec={self.spec} needs compile off or a torch.compile mode: its verify step is not "
                              f"compiled ahead of time ({AOT})")
        if self.compile != "off" and self.backend not in method.compiled_backends:
            raise ConfigError(f"spec={self.spec} needs compile off on backend {self.backend}: each target step "
                              "verifies as many tokens as were drafted, so a compiled step would see a new shape "
                              "almost every time")
        if self.batch_size != 1:
            raise ConfigError(f"spec={self.spec} needs batch_size 1: drafts are accepted for one sequence at a time")

    @property
    def cache_impl_effective(self) -> str:
        """The KV cache layout this run decodes from: cache_impl with auto resolved (`cache_layout`)."""
        return cache_layout(self.use_cache, self.cache_impl, self.backend, self.compile)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def _speculation(self) -> speculative.Method:
        return speculative.REGISTRY[self.spec]

    @property
    def _attention(self) -> attention.Attention:
        return attention.REGISTRY[self.attn]

    @property
    def sdpa_backend(self) -> str | None:
        """The forced SDPA backend of `sdpa:<backend>`, or None."""
        return self._attention.sdpa_backend

    @property
    def transformers_attn(self) -> str:
        """The `attn_implementation` handed to transformers (forced SDPA backends are plain `sdpa` there)."""
        return self._attention.transformers

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


def cache_layout(use_cache: bool, cache_impl: str, backend: str, compile: str) -> str:
    """The KV cache layout a run decodes from: none without a cache, an explicit choice as asked, and auto as the
    backend's own: static for a backend that decodes only from its own static cache, and for a compiled step (a
    dynamic cache changes shape every token), else dynamic."""
    if not use_cache:
        return "none"
    if cache_impl != AUTO_CACHE:
        return cache_impl
    entry = backends.REGISTRY.get(backend)
    return "static" if (entry and entry.static_cache_only) or compile != "off" else "dynamic"


_TYPES = typing.get_type_hints(RunConfig)
SETTINGS = {f.name: dataclasses.replace(f.metadata["setting"], name=f.name, default=f.default, type=_TYPES[f.name])
            for f in dataclasses.fields(RunConfig) if "setting" in f.metadata}  # field name -> Setting, in field order
_BOOLEANS = tuple(name for name, kind in _TYPES.items() if kind is bool)
