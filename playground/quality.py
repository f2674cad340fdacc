"""Quality beside speed: what a faster setting (a quantization) costs in the model's predictions.

Speed alone would reward a broken quantization, so a comparison carries three checks: held-out perplexity
(for a trained model), the largest logit error against the unquantized model on the same prompt (random
weights have no meaningful perplexity) and the first greedy token that differs (`metrics.first_difference`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

SEQ_LEN = 512  # the window the shipped model's training report computed its loss with


def heldout_texts(path: Path) -> list[str]:
    """The `text` of each line of a JSONL sample."""
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def perplexity(model, tokenizer, texts: list[str], seq_len: int = SEQ_LEN) -> float:
    """Perplexity over the texts packed as <bos> doc <eos> into `seq_len`-token windows (the training measure)."""
    ids: list[int] = []
    for doc_ids in tokenizer(texts)["input_ids"]:
        ids += doc_ids + [tokenizer.eos_token_id]
    stream = torch.tensor(ids, device=model.device)
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(stream) - 1, seq_len):
            window = stream[start:start + seq_len + 1].unsqueeze(0)
            logits = model(window[:, :-1]).logits.float()
            total += torch.nn.functional.cross_entropy(logits[0], window[0, 1:], reduction="sum").item()
            count += window.shape[1] - 1
    return math.exp(total / count)


@dataclass(frozen=True)
class LogitError:
    max_abs: float  # largest |logit - reference logit| over the prompt's positions and the vocabulary
    relative: float  # max_abs over the reference's largest |logit|


def logits(model, input_ids: torch.Tensor) -> torch.Tensor:
    """fp32 logits of every position of `input_ids` (1, n), on the CPU."""
    with torch.inference_mode():
        return model(input_ids.to(model.device)).logits.float().cpu()


def logit_error(got: torch.Tensor, reference: torch.Tensor) -> LogitError:
    worst = (got - reference).abs().max().item()
    return LogitError(worst, worst / reference.abs().max().item())
