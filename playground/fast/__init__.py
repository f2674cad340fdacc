"""A gpt-fast-style decoder for Llama-family Hugging Face models: the `fast` generation backend.

Plain `generate` spends most of a batch-1 decode step in Python and kernel launches. This package
runs the same weights (the loaded model's own modules; q/k/v and gate/up re-stored side by side
in place, never copied) through a static KV cache
and a single-token step written as a pure function of tensors, so that on CUDA the step, compiled by
torch.compile, is captured once as one CUDA graph and replayed per token (`generate.CapturedStep`).

    from playground.fast import fast_generate, unsupported_reason
"""

from playground.fast.generate import FastOutput, fast_generate, fixed_kernels_reason, kernel_choice
from playground.fast.support import SUPPORTED_ARCHITECTURES, padding_reason, unsupported_reason

__all__ = ["FastOutput", "SUPPORTED_ARCHITECTURES", "fast_generate", "fixed_kernels_reason", "kernel_choice",
           "padding_reason", "unsupported_reason"]
