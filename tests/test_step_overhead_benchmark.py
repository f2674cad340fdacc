"""The host-overhead benchmark counts what tensor-subclass weights cost each compiled step's call."""

import pytest
import torch

from benchmarks.step_overhead import measure
from playground.loader import ModelCache
from playground.presets import DEFAULT_MODEL

pytest.importorskip("torchao")


@pytest.mark.parametrize("quant, subclass_inputs", [("none", 0), ("int8", 17)])
def test_each_call_flattens_every_quantized_weight_the_step_reads(quant, subclass_inputs):
    """The shipped model's int8 step reads 17 weights: per layer the fused q/k/v, o, the fused gate/up and down,
    and the head's quantized copy of the tied table. Dynamo's guards flatten each subclass twice per call."""
    model = ModelCache().get(DEFAULT_MODEL, "cpu", "fp32", "sdpa", quant=quant)[0].model
    figures = measure(model, "cpu", prompt_tokens=8, steps=4)
    torch._dynamo.reset()
    assert figures["flatten_calls"] == 2 * subclass_inputs
    assert (figures["subclass_us"] > 0) == (subclass_inputs > 0) and figures["step_us"] > 0
