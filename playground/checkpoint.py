"""A random-weight preset written as a checkpoint directory, for the loaders that only read files.

Tensor parallel loads through `from_pretrained(tp_plan=...)`, each rank reading only its shard, and a
model larger than one device cannot be built in memory first. So a random-weight preset is written
once as safetensors shards (config, tokenizer, weights), one tensor at a time: a 70B shape needs its
140 GB of disk in bf16, never that much memory. Weights are drawn as `from_config` draws them
(normal with the config's `initializer_range`, norms one, biases zero), seeded per tensor name, so the
same preset writes the same files.

Kept under PLAYGROUND_CHECKPOINTS (default ~/.cache/llm-speed-playground/checkpoints), one directory per
preset and dtype; a directory is complete once its index file is there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch

from playground.presets import PRESETS, noise_tokenizer, preset_config

CHECKPOINTS_ENV = "PLAYGROUND_CHECKPOINTS"
INDEX = "model.safetensors.index.json"
SHARD_BYTES = 2 * 2**30


def checkpoints_dir() -> Path:
    return Path(os.environ.get(CHECKPOINTS_ENV) or Path.home() / ".cache" / "llm-speed-playground" / "checkpoints")


def random_checkpoint(name: str, dtype: torch.dtype) -> Path:
    """The directory holding preset `name`'s random weights in `dtype`, written first if it is not there."""
    path = checkpoints_dir() / f"{name}-{str(dtype).removeprefix('torch.')}"
    if not (path / INDEX).is_file():
        _write(name, dtype, path)
    return path


def _tensor(name: str, shape: torch.Size, dtype: torch.dtype, std: float) -> torch.Tensor:
    if len(shape) == 1:
        return (torch.zeros if name.endswith("bias") else torch.ones)(shape, dtype=dtype)
    generator = torch.Generator().manual_seed(int(hashlib.sha256(name.encode()).hexdigest()[:15], 16))
    return torch.randn(shape, generator=generator, dtype=torch.float32).mul_(std).to(dtype)


def _write(name: str, dtype: torch.dtype, path: Path) -> None:
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    config = preset_config(PRESETS[name])
    with torch.device("meta"):
        shapes = {key: t.shape for key, t in AutoModelForCausalLM.from_config(config, dtype=dtype).state_dict().items()}
    if config.tie_word_embeddings:
        shapes.pop("lm_head.weight", None)  # one tensor, read under both names
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    config.save_pretrained(partial)
    noise_tokenizer(config.vocab_size).save_pretrained(partial)
    weight_map, shard, shard_bytes = {}, {}, 0

    def flush() -> None:
        nonlocal shard, shard_bytes
        if shard:
            file = f"model-{len(set(weight_map.values())) + 1:05d}.safetensors"
            save_file(shard, partial / file, metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(shard, file))
            shard, shard_bytes = {}, 0

    for key, shape in shapes.items():
        shard[key] = _tensor(key, shape, dtype, config.initializer_range)
        shard_bytes += shard[key].numel() * shard[key].element_size()
        if shard_bytes >= SHARD_BYTES:
            flush()
    flush()
    (partial / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    shutil.rmtree(path, ignore_errors=True)
    partial.rename(path)
