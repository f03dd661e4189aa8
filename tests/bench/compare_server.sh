#!/usr/bin/env bash
# bmad (coordinator + one replica) against llama.cpp's `llama-server --parallel 16` on the same
# GGUF file and machine, driven by the same `bmad bench http` workload: 64 requests of about 130
# prompt tokens and 128 output tokens, 16 in flight. Runs alternate (llama.cpp, bmad, ...) ROUNDS
# times; prints each run and, per round, bmad's output tokens/s over llama.cpp's.
#
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin tests/bench/compare_server.sh [ROUNDS]
#
# Model: the 134M synthetic Llama (F16) of compare_decode.sh, written with --text-only (byte,
# control and unknown tokens have zero output rows, so greedy output is always valid UTF-8:
# llama-server aborts a stream whose text is not), in $BMAD_BENCH_MODELS. MODEL=FILE.gguf runs
# another file instead (docs/benchmarks.md also gives the Q8_0 one, synth'd with --dtype q8_0).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/bench_lib.sh
ROUNDS=${1:-2}
BIN=${BMAD_BIN:-build/bin}
LLAMA=${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to llama.cpp/build/bin}
MODELS=${BMAD_BENCH_MODELS:-/tmp/bmad-bench-models}
MODEL=${MODEL:-$MODELS/synth-134m-f16-text.gguf}
THREADS=${THREADS:-$(nproc)}
WORKLOAD=(--requests 64 --concurrency 16 --prompt-len 120-140 --output-len 128 --timeout-s 900)
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  "$BIN/bmad" model synth --out "$MODEL" --layers 12 --dim 768 --heads 12 --ffn 2048 \
    --vocab-from ../shared/models/llama-2-tiny-random.gguf --dtype f16 --text-only >/dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
work=$(mktemp -d)
pids=()
trap 'stop_all; rm -rf "$work"' EXIT
summary() {  # the JSON line of bench http -> "tok/s ttft_mean ttft_p99" (ms)
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); n=lambda v: float("nan") if v is None else v; print("%.1f %.0f %.0f %d" % (j["output_tokens_per_s"], n(j["ttft_ms"]["mean"]), n(j["ttft_ms"]["p99"]), j.get("failed", 0)))' "$1"
}

run_llama() {
  local port
  port=$(free_ports 1)
  "$LLAMA/llama-server" -m "$MODEL" -t "$THREADS" -c $((16 * 288)) --parallel 16 --host 127.0.0.1 \
    --port "$port" >"$work/llama.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port/health"
  "$BIN/bmad" bench http --url "http://127.0.0.1:$port" "${WORKLOAD[@]}" 2>/dev/null | tail -n 1
  stop_all
}

run_bmad() {
  start_bmad "$work" "$MODEL" "$THREADS"
  "$BIN/bmad" bench http --url "$BMAD_URL" "${WORKLOAD[@]}" 2>/dev/null | tail -n 1
  stop_all
}

echo "| round | server | output tok/s | TTFT mean ms | TTFT p99 ms | failed |"
echo "|---|---|---:|---:|---:|---:|"
ratios=()
for round in $(seq "$ROUNDS"); do
  read -r l_tps l_mean l_p99 l_fail <<<"$(summary "$(run_llama)")"
  echo "| $round | llama-server --parallel 16 | $l_tps | $l_mean | $l_p99 | $l_fail |"
  read -r b_tps b_mean b_p99 b_fail <<<"$(summary "$(run_bmad)")"
  echo "| $round | bmad (1 replica) | $b_tps | $b_mean | $b_p99 | $b_fail |"
  ratios+=("$(python3 -c "print('%.2f' % ($b_tps / $l_tps))")")
done
echo
echo "bmad / llama-server output tokens/s, per round: ${ratios[*]}"
echo "model $(basename "$MODEL"), $THREADS threads, workload: ${WORKLOAD[*]}"
