#!/usr/bin/env bash
# The H200 measurements behind results/h200/ and the README's "Measured on an NVIDIA H200".
# Usage: bash benchmarks/h200.sh STAGE OUTDIR
#   STAGE: tests | tests-fast | proof | overhead | fast | fast-anchor | fast-1b | fast-8b | article-1b | article-1b-long
#          | article-8b | article-8b-nocompile | quant-8b | quant-1b | quant-tiny | quant-matmul | step-overhead | spec-fast
#          | spec-trained | gemv-bf16
#          | batch-8b | batch-8b-padded | warm | warm-1b | spread-1b | compile-spread-1b | compile-spread-8b
#          | tuning-spread-1b | tuning-spread-8b
#          | precompile-8b | cold-8b | warm-8b | batch-8b-warm | batch-8b-anchor | limit-8b | tp-8b | tp-70b (these two on several GPUs)
# Each stage writes JSONL records (one per run) or a log into OUTDIR; plots come from scripts/plot_results.py.
set -uo pipefail
stage=$1 out=$2
mkdir -p "$out"
# A fresh inductor cache per stage: a cold start measured here is a real first compile, not a cache hit
# left by an earlier stage on the same machine (within a stage, later compiles may hit the cache).
# With GPU_CACHE set, stages share the compile caches under it instead: cold-8b fills them with its
# compiles side by side, and warm-8b and batch-8b-warm then measure one run at a time, starting warm.
# Put GPU_CACHE outside the repository copy (e.g. /tmp/gpu-cache): a machine that re-syncs the copy
# between calls removes what is not part of it.
if [[ -n ${GPU_CACHE:-} ]]; then
  export TORCHINDUCTOR_CACHE_DIR=$GPU_CACHE/inductor TRITON_CACHE_DIR=$GPU_CACHE/triton \
         PLAYGROUND_COMPILE_CACHE=$GPU_CACHE/artifacts
else
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
  export TORCHINDUCTOR_CACHE_DIR
fi
bench() { python3 -m playground bench --no-store --format jsonl "$@"; }
common=(--repeats 3 --warmup 1 --new-tokens 128)
# the fast backend's batch-1 row as the warm-start stages run it (bf16, flash-attn, its own CUDA graphs)
fast_row=(--backend fast --cache-impl static --compile reduce-overhead --dtype bf16 --attn flash_attention_2
          --prompt-tokens 512 --new-tokens 256)

case $stage in
tests)  # the GPU-marked tests
  python3 -m pytest -q -m gpu tests/gpu tests/fast 2>&1 | tee "$out/gpu_tests.log" ;;
tests-fast)  # the fast backend's GPU tests alone
  python3 -m pytest -q -m gpu tests/fast 2>&1 | tee "$out/fast_tests.log" ;;
proof)  # every attention path in fp16/bf16, cache on/off, and static cache + compile, on the 1B shape
  bench --model llama-3.2-1b-shape --attn eager,sdpa,sdpa:flash,sdpa:efficient,sdpa:cudnn,sdpa:math,flash_attention_2,flex_attention \
        --dtype fp32,fp16,bf16 --cache on,off --prompt-tokens 512 --new-tokens 16 --repeats 1 --output "$out/proof.jsonl"
  bench --model llama-3.2-1b-shape --attn eager,sdpa,sdpa:math,flash_attention_2,flex_attention --dtype bf16 \
        --cache-impl static --compile reduce-overhead --prompt-tokens 512 --new-tokens 16 --repeats 1 \
        --output "$out/proof_compile.jsonl" ;;
overhead)  # engine vs bare model.generate, same model object, alternating rounds
  python3 -m benchmarks.engine_overhead --model llama-3.2-1b-shape --attn eager,sdpa --prompt-tokens 512 \
        --new-tokens 128 --rounds 11 --output "$out/engine_overhead.json" 2>&1 | tee "$out/engine_overhead.txt" ;;
fast)  # the headline rows: the fast backend (flash-decoding) against transformers' best, same weights, one run
  python3 -m benchmarks.fast_decode --model llama-3.2-1b-shape,llama-3.1-8b-shape --fast-attn flash_attention_2 \
        --output "$out/fast_decode.json" 2>&1 | tee "$out/fast_decode.txt" ;;
fast-anchor)  # the fast backend against gpt-fast on both shapes, one run (GPT_FAST: a pytorch-labs/gpt-fast checkout)
  python3 -m benchmarks.fast_decode --model llama-3.2-1b-shape,llama-3.1-8b-shape --fast-attn flash_attention_2 \
        --no-transformers --gpt-fast "${GPT_FAST:?set GPT_FAST to a pytorch-labs/gpt-fast checkout}" \
        --output "$out/fast_anchor.json" 2>&1 | tee "$out/fast_anchor.txt" ;;
fast-1b)  # the 1B shape alone, the fast decoder's attention as SDPA over the masked cache and as flash-decoding
  python3 -m benchmarks.fast_decode --model llama-3.2-1b-shape --fast-attn sdpa,flash_attention_2 \
        --output "$out/fast_decode_1b.json" 2>&1 | tee "$out/fast_decode_1b.txt" ;;
fast-8b)  # the 8B shape alone, with flash-decoding (its SDPA row: results/h200/2026-12-02-article-8b-and-proof/fast_decode_8b.txt)
  python3 -m benchmarks.fast_decode --model llama-3.1-8b-shape --fast-attn flash_attention_2 \
        --output "$out/fast_decode_8b.json" 2>&1 | tee "$out/fast_decode_8b.txt" ;;
article-1b)  # the article's levers on the Llama-3.2-1B shape
  bench --model llama-3.2-1b-shape --attn eager,sdpa,flash_attention_2 --cache on,off --dtype bf16 \
        --prompt-tokens 512 "${common[@]}" --output "$out/article_1b_attn_cache.jsonl"
  bench --model llama-3.2-1b-shape --attn sdpa --dtype fp32,fp16 --prompt-tokens 512 "${common[@]}" \
        --output "$out/article_1b_dtype.jsonl"
  bench --model llama-3.2-1b-shape --attn eager,sdpa,flash_attention_2 --dtype bf16 --prompt-tokens 8192 \
        "${common[@]}" --output "$out/article_1b_8192.jsonl"
  bench --model llama-3.2-1b-shape --attn sdpa --dtype bf16 --cache-impl static --compile off \
        --prompt-tokens 512 "${common[@]}" --output "$out/article_1b_compile.jsonl" ;;
article-1b-long)  # no cache at 8192, and static cache + compile at 512 and 8192
  bench --model llama-3.2-1b-shape --attn sdpa --cache off --dtype bf16 --prompt-tokens 8192 --repeats 3 \
        --warmup 1 --new-tokens 32 --output "$out/article_1b_8192_nocache.jsonl"
  bench --model llama-3.2-1b-shape --attn sdpa --dtype bf16 --cache-impl static --compile reduce-overhead \
        --prompt-tokens 512,8192 "${common[@]}" --output "$out/article_1b_compile_on.jsonl" ;;
article-8b)  # the same levers on the Llama-3.1-8B shape
  bash "$0" article-8b-nocompile "$out"
  bench --model llama-3.1-8b-shape --attn sdpa --dtype bf16 --cache-impl static --compile off,reduce-overhead \
        --prompt-tokens 512 "${common[@]}" --output "$out/article_8b_compile.jsonl" ;;
article-8b-nocompile)  # the 8B rows that need no compile (the compiled 8B row also comes from fast-8b)
  bench --model llama-3.1-8b-shape --attn eager,sdpa,flash_attention_2 --dtype bf16 --prompt-tokens 512 \
        "${common[@]}" --output "$out/article_8b_attn.jsonl"
  bench --model llama-3.1-8b-shape --attn sdpa --cache off --dtype bf16 --prompt-tokens 512 "${common[@]}" \
        --output "$out/article_8b_nocache.jsonl"
  bench --model llama-3.1-8b-shape --attn eager,sdpa,flash_attention_2 --dtype bf16 --prompt-tokens 8192 \
        "${common[@]}" --output "$out/article_8b_8192.jsonl" ;;
quant-8b|quant-1b)  # weight-only quantization on the fast backend against its unquantized step: int8 in bf16, then
  # int4 in fp16 (gemlite's int4 takes fp16 activations only), each dtype's own unquantized row its reference
  model=llama-3.1-8b-shape; [[ $stage == quant-1b ]] && model=llama-3.2-1b-shape
  for pair in ${QUANT_PAIRS:-bf16:int8-gemlite fp16:int4-gemlite}; do  # QUANT_PAIRS: some of them
    dtype=${pair%%:*}; name=${stage}_fast_$dtype
    python3 -m benchmarks.quantization --model $model --quant "${pair#*:}" --dtype "$dtype" --backend fast \
          --compile reduce-overhead --attn flash_attention_2 --prompt-tokens 512 --new-tokens 256 --repeats 3 \
          --output "$out/${name//-/_}.json" 2>&1 | tee "$out/${name//-/_}.txt"
  done ;;
quant-tiny)  # each quantization's kernels on the trained shipped model, where perplexity says what it costs (a
  # random-weight shape's logit error shows mostly how much random layers amplify rounding); gemlite's int4 in fp16
  for pair in bf16:int8,int4,fp8,int8-gemlite fp16:int8-gemlite,int4-gemlite; do
    dtype=${pair%%:*}
    python3 -m benchmarks.quantization --model stdlib-llama-tiny --device cuda --dtype "$dtype" --quant "${pair#*:}" \
          --repeats 3 --output "$out/quant_tiny_$dtype.json" 2>&1 | tee "$out/quant_tiny_$dtype.txt"
  done ;;
step-overhead)  # what a compiled step's call costs the host, plain and with gemlite's int8 weights: compiled without
  # graphs, replayed by torch's CUDA graphs (Dynamo's guards before each replay), and captured by the fast backend
  python3 -m benchmarks.step_overhead --model llama-3.2-1b-shape --dtype bf16 --quant int8-gemlite,none \
        2>&1 | tee "$out/step_overhead_1b.txt" ;;
quant-matmul)  # each weight format's batch-1 projection alone
  python3 -m benchmarks.quant_matmul --model llama-3.1-8b-shape \
        2>&1 | tee "$out/quant_matmul_8b.txt" ;;
gemv-bf16)  # each bf16 projection alone: the step's compiled kernels (fixed, tuned), cuBLAS, a plain Triton GEMV
  # over block shapes; whether any launch config reads the 1B shape's 2048-wide rows near the card's bandwidth
  for model in llama-3.2-1b-shape llama-3.1-8b-shape; do
    python3 -m benchmarks.gemv_bf16 --model $model 2>&1 | tee "$out/gemv_bf16_${model%-shape}.txt"
  done ;;
spec-fast)  # the fast backend's compiled verify step under prompt lookup, and with the draft's steps on the shipped pair
  python3 -m benchmarks.speculative --backend fast --compile reduce-overhead --dtype bf16 --draft-tokens 4 \
        --rounds 3 --prompts 4 2>&1 | tee "$out/speculative_fast.txt" ;;
spec-trained)  # a deeper target (16 layers, ~0.2 B parameters) trained here on the shipped corpus and tokenizer,
  # so a target step costs many draft steps, and a two-layer draft distilled from it that proposes for it. The
  # draft is 512 wide: at batch 1 a step this small is bound by its launches, so it costs what the shipped
  # 128-wide draft's step does and agrees with the target more often. TRAIN_MIN and DRAFT_MIN cap the two
  # trainings (both end at their epoch count sooner on an H100); SHIPPED_DRAFT=1 adds the shipped draft as a
  # second proposer (its rows: results/h200/2026-12-04-gemlite-speculation-spread/). Keep OUTDIR off $OUT:
  # the checkpoints are many files.
  python3 scripts/build_corpus.py --out "$out/corpus" --no-tokenizer >"$out/corpus.txt" 2>&1
  python3 scripts/train_tiny_lm.py --corpus "$out/corpus" --tokenizer assets/models/stdlib-llama-tiny \
        --out "$out/target" --hidden-size 1024 --layers 16 --intermediate-size 2816 --epochs 4 \
        --max-minutes "${TRAIN_MIN:-3}" --extra-eval tests/models/data/heldout_sample.jsonl >"$out/train_target.txt" 2>&1
  python3 scripts/train_tiny_lm.py --corpus "$out/corpus" --tokenizer assets/models/stdlib-llama-tiny \
        --out "$out/draft" --hidden-size 512 --layers 2 --intermediate-size 1536 --seq-len 256 --batch-size 16 \
        --epochs 8 --max-minutes "${DRAFT_MIN:-2}" --teacher "$out/target" >"$out/train_draft.txt" 2>&1
  drafts=("$out/draft"); [[ -n ${SHIPPED_DRAFT:-} ]] && drafts+=(stdlib-llama-draft)
  for draft in "${drafts[@]}"; do
    python3 -m benchmarks.speculative --backend fast --compile reduce-overhead --dtype bf16 --target "$out/target" \
          --draft-model "$draft" --draft-tokens 5 --rounds 3 --prompts 4 --repeats 3
  done 2>&1 | tee "$out/speculative_trained.txt"
  # what a round's verify step runs beyond a plain step: the target's kernels for one token, then for 6 at once
  for verify in 0 5; do
    python3 -m benchmarks.decode_kernels --model "$out/target" --prompt-tokens 32 --new-tokens 64 --verify $verify \
          --shown 60 >"$out/kernels_target_verify$verify.txt" 2>&1
  done ;;
batch-8b)  # batch sweep, largest batch predicted against found
  python3 -m benchmarks.batching --model llama-3.1-8b-shape --dtype bf16 --compile reduce-overhead \
        --fast-attn flash_attention_2 --batch-sizes 1,8,64 --output "$out/batching_8b.json" \
        --chart "$out/batching_8b.html" 2>&1 | tee "$out/batching_8b.txt" ;;
batch-8b-padded)  # what left padding costs the fast backend (sdpa: flash-attn takes no padding), uniform then uneven
  for spread in 0 50; do
    python3 -m benchmarks.batching --model llama-3.1-8b-shape --dtype bf16 --compile reduce-overhead --backend fast \
          --fast-attn sdpa --batch-sizes 8,64 --length-spread $spread --search off \
          --output "$out/batching_8b_spread$spread.json" 2>&1 | tee "$out/batching_8b_spread$spread.txt"
  done ;;
spread-1b)  # one 1B step compiled by three processes: two cold ones (each tunes anew), then one warm from the
  # second's caches; each lists every kernel of its step with its launch shape, so two compiles' kernels can be compared
  caches=$(mktemp -d)
  for run in cold-a cold-b warm-b; do
    TORCHINDUCTOR_CACHE_DIR=$caches/${run#*-} TRITON_CACHE_DIR=$caches/${run#*-}/triton python3 -m benchmarks.decode_kernels \
        --model llama-3.2-1b-shape --attn flash_attention_2 --shown 400 >"$out/kernels_1b_$run.txt" 2>&1
  done ;;
compile-spread-1b|compile-spread-8b)  # two cold compiles of the same step per kernel choice, each process with caches
  # of its own, timing 3 repeats after its compile: how far apart their median steps land (the target: within 3%)
  model=llama-3.2-1b-shape; [[ $stage == compile-spread-8b ]] && model=llama-3.1-8b-shape
  python3 -m benchmarks.compile_spread --model $model --attn flash_attention_2 --processes "${SPREAD_PROCESSES:-2}" \
        --output "$out/compile_spread_${model%-shape}.json" 2>&1 | tee "$out/compile_spread_${model%-shape}.txt" ;;
tuning-spread-1b|tuning-spread-8b)  # each projection compiled cold in several processes per coordinate-descent setting
  model=llama-3.2-1b-shape; [[ $stage == tuning-spread-8b ]] && model=llama-3.1-8b-shape
  python3 -m benchmarks.tuning_spread --model $model ${SPREAD_SETTINGS:+--settings $SPREAD_SETTINGS} \
        --processes "${SPREAD_PROCESSES:-4}" --output "$out/tuning_spread_${model%-shape}.json" \
        2>&1 | tee "$out/tuning_spread_${model%-shape}.txt" ;;
precompile-8b)  # the decode step's first call in a new process: torch.compile cold and from warm caches, against
  # Dynamo's ahead-of-time compile saved to a file and loaded (no trace), with and without inductor's caches
  python3 -m benchmarks.precompile_step --model llama-3.1-8b-shape --dtype bf16 --attn flash_attention_2 \
        --other llama-3.2-1b-shape 2>&1 | tee "$out/precompile_8b.txt" ;;
warm|warm-1b)  # a cold compile, then two new processes on the compile cache folder the first one filled: torch's
  # artifacts, the saved prefill and decode step, and inductor's own cache, which the playground keeps there. The two
  # warm processes load the same saved steps and time 3 repeats each: their decode rates show whether the kernels
  # the cold compile chose are carried over
  model=llama-3.1-8b-shape; [[ $stage == warm-1b ]] && model=llama-3.2-1b-shape
  export PLAYGROUND_COMPILE_CACHE=$out/compile-artifacts
  unset TORCHINDUCTOR_CACHE_DIR
  python3 -m playground warm $model "${fast_row[@]}" 2>&1 | tee "$out/warm_cold.txt"
  for run in warm warm-again; do
    bench --model $model "${fast_row[@]}" --repeats 3 --warmup 1 --output "$out/warm_$run.jsonl"
  done ;;
cold-8b)  # the 8B shape's compiles side by side (cold, so slower than one alone), filling GPU_CACHE
  # the fast backend at batch 1 (bf16, int8 weights, the ahead-of-time step) and at batch 8 and 64
  m=(llama-3.1-8b-shape --backend fast --cache-impl static --dtype bf16 --attn flash_attention_2 --prompt-tokens 512
     --new-tokens 256)
  timeout "${COLD_S:-480}" python3 -m playground warm "${m[@]}" --compile reduce-overhead --quant int8 \
      >"$out/cold_int8.txt" 2>&1 &
  for variant in "reduce-overhead 1" "aot 1" "reduce-overhead 8" "reduce-overhead 64"; do
    set -- $variant
    timeout "${COLD_S:-480}" python3 -m playground warm "${m[@]}" --compile "$1" --batch-size "$2" \
        >"$out/cold_$1_b$2.txt" 2>&1 &
  done
  wait ;;
warm-8b)  # after cold-8b: int8 against bf16, and the ahead-of-time step against torch.compile, each warm
  python3 -m benchmarks.quantization --model llama-3.1-8b-shape --quant int8 --dtype bf16 --backend fast \
        --compile reduce-overhead --attn flash_attention_2 --prompt-tokens 512 --new-tokens 256 --repeats 3 \
        --output "$out/quant_8b_fast.json" >"$out/quant_8b_fast.txt" 2>&1
  bench --model llama-3.1-8b-shape --backend fast --cache-impl static --dtype bf16 --attn flash_attention_2 \
        --compile reduce-overhead,aot --prompt-tokens 512 --new-tokens 256 --repeats 3 \
        --output "$out/aot_vs_compile_8b.jsonl" ;;
batch-8b-warm)  # after cold-8b: the batch sweep at 8 and 64 (transformers' compiled static cache as the anchor)
  python3 -m benchmarks.batching --model llama-3.1-8b-shape --dtype bf16 --compile reduce-overhead \
        --fast-attn flash_attention_2 --batch-sizes 8,64 --search off --output "$out/batching_8b.json" \
        --chart "$out/batching_8b.html" >"$out/batching_8b.txt" 2>&1 ;;
batch-8b-anchor)  # transformers' compiled static cache at 8 and 64 alone: after the fast rows, a call's limit cut it off
  python3 -m benchmarks.batching --model llama-3.1-8b-shape --dtype bf16 --compile reduce-overhead --backend transformers \
        --batch-sizes 8,64 --search off --output "$out/batching_8b_transformers.json" \
        >"$out/batching_8b_transformers.txt" 2>&1 ;;
limit-8b)  # the largest batch that runs, found by eager probes, against the pre-flight's prediction (over 130 s)
  python3 -m benchmarks.batching --model llama-3.1-8b-shape --dtype bf16 --backend fast --compile off \
        --fast-attn flash_attention_2 --batch-sizes 64 --repeats 1 --search on --output "$out/limit_8b.json" \
        >"$out/limit_8b.txt" 2>&1 ;;
tp-8b)  # tensor parallel on 2 GPUs against one, transformers with static cache + compile (target >= 1.3x)
  python3 -m benchmarks.parallel --model llama-3.1-8b-shape --devices 2 --dtype bf16 --compile reduce-overhead \
        --prompt-tokens 512 --new-tokens 256 --output "$out/tp_8b.json" 2>&1 | tee "$out/tp_8b.txt" ;;
tp-70b)  # the 70B shape over 2 and 4 GPUs (its one-GPU row is refused by the memory pre-flight, with the numbers)
  python3 -m benchmarks.parallel --model llama-3.1-70b-shape --devices 2,4 --dtype bf16 --prompt-tokens 512 \
        --new-tokens 64 --repeats 1 --output "$out/tp_70b.json" 2>&1 | tee "$out/tp_70b.txt" ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
