"""Built-in models that need no download.

The default is a small real model trained for this project (assets/models/stdlib-llama-tiny), so a
newcomer with no network sees words stream by. Random-weight presets reproduce the exact shapes of real checkpoints, so their timings are the
timings of that shape, but what they write is noise. Their tokenizer is built here: byte-level
encoding (any text round-trips) plus filler "pseudo-words" so that every id the model can emit
decodes to something, and no id it encodes falls outside the model's vocabulary.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parent.parent / "assets"

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    model_type: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None  # a shipped checkpoint instead of random weights

    @property
    def random_weights(self) -> bool:
        return self.path is None


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "stdlib-llama-tiny",
            "8.7 M-param Llama trained here on Python's own documentation: real (if simple) English, offline",
            path=ASSETS / "models" / "stdlib-llama-tiny",
        ),
        Preset(
            "tiny-random-llama",
            "4-layer Llama, random weights: fast on any CPU, writes noise",
            "llama",
            dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=True),
        ),
        Preset(
            "llama-3.2-1b-shape",
            "Llama-3.2-1B shape (1.24 B params), random weights: GPU timing, writes noise",
            "llama",
            dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                 num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                 rope_parameters={**LLAMA3_ROPE, "factor": 32.0}, tie_word_embeddings=True),
        ),
        Preset(
            "llama-3.1-8b-shape",
            "Llama-3.1-8B shape (8.03 B params), random weights: GPU timing, writes noise",
            "llama",
            dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
                 rope_parameters={**LLAMA3_ROPE, "factor": 8.0}, tie_word_embeddings=False),
        ),
        Preset(
            "llama-3.1-70b-shape",
            "Llama-3.1-70B shape (70.6 B params), random weights: several GPUs (parallel=tp), writes noise",
            "llama",
            dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                 num_attention_heads=64, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
                 rope_parameters={**LLAMA3_ROPE, "factor": 8.0}, tie_word_embeddings=False),
        ),
        Preset(
            "qwen2.5-0.5b-shape",
            "Qwen2.5-0.5B shape (0.49 B params), random weights: GPU timing, writes noise",
            "qwen2",
            dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True),
        ),
        Preset(
            "qwen2.5-7b-shape",
            "Qwen2.5-7B shape (7.6 B params), random weights: GPU timing, writes noise",
            "qwen2",
            dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                 num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False),
        ),
    )
}

DEFAULT_MODEL = "stdlib-llama-tiny"

# Special token ids of the noise tokenizer; the random presets' configs use the same ids.
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = ("<pad>", "<s>", "</s>")


def preset_config(preset: Preset):
    from transformers import AutoConfig

    return AutoConfig.for_model(preset.model_type, pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                                **preset.config)


def _pseudo_words():
    """Endless distinct pronounceable words: 'ka', 'ke', ..., 'kaka', ... ."""
    syllables = [c + v for c in "bdfghklmnprstvz" for v in "aeiou"]
    for length in itertools.count(1):
        for parts in itertools.product(syllables, repeat=length):
            yield "".join(parts)


@functools.cache
def noise_tokenizer(vocab_size: int):
    """A byte-level tokenizer with exactly `vocab_size` ids (specials, 256 bytes, then filler words)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for ch in sorted(byte_chars):
        vocab[ch] = len(vocab)
    words = _pseudo_words()
    while len(vocab) < vocab_size:
        vocab["\u0120" + next(words)] = len(vocab)  # \u0120 is ByteLevel's leading space
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=SPECIALS[PAD_ID], bos_token=SPECIALS[BOS_ID],
                                   eos_token=SPECIALS[EOS_ID])
