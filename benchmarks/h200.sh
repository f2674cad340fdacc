#!/usr/bin/env bash
# The H200 measurements behind results/h200/ and the README's "Measured on an NVIDIA H200".
# Usage: bash benchmarks/h200.sh STAGE OUTDIR   (STAGE: tests | proof | overhead | fast | article-1b | article-8b)
# Each stage writes JSONL records (one per run) or a log into OUTDIR; plots come from scripts/plot_results.py.
set -uo pipefail
stage=$1 out=$2
mkdir -p "$out"
bench() { python3 -m playground bench --no-store --format jsonl "$@"; }
common=(--repeats 3 --warmup 1 --new-tokens 128)

case $stage in
tests)  # the GPU-marked tests
  python3 -m pytest -q -m gpu tests/gpu tests/fast 2>&1 | tee "$out/gpu_tests.log" ;;
proof)  # every attention path in fp16/bf16, cache on/off, and static cache + compile, on the 1B shape
  bench --model llama-3.2-1b-shape --attn eager,sdpa,sdpa:flash,sdpa:efficient,sdpa:cudnn,sdpa:math,flash_attention_2,flex_attention \
        --dtype fp32,fp16,bf16 --cache on,off --prompt-tokens 512 --new-tokens 16 --repeats 1 --output "$out/proof.jsonl"
  bench --model llama-3.2-1b-shape --attn eager,sdpa,sdpa:math,flash_attention_2,flex_attention --dtype bf16 \
        --cache-impl static --compile reduce-overhead --prompt-tokens 512 --new-tokens 16 --repeats 1 \
        --output "$out/proof_compile.jsonl" ;;
overhead)  # engine vs bare model.generate, same model object, alternating rounds
  python3 -m benchmarks.engine_overhead --model llama-3.2-1b-shape --attn eager,sdpa --prompt-tokens 512 \
        --new-tokens 128 --rounds 11 --output "$out/engine_overhead.json" 2>&1 | tee "$out/engine_overhead.txt" ;;
fast)  # the fast backend against transformers' best (static cache + compile), same model objects
  python3 -m benchmarks.fast_decode --model llama-3.2-1b-shape,llama-3.1-8b-shape --output "$out/fast_decode.json" \
        2>&1 | tee "$out/fast_decode.txt" ;;
article-1b)  # the article's levers on the Llama-3.2-1B shape
  bench --model llama-3.2-1b-shape --attn eager,sdpa,flash_attention_2 --cache on,off --dtype bf16 \
        --prompt-tokens 512 "${common[@]}" --output "$out/article_1b_attn_cache.jsonl"
  bench --model llama-3.2-1b-shape --attn sdpa --dtype fp32,fp16 --prompt-tokens 512 "${common[@]}" \
        --output "$out/article_1b_dtype.jsonl"
  bench --model llama-3.2-1b-shape --attn eager,sdpa,flash_attention_2 --dtype bf16 --prompt-tokens 8192 \
        "${common[@]}" --output "$out/article_1b_8192.jsonl"
  bench --model llama-3.2-1b-shape --attn sdpa --cache off --dtype bf16 --prompt-tokens 8192 --repeats 3 \
        --warmup 1 --new-tokens 32 --output "$out/article_1b_8192_nocache.jsonl"
  bench --model llama-3.2-1b-shape --attn sdpa --dtype bf16 --cache-impl static --compile off,reduce-overhead \
        --prompt-tokens 512,8192 "${common[@]}" --output "$out/article_1b_compile.jsonl" ;;
article-8b)  # the same levers on the Llama-3.1-8B shape
  bench --model llama-3.1-8b-shape --attn eager,sdpa,flash_attention_2 --dtype bf16 --prompt-tokens 512 \
        "${common[@]}" --output "$out/article_8b_attn.jsonl"
  bench --model llama-3.1-8b-shape --attn sdpa --cache off --dtype bf16 --prompt-tokens 512 "${common[@]}" \
        --output "$out/article_8b_nocache.jsonl"
  bench --model llama-3.1-8b-shape --attn sdpa,flash_attention_2 --dtype bf16 --prompt-tokens 8192 \
        "${common[@]}" --output "$out/article_8b_8192.jsonl"
  bench --model llama-3.1-8b-shape --attn sdpa --dtype bf16 --cache-impl static --compile off,reduce-overhead \
        --prompt-tokens 512 "${common[@]}" --output "$out/article_8b_compile.jsonl" ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
