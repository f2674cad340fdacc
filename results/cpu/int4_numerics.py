"""What int8 and int4 weights cost in quality by their numbers alone, on the CPU, where their kernels do not run.

Each linear weight (a head tied to the embeddings aside, as the playground leaves it) is quantized the way
torchao's gemlite layout quantizes it (int8: symmetric per row; int4: HQQ, group 128, fp16 scales and zeros)
and put back as the float it dequantizes to. The logit error against the float model on the quantization
benchmark's prompt, the share of positions whose greedy token is kept, and, for a trained model, held-out
perplexity, then say what the format itself costs, kernels apart.

    PYTHONPATH=. python3 results/cpu/int4_numerics.py stdlib-llama-tiny
    PYTHONPATH=. python3 results/cpu/int4_numerics.py llama-3.2-1b-shape      # random weights; HQQ takes ~20 min
"""

import sys
import time

import torch
from torchao.quantization.quant_primitives import (MappingType, _choose_qparams_and_quantize_affine_hqq,
                                                   choose_qparams_affine, dequantize_affine, quantize_affine)

from benchmarks.quantization import HELDOUT, PROMPT
from playground import quality
from playground.loader import ModelCache


def int8_roundtrip(w: torch.Tensor) -> torch.Tensor:
    block = (1, w.shape[1])
    scale, zero = choose_qparams_affine(w, MappingType.SYMMETRIC, block, torch.int8, -128, 127, eps=1e-5)
    q = quantize_affine(w, block, scale, zero, torch.int8, -128, 127)
    return dequantize_affine(q, block, scale, zero, torch.int8, -128, 127, output_dtype=w.dtype)


def int4_roundtrip(w: torch.Tensor) -> torch.Tensor:
    q, scale, zero, _ = _choose_qparams_and_quantize_affine_hqq(w, nbits=4, group_size=128, device="cpu",
                                                                  compute_dtype=torch.float16, raw_output=True)
    groups = q.float().reshape(-1, 128)
    return ((groups - zero.float().reshape(-1, 1)) * scale.float().reshape(-1, 1)).reshape(w.shape).to(w.dtype)


def roundtrip(model, fn) -> None:
    table = model.get_input_embeddings().weight
    with torch.no_grad():
        for m in model.modules():
            if type(m).__name__ == "Linear" and m.weight is not table:
                m.weight.copy_(fn(m.weight))


def main(model_name: str) -> None:
    reference = None
    for name, fn in (("none", None), ("int8, per row", int8_roundtrip), ("int4, HQQ group 128", int4_roundtrip)):
        lm, _ = ModelCache().get(model_name, "cpu", "fp32", "sdpa")
        ids = lm.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
        began = time.time()
        if fn is not None:
            roundtrip(lm.model, fn)
        logits = quality.logits(lm.model, ids)
        if reference is None:
            reference, line = logits, "reference"
        else:
            err = quality.logit_error(logits, reference)
            kept = (logits.argmax(-1) == reference.argmax(-1)).float().mean().item()
            line = f"logit err {err.max_abs:.3g} ({100 * err.relative:.2g}%), greedy token kept at {kept:.0%}"
        if not lm.random_weights:
            line += f", ppl {quality.perplexity(lm.model, lm.tokenizer, quality.heldout_texts(HELDOUT)):.2f}"
        print(f"| {model_name} | {name} | {line} | {time.time() - began:.0f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
