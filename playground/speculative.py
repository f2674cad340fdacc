"""Every speculative-decoding method a run can ask for, as data: the one place that knows their names.

At batch 1 decode reads every weight once per token, so the target model's step costs about the same
whether it checks one token or a few. Speculation proposes several tokens cheaply (a small draft
model, or n-grams copied from the prompt) and lets one target step verify them all: each accepted
draft is a token that cost no target step of its own. Greedy output is unchanged token for token;
with sampling, transformers' acceptance rule keeps the target's distribution.

An entry says what a method needs (a draft model), which backends take it, and its UI wording. The
config's choices and refusals, the backends and the UI read it. No torch at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playground import backends
from playground.presets import ASSETS

MAX_DRAFT_TOKENS = 32  # beyond this a step verifies more tokens than any draft gets right in a row


@dataclass(frozen=True)
class Method:
    name: str  # what a run asks for
    label: str  # UI wording
    draft_model: bool = False  # proposes with a draft model (the `draft_model` setting)
    backends: tuple[str, ...] = ("transformers",)  # the generation backends (playground.backends) that take it
    compiled_backends: tuple[str, ...] = ()  # those whose speculative step compiles (a fixed number of drafts)

    @property
    def speculates(self) -> bool:
        return self.name != "none"


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("none", "none (one target step per token)", backends=backends.NAMES),
    Method("draft", "draft model (a small model proposes)", draft_model=True,
           backends=("transformers", "fast"), compiled_backends=("fast",)),
    Method("prompt_lookup", "prompt lookup (n-grams from the prompt)", backends=("transformers", "fast"),
           compiled_backends=("fast",)),
)}
NAMES = tuple(REGISTRY)

# Draft models shipped with the project, by name; `draft_model` also takes any model name the loader takes.
DRAFT_MODELS = {"stdlib-llama-draft": ASSETS / "models" / "stdlib-llama-draft"}
DEFAULT_DRAFT_MODEL = "stdlib-llama-draft"  # drafts for the default target, stdlib-llama-tiny


# An input-grounded prompt (edit a module header just read): the case prompt lookup is for, and where a draft
# model gets the most right. The shipped target's greedy output copies the header's GROUNDED_TOKENS tokens from
# the prompt; past them it writes on its own, which no lookup drafts. The UI offers it as a ready prompt and its
# speculation comparisons run on it; benchmarks.speculative measures on it.
GROUNDED_HEADER = ("Python Character Mapping Codec cp1250 generated from 'MAPPINGS/VENDORS/MICSFT/WINDOWS/CP1250.TXT' "
                   "with gencodec.py.\nWritten by Marc-Andre Lemburg (mal@lemburg.com).\n(c) Copyright CNRI, All "
                   "Rights Reserved. NO WARRANTY. (c) Copyright 2000 Guido van Rossum.")
GROUNDED_PROMPT = (f"Copy this module header for the cp1251 codec.\n\n{GROUNDED_HEADER}\n\n"
                   "Python Character Mapping Codec cp1251 generated from")
GROUNDED_TOKENS = 40


def draft_path(name: str) -> str:
    """Where the loader finds draft model `name`: a shipped draft's folder, else the name as given."""
    path: Path | None = DRAFT_MODELS.get(name)
    return str(path) if path is not None else name


def vocabulary_mismatch(target_tokenizer, draft_tokenizer, target_vocab_size: int, draft_vocab_size: int) -> str | None:
    """Why a draft cannot propose ids for this target, or None: both must map every token to the same id."""
    if draft_vocab_size != target_vocab_size:
        return f"its vocabulary has {draft_vocab_size:,} ids, the target's {target_vocab_size:,}"
    if draft_tokenizer.get_vocab() != target_tokenizer.get_vocab():
        return "its tokenizer maps tokens to other ids than the target's"
    return None
