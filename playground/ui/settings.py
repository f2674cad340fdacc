"""What the controls mean: plain settings for columns A and B and the shared prompt, and the
one-click comparisons.

Kept free of Gradio and torch (the engine, the loader and the host probe are imported when a check
or a run needs them) so that the event functions, the API and the tests speak the same language:
a `ColumnSettings` plus a `SharedSettings` make one `RunConfig`, and the engine's `ConfigError`
explains anything that cannot run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from playground.config import ATTENTIONS, COMPILE_MODES, SETTINGS, ConfigError, RunConfig
from playground.hosting import HostingPolicy
from playground.ui import speculation

SIDES = ("A", "B")
READY_PROMPTS = {
    "Explain the KV cache": "Explain in simple words why a KV cache makes text generation faster.",
    "Short story": "Once upon a time, in a data centre far away, a tiny GPU dreamed of",
    "Python function": "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Long: attention article (~2,500 characters)": " ".join(
        f"Part {i}. Attention lets every token look at every earlier token. During prefill the model reads "
        "the whole prompt at once, which is limited by compute; during decode it produces one token at a "
        "time and must read all of its weights and the cached keys and values for each step, which is "
        "limited by memory bandwidth."
        for i in range(1, 10)
    ),
    **speculation.READY_PROMPTS,
}
DEFAULT_PROMPT = next(iter(READY_PROMPTS.values()))


SIDE_SETTINGS = {name: setting for name, setting in SETTINGS.items() if setting.side}
ColumnSettings = dataclasses.make_dataclass(
    "ColumnSettings", [(name, s.type, field(default=s.default)) for name, s in SIDE_SETTINGS.items()], frozen=True)
ColumnSettings.__doc__ = "One side of the comparison: every per-side setting of the run configuration."


@dataclass(frozen=True)
class SharedSettings:
    """What both sides share, so that their numbers are comparable."""

    model: str
    prompt: str = DEFAULT_PROMPT
    synthetic: bool = False  # use a synthetic prompt of `prompt_tokens` tokens instead of `prompt`
    prompt_tokens: int = 512  # what the synthetic-length box starts at
    new_tokens: int = SETTINGS["new_tokens"].default
    mode: str = SETTINGS["mode"].default
    repeats: int = SETTINGS["repeats"].default
    warmup: int = SETTINGS["warmup"].default
    figure: str = "decode"  # the headline the verdict leads with (diagnostics.HEADLINES), set by a comparison


def _whole(name: str, value: object) -> int:
    """A count from a number box or an API caller: 3 and 3.0 pass; '3x', 2.5, None and booleans are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {value!r}") from None
    if not number.is_integer():
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    return int(number)


def make_config(shared: SharedSettings, column: ColumnSettings, policy: HostingPolicy = HostingPolicy()) -> RunConfig:
    """The engine request for one side; raises ConfigError with the engine's own words, or the hosting limit's."""
    prompt = (dict(prompt_tokens=_whole("prompt_tokens", shared.prompt_tokens)) if shared.synthetic
              else dict(prompt=shared.prompt))
    config = RunConfig(
        model=(shared.model or "").strip(), **dataclasses.asdict(column), new_tokens=_whole("new_tokens", shared.new_tokens),
        mode=shared.mode, repeats=_whole("repeats", shared.repeats), warmup=_whole("warmup", shared.warmup), **prompt,
    )
    policy.check(config)
    return config


def _config_and_tokenizer(model: str):
    """(model config, tokenizer) without the weights, or None for a hub id (fetched only when it runs).
    Raises LoadError for a name that cannot load."""
    from playground.loader import load_config, load_tokenizer, model_source

    if model_source(model) == "hub":
        return None
    return load_config(model), load_tokenizer(model)


def context_of(model: str) -> int | None:
    """The model's context in tokens, as the loader reads it; None where unknown before it loads."""
    from playground.loader import LoadError, max_context

    try:
        probe = _config_and_tokenizer((model or "").strip())
    except (LoadError, ConfigError, OSError, ValueError):
        return None
    return max_context(probe[0]) if probe is not None else None


def check_model_fits(config: RunConfig, device: str, dtype: str) -> int | None:
    """Refuse before Run what the engine refuses around loading: a model that cannot load, weights and KV cache
    beyond free memory, a prompt that encodes to nothing or that with the new tokens overflows the context.
    The engine's own checks, run on the model's config and tokenizer; a hub model is checked when it runs.
    Returns the largest batch predicted to fit at this context, None where unknown."""
    from playground import engine
    from playground.loader import LoadError

    estimate = None
    try:
        probe = _config_and_tokenizer(config.model)
        if probe is not None:
            estimate = engine.check_memory(config, engine.MODELS, device, dtype)
    except ConfigError:
        raise
    except (LoadError, OSError, ValueError) as exc:  # a config or tokenizer that cannot be read
        raise ConfigError(str(exc)) from None
    if probe is not None:
        engine.prompt_ids(config, probe[1], probe[0])
    return estimate.max_batch if estimate else None


FEW_USERS = 8  # a predicted largest batch below this earns the advice to cap the context or queue requests


def fit_note(config: RunConfig, max_batch: int | None) -> str:
    """' · about N sequences of this length fit at once', with the serving advice where that is few."""
    if max_batch is None:
        return ""
    note = f" · about {max_batch:,} sequences of this prompt and {config.new_tokens:,} new tokens fit in memory at once"
    return note + (f": {serving_advice()}" if max_batch < FEW_USERS else "")


def serving_advice() -> str:
    return ("few concurrent users fit, since every sequence holds its own KV cache; cap the context (fewer prompt or "
            "new tokens) or queue requests rather than batch them all")


def check_column(shared: SharedSettings, column: ColumnSettings,
                 policy: HostingPolicy = HostingPolicy()) -> tuple[bool, str]:
    """(runnable, why): the engine's or the hosting policy's reason when it cannot run here, else what it runs as."""
    from playground import capabilities

    try:
        config = make_config(shared, column, policy)
        device, dtype = capabilities.check(config)
        max_batch = check_model_fits(config, device, dtype)
    except ConfigError as exc:
        return False, str(exc)
    backend = "fast backend · " if column.backend == "fast" else ""
    split = {"none": "", "device_map": " (device_map over the GPUs)",
             "tp": f" × {config.devices} (tensor parallel)"}[config.parallel]
    return True, (f"runs as {backend}{column.attn} · {dtype} on {device}{split}{cost_note(config, policy)}"
                  f"{fit_note(config, max_batch)}")


def cost_note(config: RunConfig, policy: HostingPolicy) -> str:
    """' · ≈ 9 GPU s (load ... + passes ...)': the run's estimated device time (`hosting.run_cost`), or '' where
    the model's shape is unknown before it loads (locally a hub id is not fetched just for this)."""
    from playground.hosting import run_cost
    from playground.loader import model_source

    if model_source(config.model) == "hub" and not policy.hosted:
        return ""
    try:
        return " · " + run_cost(config, zero_gpu=policy.zero_gpu).summary()
    except ConfigError:
        return ""


def attention_choices(dtype: str) -> list[tuple[str, str]]:
    """(label, value) pairs; an option this host cannot run says why in its label."""
    from playground import capabilities

    host = capabilities.host()
    device = host.resolve_device("auto")
    resolved = host.resolve_dtype(dtype, device)
    choices = []
    for attn in ATTENTIONS:
        reason = capabilities.attention_unavailable(attn, device, resolved, host)
        choices.append((f"{attn}  ⛔ {reason}" if reason else attn, attn))
    return choices


def compile_choices(policy: HostingPolicy) -> list[tuple[str, str]]:
    """(label, value) pairs; a compile mode this deployment cannot use says why (ZeroGPU)."""
    choices = []
    for mode in COMPILE_MODES:
        reason = policy.compile_unavailable(mode)
        choices.append((f"{mode}  ⛔ {reason}" if reason else mode, mode))
    return choices


FLASH_RELEASES = "https://github.com/Dao-AILab/flash-attention/releases"


def flash_help(env: dict, hosted: bool) -> str:
    """How to get flash-attn where it is missing: a prebuilt wheel on a Space (no compiler there; installed with the
    Space's torch pin, which local installs never read), pip locally."""
    from playground.attention import FLASH_ATTN_INSTALL

    if env.get("flash_attn"):
        return ""
    torch_mm = ".".join(str(env.get("torch") or "2.8").split("+")[0].split(".")[:2])
    cuda_major = str(env.get("cuda") or "12").split(".")[0]
    py = "".join(str(env.get("python") or "3.12").split(".")[:2])
    wheel = f"cu{cuda_major}torch{torch_mm}cxx11abiTRUE-cp{py}-cp{py}-linux_x86_64"
    space = (f"on a Space, add the prebuilt wheel from [the flash-attention releases]({FLASH_RELEASES}) whose name "
             f"ends in `{wheel}.whl` to pre-requirements.txt, after its `torch=={env.get('torch', '').split('+')[0]}` "
             "pin, as `flash_attn @ <wheel URL>` (cxx11abiFALSE if your torch was built without the C++11 ABI)")
    local = f"locally, `{FLASH_ATTN_INSTALL}` (needs a CUDA toolkit)"
    first, second = (space, local) if hosted else (local, space)
    return f"**flash-attn is not installed**, so `flash_attention_2` is unavailable. To enable it: {first}; {second}."


# What a comparison leaves unnamed takes its default, so an earlier click never leaks into a later one.
WORKLOAD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SharedSettings) if f.name not in ("model", "prompt")}
LONG_PROMPT_TOKENS = 2048  # long enough to make prefill attention-bound on a GPU
# On ZeroGPU a visitor has minutes of GPU a day: two repeats keep every comparison of the default model
# within about 20 estimated GPU seconds for both sides (hosting.run_cost).
ZERO_GPU_WORKLOAD = dict(repeats=2)


@dataclass(frozen=True)
class Comparison:
    """A classic A-vs-B set-up; `shared` overrides the workload defaults it needs."""

    name: str
    note: str
    a: ColumnSettings
    b: ColumnSettings
    shared: dict = field(default_factory=dict)
    long_prompt: bool = False  # a synthetic prompt of LONG_PROMPT_TOKENS, cut to fit the model's context
    figure: str = "decode"  # the figure the lever is about, which the headline leads with (diagnostics.HEADLINES)
    cannot_show: str = ""  # why this host cannot show the lever's effect, and what would: said before Run

    def workload(self, context: int | None) -> dict:
        """Every shared setting this comparison depends on, for a model of `context` tokens (None: unknown)."""
        from playground.hosting import zero_gpu_available

        values = {**WORKLOAD_DEFAULTS, **self.shared, **(ZERO_GPU_WORKLOAD if zero_gpu_available() else {}),
                  "figure": self.figure}
        if self.long_prompt:
            room = context - values["new_tokens"] if context else LONG_PROMPT_TOKENS
            values.update(synthetic=True, prompt_tokens=min(LONG_PROMPT_TOKENS, room))
        return values

    def configs(self, model: str, policy: HostingPolicy = HostingPolicy()) -> dict[str, RunConfig]:
        """The engine requests of both sides for `model`, as Run sends them; raises ConfigError as make_config."""
        shared = SharedSettings(model=model, **self.workload(context_of(model)))
        return {"A": make_config(shared, self.a, policy), "B": make_config(shared, self.b, policy)}

    def estimate_s(self, model: str, policy: HostingPolicy = HostingPolicy()) -> tuple[float, float] | None:
        """Estimated seconds of the sides that can run here, (planned, at most) as `hosting.pair_seconds`, or None
        where the policy refuses a side or the model's shape is unknown before it loads (as `cost_note`)."""
        from playground import capabilities
        from playground.hosting import pair_seconds
        from playground.loader import model_source

        if model_source(model) == "hub" and not policy.hosted:
            return None
        try:
            configs = self.configs(model, policy)
            runnable = {}
            for side, config in configs.items():
                try:
                    capabilities.check(config)
                    runnable[side] = config
                except ConfigError:  # a side refused before Run does not run: its cost is not the run's
                    pass
            return pair_seconds(runnable)
        except ConfigError:
            return None


def _column(**changes) -> ColumnSettings:
    return dataclasses.replace(ColumnSettings(), **changes)


def comparisons() -> dict[str, Comparison]:
    """The one-click presets, adapted to this host (compile mode, flash availability, ZeroGPU)."""
    from playground import capabilities
    from playground.hosting import zero_gpu_available

    host = capabilities.host()
    cuda = host.cuda
    compiles = cuda and not zero_gpu_available()  # ZeroGPU runs no torch.compile: both sides eager there
    # the fast backend's best attention where flash-attn runs: flash-decoding reads only the filled cache
    fast_attn = ("flash_attention_2" if cuda and not capabilities.attention_unavailable(
        "flash_attention_2", "cuda", "bf16", host) else "sdpa")
    items = (
        Comparison("KV cache: off vs on",
                   "Without a cache every step re-reads the whole sequence: watch per-token latency grow with "
                   "position in the latency chart.",
                   _column(use_cache=False), _column(),
                   dict(synthetic=True, prompt_tokens=128, new_tokens=128)),
        Comparison("Attention: eager vs sdpa (long context)",
                   "A long prompt makes prefill attention-bound. Next, try sdpa vs flash_attention_2 "
                   "to complete eager → sdpa → flash.",
                   _column(attn="eager"), _column(attn="sdpa"), dict(new_tokens=32), long_prompt=True, figure="ttft"),
        Comparison("Attention: sdpa vs flash_attention_2 (long context)",
                   "Both in bf16, since FlashAttention runs only in fp16/bf16. The kernels row shows what really "
                   "ran; if flash-attn cannot run here, B says why.",
                   _column(attn="sdpa", dtype="bf16"), _column(attn="flash_attention_2", dtype="bf16"), dict(new_tokens=32),
                   long_prompt=True, figure="ttft"),
        Comparison("dtype: fp32 vs bf16",
                   "Half the bytes per weight: decode, which is bandwidth-bound, should speed up on a GPU. Tokens "
                   "may differ after a few steps because rounding differs.",
                   _column(dtype="fp32"), _column(dtype="bf16"), dict(new_tokens=128)),
        Comparison("torch.compile: off vs on",
                   "Compile needs a static cache and a warm-up: the first call compiles (reported as compile "
                   "time) and stays out of the measured repeats. On CPU compiling takes a while.",
                   _column(cache_impl="static"),
                   _column(cache_impl="static", compile="reduce-overhead" if cuda else "default"),
                   dict(warmup=1, new_tokens=128 if cuda else 64)),  # a CPU's first call compiles for ~20 s
        Comparison("Backend: transformers vs fast",
                   "Same weights, same static cache: transformers' generate loop against a gpt-fast-style decoder "
                   "whose compiled decode step replays as one CUDA graph per token (compile needs a GPU)."
                   + (" Each side uses its fastest attention here: sdpa for transformers, flash_attention_2 "
                      "(flash-decoding) for fast." if fast_attn == "flash_attention_2" else "")
                   if compiles else "Same weights, same static cache: transformers' generate loop against the fast "
                   "decoder; where torch.compile runs both get it, here both run eager, so B gains only what its "
                   "leaner loop saves.",
                   _column(cache_impl="static", compile="reduce-overhead" if compiles else "off"),
                   _column(cache_impl="static", compile="reduce-overhead" if compiles else "off", backend="fast",
                           attn=fast_attn),
                   dict(warmup=1, new_tokens=128)),
        Comparison("Batching: 1 vs 4 sequences",
                   "B decodes 4 sequences together, their prompts running from the whole text down to half of it "
                   "(left-padded): each step reads the weights once for all 4. 'Decode, all sequences' is the "
                   "batch's rate, 'Decode throughput' one sequence's; the Batch and KV rows show the padding and "
                   "what the cache holds. 'Sweep A's batch size' charts more sizes.",
                   _column(), _column(batch_size=4, length_spread_pct=50), dict(new_tokens=64), figure="throughput"),
        Comparison("Quantization: fp32 vs int8",
                   "int8 weight-only (torchao) stores a quarter of fp32's weight bytes. On CPU torchao dequantizes "
                   "before each matmul, so expect it slower and flagged; the tokens show what rounding cost.",
                   _column(dtype="fp32"), _column(dtype="fp32", quant="int8"), dict(new_tokens=128),
                   cannot_show="" if cuda else (
                       "on a CPU torchao dequantizes the int8 weights before every matmul, so B decodes no faster; the "
                       "run shows what it saves in weight memory and what rounding costs in tokens. Fewer weight "
                       "bytes pay where a kernel reads them packed: the fast backend's gemlite int8 on a CUDA GPU.")),
    )
    fast = dict(cache_impl="static", compile="reduce-overhead" if compiles else "off", backend="fast", attn=fast_attn,
                dtype="bf16")
    fast_fp16 = dict(fast, dtype="fp16")  # gemlite's int4 kernels take fp16 activations only
    captured = () if zero_gpu_available() else (  # no torch.compile there: an uncaptured gemlite step waits on the host
        Comparison("Quantization, fast backend: bf16 vs int4 (tinygemm)",
                   "int4 weight-only (torchao's tile-packed layout, group 128) reads a quarter of bf16's weight "
                   "bytes through torch's tinygemm kernel, inside the fast backend's replayed step. Decode only "
                   "gets faster if that kernel reads its bytes faster than bf16's matmul reads twice as many: the "
                   "kernels row says what ran. Needs a CUDA GPU in bf16; elsewhere B says why.",
                   _column(**fast), _column(**fast, quant="int4"), dict(warmup=1, new_tokens=128)),
        Comparison("Quantization, fast backend: bf16 vs int8 (gemlite)",
                   "The fast backend replays its whole decode step as one CUDA graph, so gemlite's int8 GEMV kernels "
                   "(half of bf16's weight bytes) are not held up by the host launching them. Compare decode "
                   "throughput, GPU busy and weight memory, and the logits row for what rounding cost. Needs a CUDA "
                   "GPU and gemlite; elsewhere B says why.",
                   _column(**fast), _column(**fast, quant="int8-gemlite"), dict(warmup=1, new_tokens=128)),
        Comparison("Quantization, fast backend: fp16 vs int4 (gemlite)",
                   "A quarter of the weight bytes, through gemlite's int4 GEMV kernels (HQQ, group 128) in the fast "
                   "backend's replayed step. gemlite's int4 takes fp16 activations only, so both sides run fp16. On "
                   "a model with random weights int4 moves the logits by as much as they are large: read its quality "
                   "on a trained model. Needs a CUDA GPU and gemlite; elsewhere B says why.",
                   _column(**fast_fp16), _column(**fast_fp16, quant="int4-gemlite"),
                   dict(warmup=1, new_tokens=128)),)
    kernel_choice = () if not compiles else (  # uncompiled steps time nothing: there is no choice to make
        Comparison("Kernel choice, fast backend: fixed vs tuned",
                   "Tuned times launch configs for each kernel while compiling, so where it lands follows the "
                   "timing noise: two compiles of the 1B shape landed 12.7% apart on an H100, fixed ones 0.4%. "
                   "Compare the first call (tuning costs compile time) and decode throughput; a new process draws "
                   "tuned again.",
                   _column(**fast), _column(**fast, kernels="tuned"), dict(warmup=1, new_tokens=128)),)
    split = () if zero_gpu_available() else (  # a ZeroGPU visitor gets one device
        Comparison("Split: one device vs tensor parallel",
                   "B shards every layer over 2 processes (transformers' tensor parallel: NCCL between 2 GPUs, gloo "
                   "between CPU processes); each holds half the weights, and they exchange activations in every "
                   "layer. At batch 1 the exchanges can cost more than the halved reads save: the record gives the "
                   "time in collectives per step and each rank's memory. Needs 2 GPUs on a GPU host.",
                   _column(), _column(parallel="tp", devices=2), dict(new_tokens=64),
                   cannot_show="" if cuda else (
                       "over 2 CPU processes each layer's exchange and the sharded tensors' overhead cost far more "
                       "than the halved weight reads save. A split pays on 2 GPUs with a model that one cannot hold "
                       "or read fast enough.")),)
    return {c.name: c for c in (*items, *captured, *kernel_choice, *split, *speculation.comparisons())}
