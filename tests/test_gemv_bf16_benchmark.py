"""The bf16 GEMV benchmark launches its unmasked kernel only where a block of columns divides the width."""

from benchmarks.gemv_bf16 import GRID, launch_configs
from benchmarks.quant_matmul import shapes


def test_every_projection_of_both_shapes_gets_every_block_shape():
    for model in ("llama-3.2-1b-shape", "llama-3.1-8b-shape"):
        for name, (_, in_features) in shapes(model).items():
            assert launch_configs(in_features) == GRID, (model, name)


def test_a_width_no_block_divides_is_left_out():
    assert launch_configs(1000) == []
    assert {config[1] for config in launch_configs(192)} == {64}
