"""Speculative decoding on the shipped pair: prompt lookup on an input-grounded prompt, and the trained draft.

At batch 1 a decode step reads every weight for one token; speculation lets one target step verify several
proposed tokens. What it buys is measured here as A vs B engine runs of the same configuration with
speculation off and on (the engine's decode tok/s, prefill excluded), interleaved round by round so a busy
host slows both sides alike, and reported as mean ± stdev over rounds. Greedy output must be identical in
fp32 (see `pair`).

Ideal speedup, from the speculative run's own counts and times (all measured, none assumed):
    ideal = τ · T / (T + D)
where τ is tokens per verify round, (tokens − 1) / (target steps − 1) with target forward passes counted
(the prefill's step emits the first token before decode begins, so it is no round), T is one plain decode
step (1 / plain decode tok/s, the A side), and D is the draft's time per round (its share of decode times
the round's decode time, τ / speculative decode tok/s; the draft's time is inside the draft model's forward,
for prompt lookup, which runs no model, the fast backend's n-gram search on the host, and 0 under
transformers, which does not time it). It is the speedup if
verifying a step's drafts cost one plain step and nothing else cost time; measured / ideal says how much
the rest (verifying k+1 positions, cache cropping, transformers' assisted-generation loop) takes back.
On the fast backend the table splits a round into the draft's time, the verify step's (CUDA events around it)
and the rest, beside a plain step, so that what takes the speedup back is measured, not inferred.

    python -m benchmarks.speculative                       # CPU: stdlib-llama-tiny with stdlib-llama-draft
    python -m benchmarks.speculative --rounds 3 --draft-tokens 2,4
    python -m benchmarks.speculative --backend fast --compile reduce-overhead --dtype bf16   # CUDA: the fast
        # backend's compiled draft and verify steps, and its verify step under prompt lookup
    python -m benchmarks.speculative --target DIR ...      # another target for the shipped draft, e.g. a deeper
        # one trained on the same corpus and tokenizer (`bash benchmarks/h200.sh spec-trained OUT`)

On a GPU the shipped pair cannot show a speedup: both models are launch-bound, so a draft step costs
about what a target step does. Speculation pays when a target step costs many draft steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from playground import backends, speculative
from playground.config import RunConfig
from playground.engine import run
from playground.metrics import first_difference
from playground.presets import DEFAULT_MODEL
from playground.record import RunRecord, environment

HELDOUT = Path(__file__).resolve().parent.parent / "tests" / "models" / "data" / "heldout_sample.jsonl"
def _pm(values: list[float], digits: int = 2) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {std:.{digits}f}"


def _checked(config: RunConfig) -> RunRecord:
    record = run(config)
    if record.status != "ok":
        raise SystemExit(f"{config.spec}: {record.status}: {record.reason}")
    return record


def tokens_per_round(spec: RunRecord) -> float:
    """Tokens a verify round emits: the decode's tokens over its target steps, the prefill's one of each left out."""
    return (spec.tokens_generated - 1) / max(spec.target_steps - 1, 1)


def round_ms(plain: RunRecord, spec: RunRecord) -> tuple[float, float, float | None, float | None]:
    """(a plain step, then one speculative round's draft, verify step and the rest), ms: the rest is the host's
    work between them (acceptance, cache rollback, streaming) and the GPU's wait on it. Verify is timed by the
    fast backend only (None elsewhere)."""
    round_ = 1e3 * tokens_per_round(spec) / spec.decode_tok_s  # decode time per round of the B run
    draft = (spec.draft_share_pct or 0.0) / 100 * round_
    verify = spec.verify_step_ms
    return 1e3 / plain.decode_tok_s, draft, verify, None if verify is None else round_ - draft - verify


def ideal_speedup(plain: RunRecord, spec: RunRecord) -> float:
    """τ · T / (T + D), from the two records (see the module docstring)."""
    step, draft, _, _ = round_ms(plain, spec)
    return tokens_per_round(spec) * step / (step + draft)


def _split(pairs: list[tuple[RunRecord, RunRecord]]) -> str:
    """The mean of `round_ms` over the pairs, as 'plain · draft · verify · rest'."""
    splits = [round_ms(p, s) for p, s in pairs]
    parts = [[split[i] for split in splits] for i in range(4)]
    return " · ".join("—" if None in part else f"{statistics.mean(part):.2f}" for part in parts)


def pair(base: RunConfig, spec: str, draft_tokens: int,
         draft_model: str = speculative.DEFAULT_DRAFT_MODEL) -> tuple[RunRecord, RunRecord]:
    """Plain, then speculative. In fp32 greedy output must be identical; in fp16/bf16 verifying k + 1 positions
    at once runs other kernels than one-token steps, so a near-tie can round the other way, and the table
    says from which token the outputs part."""
    plain = _checked(base)
    fast = _checked(base.replace(spec=spec, draft_tokens=draft_tokens, draft_model=draft_model))
    diff = first_difference(plain.output_ids, fast.output_ids)
    if diff is not None and plain.dtype_effective == "fp32":
        raise SystemExit(f"{spec}: greedy output differs from plain decoding at token {diff}")
    return plain, fast


def _agreement(pairs: list[tuple[RunRecord, RunRecord]]) -> str:
    diffs = [first_difference(p.output_ids, s.output_ids) for p, s in pairs]
    parted = [d for d in diffs if d is not None]
    if not parted:
        return "identical"
    return (f"{len(diffs) - len(parted)}/{len(diffs)} identical; the others part at token "
            f"{', '.join(map(str, sorted(parted)))} ({pairs[0][0].dtype_effective} rounding)")


def summarize(name: str, pairs: list[tuple[RunRecord, RunRecord]]) -> str:
    plain, spec = [p for p, _ in pairs], [s for _, s in pairs]
    drafted, accepted = sum(s.drafted_tokens for s in spec), sum(s.accepted_tokens for s in spec)
    measured = [s.decode_tok_s / p.decode_tok_s for p, s in pairs]
    ideal = [ideal_speedup(p, s) for p, s in pairs]
    share = [s.draft_share_pct for s in spec if s.draft_share_pct is not None]
    cells = (name, _pm([p.decode_tok_s for p in plain], 1), _pm([s.decode_tok_s for s in spec], 1),
             f"{100 * accepted / drafted:.1f}" if drafted else "—", _pm([s.tokens_per_step for s in spec]),
             _pm(share, 1) if share else "0", _pm(measured), _pm(ideal), _pm([m / i for m, i in zip(measured, ideal)]),
             _split(pairs), _agreement(pairs))
    return "| " + " | ".join(cells) + " |"


HEADER_ROW = ("| method | plain tok/s | speculative tok/s | accepted % | tokens / target step | draft % of decode | "
              "speedup | ideal speedup | measured / ideal | ms: plain step · round's draft · verify · rest | "
              "greedy tokens |\n" + "|---" * 11 + "|")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="A/B rounds for prompt lookup (mean ± stdev over them); "
                                                          "0 skips prompt lookup")
    ap.add_argument("--repeats", type=int, default=5, help="measured passes per engine run")
    ap.add_argument("--lookup-tokens", type=int, default=10, help="prompt lookup's draft tokens per step")
    ap.add_argument("--draft-tokens", default="2,3,4", help="the draft model's draft tokens per step, a list")
    ap.add_argument("--prompts", type=int, default=6, help="held-out documents used as draft-model prompts")
    ap.add_argument("--backend", default="transformers", choices=backends.NAMES)
    ap.add_argument("--compile", default="off", help="compile mode (the fast backend compiles its draft and verify "
                                                     "steps; transformers' assisted generation does not compile)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--attn", default=RunConfig.attn, help="attention implementation of both models")
    ap.add_argument("--target", default=DEFAULT_MODEL, help="the target: a preset or a model folder that shares the "
                                                            "draft's tokenizer")
    ap.add_argument("--draft-model", default=speculative.DEFAULT_DRAFT_MODEL)
    args = ap.parse_args(argv)
    static = args.backend == "fast" or args.compile != "off"
    common = dict(model=args.target, repeats=args.repeats, warmup=1, profile_kernels=False, backend=args.backend,
                  compile=args.compile, dtype=args.dtype, attn=args.attn, cache_impl="static" if static else "dynamic")
    env = environment()
    print(f"{args.target} (target) · {env['device_name']}, {env['cpu_count']} cores · torch {env['torch']} · "
          f"transformers {env['transformers']} · commit {env['project_commit']}\n")

    print(f"backend {args.backend}, compile {args.compile}, dtype {args.dtype}, attn {args.attn}\n")
    if args.rounds and args.backend in speculative.REGISTRY["prompt_lookup"].backends:
        lookup = RunConfig(prompt=speculative.GROUNDED_PROMPT, new_tokens=speculative.GROUNDED_TOKENS, **common)
        rounds = [pair(lookup, "prompt_lookup", args.lookup_tokens) for _ in range(args.rounds)]
        print(f"Prompt lookup, {args.lookup_tokens} draft tokens: copy a module header ({speculative.GROUNDED_TOKENS} new tokens, "
              f"{args.rounds} rounds of {args.repeats} repeats)\n\n{HEADER_ROW}\n{summarize('prompt lookup', rounds)}\n")

    texts = [json.loads(line)["text"] for line in HELDOUT.read_text().splitlines()[:args.prompts]]
    prompts = [" ".join(text.split()[:30]) for text in texts]
    print(f"Draft model {args.draft_model}: first 30 words of {len(prompts)} held-out documents, 64 new tokens, "
          f"{args.repeats} repeats (mean ± stdev over prompts)\n\n{HEADER_ROW}")
    for k in (int(k) for k in args.draft_tokens.split(",")):
        pairs = [pair(RunConfig(prompt=p, new_tokens=64, **common), "draft", k, args.draft_model) for p in prompts]
        print(summarize(f"draft, {k} tokens", pairs))


if __name__ == "__main__":
    main()
