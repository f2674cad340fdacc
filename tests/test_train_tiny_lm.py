"""scripts/train_tiny_lm.py distills a draft from its target: the loss, the agreement it selects by, the report."""

import json
import shutil
from pathlib import Path

import torch
from transformers import LlamaForCausalLM

from scripts.train_tiny_lm import distill_loss, main, stream_agreement

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "assets" / "models" / "stdlib-llama-tiny"
HELDOUT = ROOT / "tests" / "models" / "data" / "heldout_sample.jsonl"


def test_a_model_agrees_with_itself_and_its_distillation_loss_is_zero():
    model = LlamaForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
    stream = torch.randint(0, model.config.vocab_size, (129,), generator=torch.Generator().manual_seed(0))
    assert stream_agreement(model, model, stream, 32, torch.device("cpu")) == 1.0
    logits = torch.randn(2, 5, 11)
    assert distill_loss(logits, logits, 2.0).abs() < 1e-6
    assert distill_loss(logits, torch.randn(2, 5, 11), 2.0) > 0.01


def test_a_draft_trained_with_a_teacher_reports_how_often_it_agrees(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(HELDOUT, corpus / "train.jsonl")
    shutil.copy(HELDOUT, corpus / "heldout.jsonl")
    out = tmp_path / "draft"
    main(["--corpus", str(corpus), "--tokenizer", str(TARGET), "--out", str(out), "--hidden-size", "64",
          "--layers", "1", "--intermediate-size", "128", "--seq-len", "32", "--batch-size", "2", "--steps", "2",
          "--eval-every", "1", "--val-percent", "50", "--sample-tokens", "2", "--device", "cpu",
          "--teacher", str(TARGET)])
    report = json.loads((out / "report.json").read_text())
    assert report["teacher"] == TARGET.as_posix()
    assert 0 <= report["heldout_agreement"] <= 1 and 0 <= report["val_agreement"] <= 1
    kept = max(report["history"], key=lambda h: h["val_agreement"])
    assert report["selected_step"] == kept["step"] and report["val_agreement"] == kept["val_agreement"]
