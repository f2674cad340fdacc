"""The one record every run fills, whoever started it (UI, CLI, tests), and what it ran on."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import importlib.metadata
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from playground import parallel, speculative
from playground.config import AUTO_CACHE, SETTINGS, RunConfig, cache_layout

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUSY_HOST_PCT = 10.0  # other processes' share of the host's CPUs above which a run's figures are flagged


@dataclass
class RunRecord:
    # what was asked and what ran
    model: str
    attn: str
    use_cache: bool
    cache_impl: str
    dtype: str
    compile: str
    device: str
    batch_size: int
    prompt_tokens: int | None
    new_tokens: int
    mode: str
    repeats: int
    warmup: int
    backend: str = "transformers"
    quant: str = "none"
    spec: str = "none"
    draft_tokens: int = 5
    draft_model: str = ""
    status: str = "ok"  # ok | invalid | error | stopped
    reason: str = ""
    label: str = ""
    attn_effective: str | None = None
    dtype_effective: str | None = None
    device_effective: str | None = None
    quant_effective: str | None = None  # the quantization the loaded weights carry (none if torchao left them)
    cache_impl_effective: str | None = None  # the KV cache layout decoded from: auto resolved (config.cache_layout)
    quant_weights: str = ""  # e.g. "Int8Tensor: 29 of 29 linear weights" (playground.quantization)
    spec_effective: str | None = None  # the method that drafted; none when no target step verified a draft
    draft_tokens_max: int | None = None  # the most drafts one target step verified (at most draft_tokens)
    model_source: str | None = None
    random_weights: bool | None = None
    num_params: int | None = None
    compiled: str = ""
    model_training: bool | None = None  # model.training during the run (False = eval mode)
    inference_mode: bool | None = None  # torch.is_inference_mode_enabled() inside generate
    # steady-state figures: mean and sample std over the repeats
    ttft_ms: float | None = None
    ttft_ms_std: float | None = None
    decode_tok_s: float | None = None
    decode_tok_s_std: float | None = None
    itl_ms_mean: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p90: float | None = None
    itl_ms_p99: float | None = None
    e2e_ms: float | None = None
    e2e_ms_std: float | None = None
    ttft_ms_runs: list[float] = field(default_factory=list)  # each timed repeat's figure, in the order they ran
    decode_tok_s_runs: list[float] = field(default_factory=list)
    repeats_run: int | None = None  # timed repeats measured: above `repeats` where an unsure A-vs-B verdict took more
    pairing: str = ""  # how an A-vs-B run was timed: interleaved (A1 B1 B2 A2 ..., both records share pair_id) or
    # "blocks: why" (all of A's repeats, then all of B's); "" for a run on its own
    pair_id: str = ""
    tokens_generated: int | None = None
    # batching: the rows step together; the timestamps above are row 0's (playground.metrics)
    aggregate_decode_tok_s: float | None = None  # every row's tokens; decode_tok_s is one sequence's
    aggregate_decode_tok_s_std: float | None = None
    prompt_real_tokens: int | None = None  # prompt tokens over all rows
    prompt_padded_tokens: int | None = None  # left padding over all rows (uneven prompt lengths)
    padding_pct: float | None = None  # padding's share of the batch's prompt positions
    # speculative decoding, measured: target forward passes counted, draft forward passes timed
    target_steps: int | None = None  # target forward passes of the last repeat, prefill included
    drafted_tokens: int | None = None  # drafts those steps verified
    accepted_tokens: int | None = None  # drafts they accepted: tokens_generated = target_steps + accepted_tokens
    acceptance_rate: float | None = None  # accepted / drafted over the steady repeats
    tokens_per_step: float | None = None  # tokens generated per target step over the steady repeats
    draft_share_pct: float | None = None  # time drafting / decode time (draft model's forward, or lookup's search)
    draft_step_ms: float | None = None  # one draft forward pass (or one prompt-lookup search), mean
    verify_step_ms: float | None = None  # one verify step (the target over the drafts), mean; fast backend only
    # cold start: model load, then the first call (compiles when compile is on)
    load_s: float | None = None
    model_reused: bool | None = None
    cold_ttft_ms: float | None = None
    cold_e2e_ms: float | None = None
    compile_s: float | None = None
    compile_cache: str = ""  # hit [(N saved steps loaded, not traced)] | miss (artifacts saved) | reused (compiled earlier
    # in this process) | off (forced SDPA); then "; traced, not kept: why" where a step was traced by torch.compile
    # rather than saved or loaded (playground.fast.precompile)
    # memory and hardware use
    peak_mem_mb: float | None = None
    peak_mem_kind: str | None = None  # cuda_max_allocated | weights_plus_rss_growth (CPU)
    weights_mb: float | None = None  # parameter bytes held on the device, quantized tensors by their inner tensors
    kv_cache_mb: float | None = None
    kv_bytes_per_token: int | None = None  # one sequence position, from the model config (playground.memory)
    kv_bytes_per_token_measured: float | None = None  # the cache held, per position computed (playground.metrics)
    max_batch_predicted: int | None = None  # sequences of prompt + new tokens that fit in memory (playground.memory)
    gpu_busy_pct: float | None = None
    host_other_cpu_pct: float | None = None  # other processes' share of the host's CPUs in the timed repeats
    # (hardware.OtherCpuLoad); above BUSY_HOST_PCT the page flags the run
    comm_ms_per_step: float | None = None  # tensor parallel: time in collectives per decode step (rank 0, profiled)
    rank_peak_mem_mb: list[float | None] = field(default_factory=list)  # tensor parallel: each rank's peak memory
    rank_weights_mb: list[float | None] = field(default_factory=list)  # and the weight bytes each rank holds
    bandwidth_gb_s: float | None = None
    roofline_tok_s: float | None = None
    bandwidth_roofline_pct: float | None = None
    roofline_weight_mb: float | None = None  # weights one decode step reads (playground.roofline)
    roofline_kv_mb: float | None = None  # KV-cache bytes one decode step reads, on average
    roofline_kv_read: str | None = None  # filled | allocated | none: which part of the cache attention reads
    prefill_tflop_s: float | None = None  # useful prefill FLOPs (metrics.prefill_flops) per second of TTFT
    # proof
    attn_kernels: dict[str, list[str]] = field(default_factory=dict)
    attn_families: dict[str, list[str]] = field(default_factory=dict)
    matmul_kernels: dict[str, list[str]] = field(default_factory=dict)  # matmul ops and kernels seen, per phase
    fallback: str | None = None
    decode_top_kernels: list[tuple[str, float]] = field(default_factory=list)  # (GPU kernel, µs per decode step)
    # output
    output_ids: list[int] = field(default_factory=list)
    output_text: str = ""
    itl_ms: list[float] = field(default_factory=list)  # per-token latency of the last repeat
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    run_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field, and the run's `name` (what the API, the exports and the JSON lines show; `from_dict` drops
        it, since it is derived)."""
        return {**dataclasses.asdict(self), "name": self.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def value(self, key: str) -> Any:
        """A column of the record, or, for a setting it has no column for, what its configuration asked."""
        return getattr(self, key) if key in _FIELDS else self.config.get(key)

    def setting(self, name: str) -> Any:
        """A setting as its column shows it: what ran where the record knows (`<name>_effective`), else what was
        asked (an invalid run's settings, a record of an older engine)."""
        effective = self.value(f"{name}_effective") if SETTINGS[name].effective else None
        return self.value(name) if effective is None else effective

    def settings_run(self) -> dict[str, Any]:
        """Every setting's value as the run took it: as asked, with auto resolved where the record knows to what."""
        values = {name: self.value(name) for name in SETTINGS}
        for name, value in values.items():
            if value == "auto" and SETTINGS[name].effective:
                values[name] = self.setting(name)
        return values

    @property
    def name(self) -> str:
        """What ran, short (`run_name`): the user's label, else the settings that set this run apart."""
        return run_name(self.settings_run(), self.label)

    @property
    def setting_name(self) -> str:
        """`name` without the batch: what a batch sweep's runs share, one chart series each."""
        return run_name(self.settings_run(), self.label, batch=False)


# ---- a run's name ------------------------------------------------------------------------------

NAME_FIRST = ("backend", "attn", "dtype")  # always named, first; any other side setting only where not its default


def _splits(method: Any) -> bool:
    return getattr(parallel.REGISTRY.get(method), "processes", False)  # one process per device: `devices` counts


def _drafts(spec: Any) -> bool:
    return getattr(speculative.REGISTRY.get(spec), "draft_model", False)


# How a setting reads in a run's name, from its value and the run's other settings, where "<column> <value>" would
# read worse; "" where another setting's phrase says it, or where it does nothing in this run.
_PHRASES: dict[str, Callable[[Any, Mapping[str, Any]], str]] = {
    "backend": lambda value, run: value,
    "attn": lambda value, run: value,
    "dtype": lambda value, run: f"dtype {value}" if value == "auto" else value,
    "quant": lambda value, run: value,
    "use_cache": lambda value, run: "" if value else "no cache",
    "cache_impl": lambda value, run: "" if value == "none" else f"{value} cache",
    "compile": lambda value, run: f"compile {value}",
    "kernels": lambda value, run: f"{value} kernels",
    "spec": lambda value, run: f"spec {value} ×{run.get('draft_tokens')}",
    "draft_tokens": lambda value, run: "",  # said by spec's phrase
    "draft_model": lambda value, run: f"draft {value}" if _drafts(run.get("spec")) else "",
    "batch_size": lambda value, run: f"batch {value}",
    "length_spread_pct": lambda value, run: f"spread {value}%",
    "parallel": lambda value, run: f"{value} ×{run.get('devices')}" if _splits(value) else value,
    "devices": lambda value, run: "",  # said by parallel's phrase
}


def _phrase(name: str, run: Mapping[str, Any]) -> str:
    phrase = _PHRASES.get(name)
    value = run.get(name)
    return str(phrase(value, run)) if phrase else f"{SETTINGS[name].column or name} {value}"


def _differs(name: str, run: Mapping[str, Any]) -> bool:
    default = SETTINGS[name].default
    if name == "cache_impl":  # the layout auto picks for this run
        default = _layout(run, default)
    return run.get(name) not in (None, "", default)


def _layout(run: Mapping[str, Any], cache_impl: str) -> str:
    return cache_layout(run.get("use_cache", True), cache_impl, run.get("backend"), run.get("compile", "off"))


def run_name(run: Mapping[str, Any], label: str = "", batch: bool = True) -> str:
    """A run's name, the one every front shows (pane titles, history, charts, bench rows, the API's records):
    the user's label where given, else the backend, attention and dtype, then every other side setting
    (`Setting.side`) whose value is not its default, e.g. "fast · sdpa · bf16 · int4 · compile reduce-overhead ·
    spec prompt_lookup ×10". `run` maps each setting to its value as run (`RunRecord.settings_run`,
    `config_settings`); without `batch` the batch size is left out (what a batch sweep's runs share)."""
    if label:
        return label
    run = {**run, "cache_impl": _layout(run, run.get("cache_impl") or AUTO_CACHE)}  # auto said as what it picks
    side = [name for name, s in SETTINGS.items() if s.side and (batch or name != "batch_size")]
    shown = [n for n in NAME_FIRST if n in side] + [n for n in side if n not in NAME_FIRST and _differs(n, run)]
    return " · ".join(filter(None, (_phrase(n, run) for n in shown)))


def config_settings(config: RunConfig) -> dict[str, Any]:
    """Every setting of a configuration before it runs (dtype auto is known only after)."""
    return {name: getattr(config, name) for name in SETTINGS}


def config_name(config: RunConfig, batch: bool = True) -> str:
    """`run_name` of a configuration, before it runs (a pane's title)."""
    return run_name(config_settings(config), config.label, batch)


_FIELDS = {f.name for f in dataclasses.fields(RunRecord)}
SETTING_FIELDS = tuple(f.name for f in dataclasses.fields(RunRecord) if f.name in SETTINGS)  # asked, as columns


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        # "-dirty" when tracked files differ from HEAD: a copied tree (as on a remote GPU machine) may carry
        # stale git metadata, and the record must not claim a commit it did not run
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


@functools.cache
def environment() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    return {
        "device_name": torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine(),
        "cpu_count": __import__("os").cpu_count(),
        "driver": _nvidia_driver() if cuda else None,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "flash_attn": _version("flash-attn"),
        "project_commit": _git_commit(),
        "platform": platform.platform(),
    }
