"""Load a model once and keep it while its load-time settings stay the same.

A preset is built straight on the target device from its config (an 8B model never touches the
CPU first); a local directory or a Hugging Face id goes through `from_pretrained`. One model is
held at a time: switching frees the old one before the new one loads, so GPU memory does not
hold two models.

A hub id is fetched only when the hub answers within `HUB_PROBE_S`: otherwise the load reads the local
cache alone and fails at once if the model is not there, instead of holding the device queue
through the hub client's retries.
"""

from __future__ import annotations

import functools
import gc
import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from huggingface_hub.errors import StrictDataclassError

from playground import parallel, quantization
from playground.checkpoint import random_checkpoint
from playground.metrics import MatmulShape
from playground.presets import PRESETS, noise_tokenizer, preset_config
from playground.speculative import draft_path

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
HUB_PROBE_S = 3.0  # how long the hub has to answer before a load falls back to the local cache
# What a bad checkpoint raises while loading; transformers 5 validates configs as strict dataclasses.
LOAD_ERRORS = (OSError, ValueError, KeyError, TypeError, ImportError, StrictDataclassError)
MESSAGE_CHARS = 600  # a validator's whole message fits; a dumped tensor or config does not


class LoadError(RuntimeError):
    """The model could not be loaded; the message says why in the user's terms."""


@dataclass
class LoadedModel:
    key: tuple
    model: Any
    tokenizer: Any
    source: str  # preset | local | hub
    random_weights: bool
    load_s: float
    device: str
    dtype: str
    attn_effective: str
    quant: str = "none"  # the quantization applied after loading (playground.quantization)
    draft: LoadedModel | None = None  # the draft model speculative decoding runs with (ModelCache.attach_draft)

    @property
    def max_context(self) -> int | None:
        return max_context(self.model.config)

    @property
    def param_bytes(self) -> int:
        return sum(quantization.tensor_bytes(p) for p in self.model.parameters())

    @property
    def num_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def max_context(model_config) -> int | None:
    """The longest prompt + generation the model's positions allow; None where the config does not say."""
    return getattr(model_config, "max_position_embeddings", None)


MOE_CONFIG_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


def _sliding_window(config) -> tuple[bool, int | None]:
    """(countable, window): the window if every layer slides, None if none does; not countable if only some do."""
    window = getattr(config, "sliding_window", None)
    if window is None or getattr(config, "use_sliding_window", None) is False:
        return True, None
    kinds = set(getattr(config, "layer_types", None) or ["sliding_attention"])
    if kinds == {"full_attention"}:
        return True, None
    return kinds == {"sliding_attention"}, window


def matmul_shape(model) -> MatmulShape | None:
    """The dense-matmul shape of a decoder-only `model`, or None where a count would mislead.

    Counted from the model's own linear layers, so it holds for any dense architecture transformers
    loads; None for mixture of experts (not every weight runs per token), nested multimodal configs
    (vision layers would count) and models where only some layers use a sliding window.
    """
    config = model.config
    heads = getattr(config, "num_attention_heads", None)
    layers = getattr(config, "num_hidden_layers", None)
    countable, window = _sliding_window(config)
    if (not heads or not layers or not countable or getattr(config, "text_config", None) is not None
            or any(getattr(config, key, None) for key in MOE_CONFIG_KEYS)):
        return None
    head = model.get_output_embeddings()
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    head_weights = head.weight.numel() if isinstance(head, torch.nn.Linear) else 0
    body = sum(m.weight.numel() for m in linear if m is not head)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return MatmulShape(body, head_weights, layers, heads, head_dim, window)


def model_source(name: str) -> str:
    if name in PRESETS:
        return "preset"
    if Path(name).expanduser().exists() or name.startswith((".", "/", "~")):
        return "local"
    if HUB_ID.match(name):
        return "hub"
    raise LoadError(f"model {name!r} is not a preset, an existing local directory or a Hugging Face id (owner/name)")


def _build_preset(name: str, device: str, dtype: str, attn: str):
    from transformers import AutoModelForCausalLM

    config = preset_config(PRESETS[name])
    torch.manual_seed(0)  # the same weights on every load of this preset and device
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=TORCH_DTYPES[dtype], attn_implementation=attn)
    return model, noise_tokenizer(config.vocab_size)


def _whole(text: str) -> str:
    """The message on one line: validators put the cause on the lines after a generic first one."""
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "…"


def explain_load_error(name: str, source: str, exc: Exception) -> str:
    text = str(exc)
    if isinstance(exc, json.JSONDecodeError) or "valid JSON" in text or "JSONDecodeError" in text:
        return f"{name}: config.json is not valid JSON ({_whole(text)})"
    if "Unrecognized configuration class" in text or "Unrecognized model" in text:
        return f"{name} is not a causal language model that transformers can load with AutoModelForCausalLM ({_whole(text)})"
    if source == "hub" and any(s in text.lower() for s in ("offline", "connect", "resolve", "network", "cannot find the requested files")):
        return (f"could not download {name!r} from the Hugging Face Hub: there is no network connection here "
                "(or HF_HUB_OFFLINE is set). Use a built-in preset or a local directory.")
    if source == "hub" and ("404" in text or "not found" in text.lower() or "is not a local folder" in text):
        return f"{name!r} was not found on the Hugging Face Hub (check the id, or log in for a gated model)"
    if "trust_remote_code" in text:
        return f"{name} needs custom code from its repository; turn on trust_remote_code only if you trust it"
    return f"could not load {name}: {type(exc).__name__}: {_whole(text)}"


def hub_reachable(timeout_s: float = HUB_PROBE_S) -> bool:
    """Whether the Hugging Face Hub answers at all within `timeout_s` (any HTTP status counts)."""
    import httpx
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    try:
        httpx.head(constants.ENDPOINT, timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return True


def _fetch_options(source: str) -> dict[str, Any]:
    """`local_files_only` for a hub id when the hub does not answer, so the cache is read without retries."""
    return {"local_files_only": True} if source == "hub" and not hub_reachable() else {}


def _from_pretrained(name: str, source: str, device: str, dtype: str, attn: str, trust_remote_code: bool,
                     split: str = "none"):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = str(Path(name).expanduser()) if source == "local" else name
    if source == "local" and not (Path(path) / "config.json").is_file():
        raise LoadError(f"{name} is not a model directory: it has no config.json")
    fetch = _fetch_options(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **fetch)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=TORCH_DTYPES[dtype], attn_implementation=attn, trust_remote_code=trust_remote_code,
            **parallel.load_options(split, device), **fetch,
        )
    except LOAD_ERRORS as exc:
        raise LoadError(explain_load_error(name, source, exc)) from exc
    return model, tokenizer


def hub_download_bytes(repo_id: str) -> int:
    """Bytes of `repo_id` in the local Hugging Face cache, partial downloads included (progress of a fetch)."""
    from huggingface_hub import constants

    blobs = Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}" / "blobs"
    return sum(f.stat().st_size for f in blobs.glob("*") if f.is_file()) if blobs.is_dir() else 0


def load_config(name: str, trust_remote_code: bool = False):
    """The model's config alone (no weights): enough to size memory before anything loads."""
    from transformers import AutoConfig

    source = model_source(name)
    if source == "preset" and PRESETS[name].random_weights:
        return preset_config(PRESETS[name])
    path = str(PRESETS[name].path) if source == "preset" else str(Path(name).expanduser()) if source == "local" else name
    if source == "local" and not (Path(path) / "config.json").is_file():
        raise LoadError(f"{name} is not a model directory: it has no config.json")
    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, **_fetch_options(source))
    except LOAD_ERRORS as exc:
        raise LoadError(explain_load_error(name, source, exc)) from exc


@functools.lru_cache(maxsize=8)
def load_tokenizer(name: str, trust_remote_code: bool = False):
    """The tokenizer the engine will use for `name`, without its weights (to count a prompt's tokens)."""
    from transformers import AutoTokenizer

    source = model_source(name)
    if source == "preset" and PRESETS[name].random_weights:
        return noise_tokenizer(preset_config(PRESETS[name]).vocab_size)
    path = str(PRESETS[name].path) if source == "preset" else str(Path(name).expanduser()) if source == "local" else name
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, **_fetch_options(source))
    except LOAD_ERRORS as exc:
        raise LoadError(explain_load_error(name, source, exc)) from exc


def _quantize(model, quant: str, name: str = "the model") -> None:
    """Quantize the weights in place; a model the fast backend can run has its q/k/v and gate/up fused
    first and quantized as one matrix each, so both backends read the same quantized values.

    Then every quantized weight multiplies one row once (`quantization.first_matmuls`), the fused matrices
    and their parts alike, so what torchao (or gemlite) raises about this model's layers, while quantizing or
    on a first matmul, is a LoadError naming the setting and the package, not a bare error mid-run."""
    if quant == "none":
        return
    from playground.fast import fuse, unsupported_reason

    fused = unsupported_reason(model) is None
    try:
        if fused:
            fuse.quantize_fused(model, lambda module: quantization.quantize(module, quant))
        quantization.quantize(model, quant)
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as exc:
        raise LoadError(quantization.failure(quant, f"quantizing {name}'s weights", exc)) from exc
    extra = [(f"model.layers.{i}.fused {words}", getattr(layer, kind))  # named "fused q/k/v of layer 0"
             for i, layer in enumerate(fuse.fused_layers(model) if fused else [])
             for kind, words in (("qkv", "q/k/v"), ("gate_up", "gate/up"))]
    try:
        quantization.first_matmuls(model, extra)
    except quantization.QuantizedMatmulError as exc:
        raise LoadError(quantization.failure(quant, str(exc), exc)) from exc


def _load(name: str, source: str, device: str, dtype: str, attn: str, trust_remote_code: bool, split: str = "none"):
    """(model in eval mode, tokenizer): a random preset built on the device, anything else from its files
    (placed on the device, or split as `split` says: playground.parallel, which reads a random preset
    from the checkpoint playground.checkpoint writes)."""
    if source == "preset" and PRESETS[name].random_weights:
        if split == "none":
            model, tokenizer = _build_preset(name, device, dtype, attn)
        else:  # split loaders read files
            model, tokenizer = _from_pretrained(str(random_checkpoint(name, TORCH_DTYPES[dtype])), "local", device,
                                                dtype, attn, trust_remote_code, split)
    else:
        path = str(PRESETS[name].path) if source == "preset" else name
        model, tokenizer = _from_pretrained(path, "local" if source == "preset" else source, device, dtype, attn,
                                            trust_remote_code, split)
    return model.eval(), tokenizer


def cache_key(name: str, device: str, dtype: str, attn: str, trust_remote_code: bool = False,
              quant: str = "none", split: str = "none") -> tuple:
    return (name, device, dtype, attn, trust_remote_code, quant, split)


class ModelCache:
    """Holds the loaded model, or two while an A-vs-B run interleaves them; `get` reuses one or loads anew."""

    def __init__(self) -> None:
        self._held: dict[tuple, LoadedModel] = {}  # oldest first
        self._draft: LoadedModel | None = None
        self._lock = threading.Lock()

    def get(self, name: str, device: str, dtype: str, attn: str, trust_remote_code: bool = False,
            quant: str = "none", split: str = "none", keep: tuple | None = None) -> tuple[LoadedModel, bool]:
        """Return (model, reused); every other held model is dropped first, but the one whose key is `keep`.
        `quant` quantizes the loaded weights in place, presets and checkpoints alike; `split` places a checkpoint
        across devices (playground.parallel)."""
        key = cache_key(name, device, dtype, attn, trust_remote_code, quant, split)
        with self._lock:
            if key in self._held:
                return self._held[key], True
            kept = self._held.get(keep) if keep is not None else None
            self.clear()
            if kept is not None:
                self._held[keep] = kept
            source = model_source(name)
            start = time.perf_counter()
            model, tokenizer = _load(name, source, device, dtype, attn, trust_remote_code, split)
            _quantize(model, quant, name)
            if device == "cuda":
                torch.cuda.synchronize()
            self._held[key] = LoadedModel(
                key=key, model=model, tokenizer=tokenizer, source=source,
                random_weights=source == "preset" and PRESETS[name].random_weights,
                load_s=time.perf_counter() - start, device=device, dtype=dtype,
                attn_effective=str(getattr(model.config, "_attn_implementation", attn)), quant=quant,
            )
            return self._held[key], False

    def attach_draft(self, lm: LoadedModel, name: str | None, trust_remote_code: bool = False) -> bool:
        """Set `lm.draft` to draft model `name` on lm's device, dtype and attention (None: no draft); loaded
        once and kept while the target stays. Returns whether a held draft was reused."""
        if name is None:
            lm.draft = None
            return False
        key = (draft_path(name), lm.device, lm.dtype, lm.attn_effective, trust_remote_code)
        with self._lock:
            reused = self._draft is not None and self._draft.key == key
            if not reused:
                self._draft = None
                source = model_source(key[0])
                start = time.perf_counter()
                model, tokenizer = _load(key[0], source, *key[1:])
                self._draft = LoadedModel(
                    key=key, model=model, tokenizer=tokenizer, source=source,
                    random_weights=source == "preset" and PRESETS[key[0]].random_weights,
                    load_s=time.perf_counter() - start, device=lm.device, dtype=lm.dtype,
                    attn_effective=str(getattr(model.config, "_attn_implementation", lm.attn_effective)))
            lm.draft = self._draft
            return reused

    def holds(self, key: tuple) -> bool:
        return key in self._held

    @property
    def latest(self) -> LoadedModel | None:
        """The model loaded last, if any."""
        return next(reversed(self._held.values()), None)

    def config_for(self, name: str, trust_remote_code: bool = False):
        """The config of `name`: a held model's, else read (for a hub id, fetched) anew."""
        held = next((m for m in self._held.values() if m.key[0] == name), None)
        return held.model.config if held is not None else load_config(name, trust_remote_code)

    @property
    def held_bytes(self) -> int:
        """Bytes of the held models' weights (freed when another model replaces them)."""
        return sum(m.param_bytes for m in (*self._held.values(), self._draft) if m is not None)

    def clear(self) -> None:
        """Drop the models and the draft and give their memory back to the device."""
        self._held, self._draft = {}, None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


MODELS = ModelCache()
