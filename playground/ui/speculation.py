"""The one-click comparisons of speculative decoding: the same configuration with speculation off (A) and on
(B), so the decode row's "B vs A" is the speedup and the identical-token check shows greedy output unchanged.

The ready prompt it adds is input-grounded (copy a module header just read): prompt lookup can only draft what the text
already holds, and a draft model gets the most right where the continuation is predictable.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from playground import speculative

if TYPE_CHECKING:
    from playground.ui.settings import Comparison

READY_PROMPTS = {"Copy a module header (input-grounded, for speculation)": speculative.GROUNDED_PROMPT}


def comparisons() -> tuple[Comparison, ...]:
    from playground import capabilities
    from playground.ui.settings import ColumnSettings, Comparison

    cuda = capabilities.host().cuda

    off = ColumnSettings()
    prompt = f"The prompt is set to the ready prompt \"{next(iter(READY_PROMPTS))}\", which gets the most drafts accepted."
    grounded = dict(new_tokens=speculative.GROUNDED_TOKENS, prompt=speculative.GROUNDED_PROMPT, synthetic=False)
    return (
        Comparison("Speculation: off vs prompt lookup",
                   "B drafts up to 10 tokens per step by finding the last words of the text so far earlier in "
                   "it, and the target verifies them in one step: accepted drafts are underlined. Greedy output "
                   "is the same token for token; the Speculative decoding row gives acceptance and tokens per "
                   f"step. {prompt}",
                   off, dataclasses.replace(off, spec="prompt_lookup", draft_tokens=10), grounded),
        Comparison("Speculation: off vs draft model",
                   "B drafts 3 tokens per step with a 1 M-parameter draft trained beside the 8.7 M target "
                   "(stdlib-llama-draft, same tokenizer and corpus) and verifies them in one target step. On a "
                   "CPU a tiny target costs little more than its draft, so expect no speedup here: the row shows "
                   f"why (the draft's share of decode time). {prompt}",
                   off, dataclasses.replace(off, spec="draft", draft_tokens=3), grounded,
                   cannot_show="" if cuda else (
                       "on a CPU this tiny target's step costs little more than its draft's, so drafting 3 tokens "
                       "and verifying them gains little or nothing. Prompt lookup, whose drafts cost nothing, shows "
                       "speculation on this host; a draft model pays where the target is many times its size.")),
    )
