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
from typing import Any

from playground.config import SETTINGS

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
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def value(self, key: str) -> Any:
        """A column of the record, or, for a setting it has no column for, what its configuration asked."""
        return getattr(self, key) if key in _FIELDS else self.config.get(key)

    @property
    def name(self) -> str:
        """A short label that says what ran: the user's label, else the backend and the settings that matter."""
        if self.label or self.batch_size == 1:
            return self.setting_name
        return f"{self.setting_name} batch {self.batch_size}"

    @property
    def setting_name(self) -> str:
        """`name` without the batch: what a batch sweep's runs share, one chart series each."""
        if self.label:
            return self.label
        cache = f"cache {self.cache_impl}" if self.use_cache else "no cache"
        comp = "" if self.compile == "off" else f" compile:{self.compile}"
        quant = "" if self.quant == "none" else f" {self.quant}"
        spec = "" if self.spec == "none" else f" spec:{self.spec}"
        split = {"none": "", "device_map": " device_map", "tp": f" tp×{self.config.get('devices')}"}.get(
            self.config.get("parallel", "none"), "")
        spread = f" spread {self.config['length_spread_pct']}%" if self.config.get("length_spread_pct") else ""
        return (f"{self.backend}: {self.attn} {self.dtype_effective or self.dtype}{quant} {cache}{comp}{spec}{split}"
                f"{spread}")


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
