#!/usr/bin/env bash
# bmad `bench decode` against llama.cpp's `llama-batched-bench` on the same GGUF files, run
# alternately (bmad, llama.cpp, bmad, ...) ROUNDS times so machine noise hits both alike; prints
# the median tokens/s of each and their ratio, per model and batch size, as a Markdown table.
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin tests/bench/compare_decode.sh [ROUNDS]
#
# LLAMA_ARGS adds flags to every llama-batched-bench run (e.g. --no-mmap, so that its weights
# are anonymous memory that transparent huge pages can back, as bmad's arena is).
#
# Models: the 134M synthetic Llama (12 layers, width 768, 12 heads, FFN 2048, Llama-2
# vocabulary) in each of DTYPES (default "f16 q8_0"; also q4_k_m, q5_k_m: llama.cpp's Q4_K_M /
# Q5_K_M mix of K-quants; bf16, q4_0, q5_0, q4_1, q5_1: every matrix of that type), written with `bmad model synth` into $BMAD_BENCH_MODELS (default
# /tmp/bmad-bench-models) if missing. llama.cpp is not part of bmad: build its
# llama-batched-bench yourself (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
BATCHES=${BATCHES:-1,8,32}
PP=${PP:-128}
TG=${TG:-128}
THREADS=${THREADS:-$(nproc)}
BIN=${BMAD_BIN:-build/bin}
LLAMA=${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to llama.cpp/build/bin}
MODELS=${BMAD_BENCH_MODELS:-/tmp/bmad-bench-models}
VOCAB=${BMAD_VOCAB_FROM:-../shared/models/llama-2-tiny-random.gguf}
DTYPES=${DTYPES:-f16 q8_0}
mkdir -p "$MODELS"
for dtype in $DTYPES; do
  f="$MODELS/synth-134m-$dtype.gguf"
  [ -f "$f" ] || "$BIN/bmad" model synth --out "$f" --layers 12 --dim 768 --heads 12 --ffn 2048 \
    --vocab-from "$VOCAB" --dtype "$dtype" >/dev/null
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
IFS=, read -ra batch_list <<<"$BATCHES"
max_batch=0  # llama-batched-bench's context must hold the largest batch, wherever it is listed
for b in "${batch_list[@]}"; do (( b > max_batch )) && max_batch=$b; done
for dtype in $DTYPES; do
  model="$MODELS/synth-134m-$dtype.gguf"
  for round in $(seq "$ROUNDS"); do
    "$BIN/bmad" bench decode --model "$model" --batch "$BATCHES" --prompt-len "$PP" \
      --gen-len "$TG" --threads "$THREADS" 2>/dev/null | tail -n 1 >"$work/bmad-$dtype-$round.json"
    "$LLAMA/llama-batched-bench" -m "$model" -c $(( (PP + TG) * max_batch + 64 )) \
      -b 2048 -ub 512 -npp "$PP" -ntg "$TG" -npl "$BATCHES" -t "$THREADS" ${LLAMA_ARGS:-} 2>/dev/null \
      | grep -E '^\|\s+[0-9]' >"$work/llama-$dtype-$round.txt"
  done
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "| model | batch | bmad prefill tok/s | llama.cpp prefill tok/s | bmad decode tok/s | llama.cpp decode tok/s | decode ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for dtype in $DTYPES; do
  for b in "${batch_list[@]}"; do
    bp=$(cat "$work"/bmad-$dtype-*.json | grep -o "{\"batch\":$b,[^}]*}" | sed 's/.*"prefill_tokens_per_second":\([0-9.]*\).*/\1/' | median)
    bd=$(cat "$work"/bmad-$dtype-*.json | grep -o "{\"batch\":$b,[^}]*}" | sed 's/.*"decode_tokens_per_second":\([0-9.]*\).*/\1/' | median)
    # llama-batched-bench columns: PP TG B N_KV T_PP S_PP T_TG S_TG T S
    lp=$(cat "$work"/llama-$dtype-*.txt | awk -F'|' -v b="$b" '$4+0 == b {print $7+0}' | median)
    ld=$(cat "$work"/llama-$dtype-*.txt | awk -F'|' -v b="$b" '$4+0 == b {print $9+0}' | median)
    ratio=$(awk -v a="$bd" -v b="$ld" 'BEGIN {printf "%.2f", a / b}')
    printf '| %s | %s | %.1f | %.1f | %.1f | %.1f | %s× |\n' "$dtype" "$b" "$bp" "$lp" "$bd" "$ld" "$ratio"
  done
done
