#!/usr/bin/env python3
"""Train the tiny Llama that ships as the app's offline default model.

Input is the folder written by ``scripts/build_corpus.py`` (``train.jsonl``,
``heldout.jsonl``, ``tokenizer/``).  Output is a ``from_pretrained``-ready
checkpoint folder plus ``report.json`` and ``train_log.txt``.

Choices and why:

* ``LlamaForCausalLM`` from transformers, so the app exercises the same
  attention implementations and KV cache as real models.  ``head_dim`` is 64
  because the flash-attn build on the GPU machine only ships head dims 64
  and 128; the layer count stays small because on a 2-core CPU the per-token
  Python overhead grows with depth.
* The corpus is tiny (under a million tokens) so the run repeats it for many
  epochs.  To avoid shipping an overfitted model, a few percent of the
  *training files* are set aside as a validation split; the weights with the
  lowest validation loss are kept.  The separate held-out split (other
  files again) is only used for the reported loss and perplexity.
* Every document is ``<bos> text <eos>``, matching what the tokenizer adds on
  encode, and documents are packed into one stream; training windows are
  drawn at random offsets so each epoch sees different boundaries.
* Weights are saved in bf16 to keep the folder small; ``config.json`` says
  ``float32`` so a plain ``from_pretrained`` computes in fp32 on CPU.
* A speculative-decoding draft is worth what it agrees with its target, not
  its own perplexity: with ``--teacher`` the loss is the KL divergence to
  the teacher's next-token distribution (``--distill-weight`` of it, the
  rest cross-entropy on the corpus), and the weights kept are those whose
  greedy choices agree most often with the teacher's on the validation split.

It also runs on CPU (``--device cpu --steps 5``) as a smoke test.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

DEFAULT_PROMPTS = [
    "The function returns",
    "This module provides",
    "If the file does not exist",
    "The following example shows",
]


class Log:
    """Print to stdout and append the same lines to ``train_log.txt``."""

    def __init__(self, path: Path):
        self.fh = open(path, "a", encoding="utf-8")

    def __call__(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.fh.write(line + "\n")
        self.fh.flush()


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def in_val_split(source: str, percent: float) -> bool:
    """Validation files: a salted hash so they differ from the held-out rule."""
    digest = hashlib.sha256(b"val:" + source.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 10000 < percent * 100


def encode_stream(tokenizer, docs: list[dict]) -> torch.Tensor:
    """Concatenate ``<bos> text <eos>`` for every document into one 1-D tensor."""
    ids: list[int] = []
    encoded = tokenizer([d["text"] for d in docs], add_special_tokens=True)["input_ids"]
    for doc_ids in encoded:
        ids.extend(doc_ids)
        ids.append(tokenizer.eos_token_id)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def stream_loss(model, stream: torch.Tensor, seq_len: int, device, batch_size: int = 32) -> float:
    """Token-weighted mean next-token loss over non-overlapping windows.

    The shipped-model test computes the same quantity on CPU, so the two
    numbers can be compared directly.
    """
    model.eval()
    full = (len(stream) - 1) // seq_len
    batches = list(stream[: full * seq_len + 1].unfold(0, seq_len + 1, seq_len).split(batch_size))
    if len(stream) - 1 > full * seq_len:  # the short tail window
        batches.append(stream[full * seq_len :].unsqueeze(0))
    total, count = 0.0, 0
    for batch in batches:
        batch = batch.to(device)
        with autocast(device):
            logits = model(batch[:, :-1]).logits
        total += F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten(), reduction="sum").item()
        count += batch[:, 1:].numel()
    model.train()
    return total / count


@torch.no_grad()
def stream_agreement(model, teacher, stream: torch.Tensor, seq_len: int, device, batch_size: int = 32) -> float:
    """Share of positions where `model`'s greedy next token is `teacher`'s, over non-overlapping windows: the
    acceptance a draft gets under greedy speculative decoding, position by position."""
    model.eval()
    full = (len(stream) - 1) // seq_len
    agree, count = 0, 0
    for batch in stream[: full * seq_len].view(full, seq_len).split(batch_size):
        batch = batch.to(device)
        with autocast(device):
            mine, theirs = model(batch).logits.argmax(-1), teacher(batch).logits.argmax(-1)
        agree += int((mine == theirs).sum())
        count += mine.numel()
    model.train()
    return agree / count


def distill_loss(logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(teacher || student) on distributions softened by `temperature`, scaled by its square (Hinton et al.)."""
    t = temperature
    return F.kl_div(F.log_softmax(logits.float() / t, -1).flatten(0, 1),
                    F.log_softmax(teacher_logits.float() / t, -1).flatten(0, 1),
                    log_target=True, reduction="batchmean") * t * t


def autocast(device):
    """bf16 autocast on GPU; plain fp32 on CPU where bf16 matmuls are slow."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def lr_at(step: int, total: int, warmup: int, peak: float, floor_frac: float) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor_frac + (1 - floor_frac) * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def greedy_samples(model, tokenizer, prompts, device, new_tokens: int) -> dict[str, str]:
    model.eval()
    out = {}
    for prompt in prompts:
        enc = tokenizer(prompt, return_tensors="pt").to(device)
        ids = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False)
        out[prompt] = tokenizer.decode(ids[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    model.train()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path(".train/corpus"))
    ap.add_argument("--out", type=Path, required=True, help="checkpoint folder to write")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer folder (default: the corpus's); a speculative-decoding "
                    "draft takes its target's, so the two share every id")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--hidden-size", type=int, default=384)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--intermediate-size", type=int, default=1024)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--max-position-embeddings", type=int, default=2048)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    ap.add_argument("--epochs", type=float, default=20.0, help="sets --steps when that is 0")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--val-percent", type=float, default=4.0, help="%% of train files used for model selection")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--max-minutes", type=float, default=0.0, help="stop early after this long (0: no limit)")
    ap.add_argument("--extra-eval", type=Path, action="append", default=[], help="more jsonl files to report loss on")
    ap.add_argument("--sample-tokens", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--teacher", type=Path, help="a checkpoint sharing the tokenizer to distill from (a speculative "
                    "draft for that target): the loss follows its distribution, selection its greedy choices")
    ap.add_argument("--distill-weight", type=float, default=1.0, help="share of the loss that is the KL divergence "
                    "to --teacher (the rest: cross-entropy on the corpus)")
    ap.add_argument("--distill-temperature", type=float, default=1.0)
    args = ap.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    log = Log(args.out / "train_log.txt")
    log("command:", " ".join([Path(sys.argv[0]).as_posix()] + (argv if argv is not None else sys.argv[1:])))
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    log("device:", device_name, "torch", torch.__version__)

    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.tokenizer or args.corpus / "tokenizer")
    train_docs = read_jsonl(args.corpus / "train.jsonl")
    val_docs = [d for d in train_docs if in_val_split(d["source"], args.val_percent)]
    fit_docs = [d for d in train_docs if not in_val_split(d["source"], args.val_percent)]
    heldout_docs = read_jsonl(args.corpus / "heldout.jsonl")
    train_stream = encode_stream(tokenizer, fit_docs).to(device)
    val_stream = encode_stream(tokenizer, val_docs)
    heldout_stream = encode_stream(tokenizer, heldout_docs)
    log(
        f"tokens: fit {len(train_stream)} ({len(fit_docs)} docs), val {len(val_stream)} ({len(val_docs)} docs), "
        f"heldout {len(heldout_stream)} ({len(heldout_docs)} docs)"
    )

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden_size // args.head_dim,
        num_key_value_heads=args.hidden_size // args.head_dim,
        head_dim=args.head_dim,
        max_position_embeddings=args.max_position_embeddings,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: LlamaForCausalLM {n_params / 1e6:.2f}M params, config {config.to_diff_dict()}")
    teacher = None
    if args.teacher:
        teacher = LlamaForCausalLM.from_pretrained(args.teacher, dtype=torch.float32).to(device).eval()
        if teacher.config.vocab_size != config.vocab_size:
            raise SystemExit(f"--teacher {args.teacher} has {teacher.config.vocab_size} tokens, the tokenizer "
                             f"{config.vocab_size}: a draft and its target must share every id")
        log(f"teacher: {args.teacher} ({sum(p.numel() for p in teacher.parameters()) / 1e6:.2f}M params), "
            f"distill weight {args.distill_weight}, temperature {args.distill_temperature}")

    tokens_per_step = args.batch_size * args.seq_len
    steps = args.steps or max(1, round(args.epochs * len(train_stream) / tokens_per_step))
    log(f"steps {steps}, tokens/step {tokens_per_step}, epochs {steps * tokens_per_step / len(train_stream):.1f}")

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
        fused=device.type == "cuda",
    )

    offsets_hi = len(train_stream) - args.seq_len - 1
    best = {"score": -float("inf"), "step": -1, "state": None}
    history = []
    start = time.perf_counter()
    step = 0
    model.train()
    for step in range(1, steps + 1):
        lr = lr_at(step - 1, steps, args.warmup, args.lr, args.min_lr_frac)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, offsets_hi, (args.batch_size,), device=device)
        idx = starts[:, None] + torch.arange(args.seq_len + 1, device=device)
        batch = train_stream[idx]
        with autocast(device):
            logits = model(batch[:, :-1]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        if teacher is not None:
            with torch.no_grad(), autocast(device):
                teacher_logits = teacher(batch[:, :-1]).logits
            w = args.distill_weight
            loss = w * distill_loss(logits, teacher_logits, args.distill_temperature) + (1 - w) * loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        out_of_time = args.max_minutes and time.perf_counter() - start > args.max_minutes * 60
        if step % args.eval_every == 0 or step == steps or out_of_time:
            train_loss = loss.item()
            val_loss = stream_loss(model, val_stream, args.seq_len, device)
            entry = {"step": step, "train_loss": train_loss, "val_loss": val_loss}
            if teacher is not None:
                entry["val_agreement"] = stream_agreement(model, teacher, val_stream, args.seq_len, device)
            elapsed = time.perf_counter() - start
            history.append({**entry, "lr": lr, "s": elapsed})
            score = entry.get("val_agreement", -val_loss)  # what the weights are kept for
            mark = ""
            if score > best["score"]:
                best = {"score": score, **entry, "state": copy.deepcopy(model.state_dict())}
                mark = " *best"
            agreement = f" agree {entry['val_agreement']:.3f}" if teacher is not None else ""
            log(
                f"step {step}/{steps} train {train_loss:.4f} val {val_loss:.4f}{agreement} lr {lr:.2e} "
                f"{elapsed:.0f}s {step * tokens_per_step / elapsed:.0f} tok/s{mark}"
            )
        if out_of_time:
            log(f"stopping at step {step}: --max-minutes {args.max_minutes} reached")
            break
    wall = time.perf_counter() - start

    model.load_state_dict(best["state"])
    results = {
        "val_loss": best["val_loss"],
        "heldout_loss": stream_loss(model, heldout_stream, args.seq_len, device),
    }
    if teacher is not None:
        results["teacher"] = args.teacher.as_posix()
        results["val_agreement"] = best["val_agreement"]
        results["heldout_agreement"] = stream_agreement(model, teacher, heldout_stream, args.seq_len, device)
    results["heldout_ppl"] = math.exp(results["heldout_loss"])
    for path in args.extra_eval:
        loss = stream_loss(model, encode_stream(tokenizer, read_jsonl(path)), args.seq_len, device)
        results[f"loss[{path.as_posix()}]"] = loss
        results[f"ppl[{path.as_posix()}]"] = math.exp(loss)
    log(f"selected step {best['step']}: " + json.dumps(results))
    samples = greedy_samples(model, tokenizer, DEFAULT_PROMPTS, device, args.sample_tokens)
    for prompt, text in samples.items():
        log(f"sample: {prompt!r} -> {text!r}")

    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    model.to("cpu", torch.bfloat16).save_pretrained(args.out)
    config_path = args.out / "config.json"
    saved = json.loads(config_path.read_text())
    saved["dtype"] = "float32"  # bf16 on disk for size; compute in fp32 by default
    config_path.write_text(json.dumps(saved, indent=2) + "\n")
    tokenizer.save_pretrained(args.out)

    report = {
        "command": " ".join(["python3", Path(sys.argv[0]).as_posix()] + (argv if argv is not None else sys.argv[1:])),
        "device": device_name,
        "torch": torch.__version__,
        "params": n_params,
        "steps_planned": steps,
        "steps_run": step,
        "selected_step": best["step"],
        "tokens_per_step": tokens_per_step,
        "tokens_seen": step * tokens_per_step,
        "fit_tokens": len(train_stream),
        "epochs_seen": step * tokens_per_step / len(train_stream),
        "final_train_loss": history[-1]["train_loss"] if history else None,
        "wall_time_s": wall,
        **results,
        "history": history,
        "samples": samples,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
