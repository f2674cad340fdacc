#!/usr/bin/env python3
"""Build the English-prose corpus and BPE tokenizer for the shipped tiny LM.

Why this corpus: the project must ship a model whose training data it may
redistribute and which exists offline on every machine here.  The CPython
standard library qualifies: it is installed wherever Python is, and its text
is under the PSF License 2.0.  Its docstrings, comment blocks and the pydoc
topic help (``pydoc_data/topics.py``, the language reference as plain text)
are mostly English prose about programming.

Cleaning keeps prose and drops code: doctest sessions (``>>>``/``...`` lines
and their output), indented literal blocks, lines that are mostly symbols,
and short snippets.  Wrapped lines of a paragraph are joined, so the model
learns running sentences rather than 72-column line breaks.

The held-out split is chosen per source file (a stable hash of its path), so
held-out text never shares a file with training text.

Outputs in ``--out``: ``train.jsonl`` and ``heldout.jsonl`` (one document per
line: ``{"source": ..., "kind": ..., "text": ...}``), ``tokenizer/`` (a
``PreTrainedTokenizerFast`` trained on the train split only) and
``corpus_stats.json``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import re
import sys
import sysconfig
import tokenize
from pathlib import Path

LICENCE = "PSF-2.0 (Python Software Foundation License Version 2)"
BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"

# Files/folders under the stdlib that are not the standard library's own text
# (third-party packages, build config) or not prose at all.
SKIP_PARTS = {"site-packages", "dist-packages", "__pycache__", "ensurepip"}

WORD_RE = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def is_prose_line(line: str) -> bool:
    """True when a line reads like a sentence rather than code or a table."""
    s = line.strip()
    if not s:
        return False
    words = WORD_RE.findall(s)
    if len(words) < 3:
        return False
    letters = sum(len(w) for w in words) + len(words)  # words plus spaces
    if letters / len(s) < 0.75:
        return False
    # Assignments, calls and attribute chains are code even when wordy.
    if re.search(r"(\w\(|\w\.\w+\(|==|!=|->|\{|\}|\w_\w+\(|^\s*[@$%#])", s):
        return False
    return True


def clean_block(raw: str, min_words: int) -> str:
    """Turn a docstring or comment block into paragraphs of prose, or ''.

    Doctest sessions and reST literal blocks (lines indented past the
    paragraph's margin) are dropped whole; the remaining lines are re-flowed
    into one line per paragraph.
    """
    paragraphs: list[list[str]] = [[]]
    in_doctest = False
    literal_indent = None  # set after a '::' line: its indented block is code
    for line in raw.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith((">>>", "...")):
            in_doctest = True
            continue
        if in_doctest:
            if stripped:  # doctest output continues until a blank line
                continue
            in_doctest = False
        if not stripped:
            if paragraphs[-1]:
                paragraphs.append([])
            continue
        if literal_indent is not None:
            if indent > literal_indent:
                continue
            literal_indent = None
        if stripped.endswith("::"):
            literal_indent = indent
        if not is_prose_line(stripped):
            if paragraphs[-1]:
                paragraphs.append([])
            continue
        paragraphs[-1].append(stripped)
    text_paras = []
    for para in paragraphs:
        joined = " ".join(para).strip()
        joined = re.sub(r"\s+", " ", joined)
        # reST markup noise: ``literal``, :role:`x`, trailing '::'.
        joined = re.sub(r":[a-z]+:`([^`]*)`", r"\1", joined)
        joined = joined.replace("``", "").replace("::", ":")
        if len(WORD_RE.findall(joined)) >= 4:
            text_paras.append(joined)
    text = "\n".join(text_paras)
    return text if len(WORD_RE.findall(text)) >= min_words else ""


def docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def comment_blocks(source: str):
    """Yield runs of consecutive full-line ``#`` comments as one block each."""
    block: list[str] = []
    last_row = -2
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        text = tok.string.lstrip("#").strip()
        full_line = tok.line.lstrip().startswith("#")
        if full_line and tok.start[0] == last_row + 1 and block:
            block.append(text)
        else:
            if block:
                yield "\n".join(block)
            block = [text] if full_line else []
        last_row = tok.start[0]
    if block:
        yield "\n".join(block)


def pydoc_topics(path: Path):
    """The language-reference help texts that ``help('TOPIC')`` prints."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for value in node.value.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    yield value.value


def collect(root: Path, min_words: int):
    """Yield (relative source path, kind, cleaned text) for every document."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if SKIP_PARTS & set(path.relative_to(root).parts) or rel.startswith("config-"):
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # e.g. lib2to3 test data written in Python 2
        if rel == "pydoc_data/topics.py":
            for raw in pydoc_topics(path):
                # Topic texts use indentation for grammar/code only; their
                # prose starts at column 0 like a cleaned docstring.
                text = clean_block(raw, min_words)
                if text:
                    yield rel, "pydoc_topic", text
            continue
        for raw in docstrings(tree):
            text = clean_block(raw, min_words)
            if text:
                yield rel, "docstring", text
        for raw in comment_blocks(source):
            text = clean_block(raw, min_words)
            if text:
                yield rel, "comment", text


def is_heldout(rel: str, percent: float) -> bool:
    digest = hashlib.sha256(rel.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 10000 < percent * 100


def train_tokenizer(train_texts: list[str], vocab_size: int, out_dir: Path):
    """Byte-level BPE, wrapped as PreTrainedTokenizerFast with bos/eos/pad."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(train_texts, trainer=trainer)
    # Every training document starts with BOS; adding it on encode means a
    # plain ``tokenizer(prompt)`` gives the model the context it was trained on.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=2048,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(out_dir)
    return fast


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(".train/corpus"))
    ap.add_argument("--stdlib", type=Path, default=stdlib_dir())
    ap.add_argument("--heldout-percent", type=float, default=5.0)
    ap.add_argument("--min-words", type=int, default=10, help="drop shorter docs")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--no-tokenizer", action="store_true", help="skip BPE training")
    ap.add_argument(
        "--heldout-sample",
        type=Path,
        help="also write the first held-out documents (up to --heldout-sample-bytes) here, for the model test",
    )
    ap.add_argument("--heldout-sample-bytes", type=int, default=60_000)
    args = ap.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[dict]] = {"train": [], "heldout": []}
    seen: set[str] = set()
    for rel, kind, text in collect(args.stdlib, args.min_words):
        if text in seen:  # licence headers and copied docstrings repeat
            continue
        seen.add(text)
        split = "heldout" if is_heldout(rel, args.heldout_percent) else "train"
        splits[split].append({"source": rel, "kind": kind, "text": text})

    for name, docs in splits.items():
        with open(args.out / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for doc in docs:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")

    if args.heldout_sample:
        args.heldout_sample.parent.mkdir(parents=True, exist_ok=True)
        used = 0
        with open(args.heldout_sample, "w", encoding="utf-8") as fh:
            for doc in splits["heldout"]:
                line = json.dumps(doc, ensure_ascii=False) + "\n"
                if used + len(line.encode()) > args.heldout_sample_bytes:
                    break
                fh.write(line)
                used += len(line.encode())

    stats: dict = {
        "source": f"CPython {sys.version.split()[0]} standard library at {args.stdlib}: "
        "docstrings (ast), full-line comment blocks, pydoc_data/topics.py",
        "licence": LICENCE,
        "heldout_rule": f"sha256(source path) -> {args.heldout_percent}% of files",
        "splits": {},
    }
    tokenizer = None
    if not args.no_tokenizer:
        tokenizer = train_tokenizer([d["text"] for d in splits["train"]], args.vocab_size, args.out / "tokenizer")
        stats["vocab_size"] = len(tokenizer)
    for name, docs in splits.items():
        entry = {
            "documents": len(docs),
            "files": len({d["source"] for d in docs}),
            "bytes": sum(len(d["text"].encode("utf-8")) for d in docs),
            "words": sum(len(WORD_RE.findall(d["text"])) for d in docs),
            "by_kind_bytes": {},
        }
        for d in docs:
            entry["by_kind_bytes"][d["kind"]] = entry["by_kind_bytes"].get(d["kind"], 0) + len(d["text"].encode())
        if tokenizer is not None:
            entry["tokens"] = sum(len(ids) for ids in tokenizer([d["text"] for d in docs])["input_ids"])
        stats["splits"][name] = entry
    (args.out / "corpus_stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
