#!/usr/bin/env bash
# Tensor and pipeline parallelism over MPI on this machine's CPUs: one replica as tp=1 (one rank,
# every core), tp=2 and pp=2 (two ranks, cores split between them), each behind a coordinator,
# driven by the same closed-loop load with `bmad bench http`. Prints, as a Markdown table, output
# tokens/s, the mean step time, and communication time per step by operation from the leader's
# bmad_comm_seconds histogram.
#
#   tests/bench/parallel_bench.sh [MODEL.gguf]
#
# Default model: the 134M synthetic Llama of compare_decode.sh (F16) in $BMAD_BENCH_MODELS. For a
# model whose vocabulary has fewer than 20000 tokens, set VOCAB to its size (prompt token ids are
# drawn below it).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/bench_lib.sh
BIN=${BMAD_BIN:-build/bin}
MODELS=${BMAD_BENCH_MODELS:-/tmp/bmad-bench-models}
MODEL=${1:-$MODELS/synth-134m-f16.gguf}
REQUESTS=${REQUESTS:-32}
CONCURRENCY=${CONCURRENCY:-8}
PROMPT=${PROMPT:-128}
OUTPUT=${OUTPUT:-64}
VOCAB=${VOCAB:-}
CORES=$(nproc)
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  "$BIN/bmad" model synth --out "$MODEL" --layers 12 --dim 768 --heads 12 --ffn 2048 \
    --vocab-from ../shared/models/llama-2-tiny-random.gguf --dtype f16 >/dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; rm -rf "$work"; }
trap cleanup EXIT

# metric NAME LABELS FILE: the sample's value (0 when absent).
metric() { awk -v s="$1$2" '$1 == s { print $2; found=1 } END { if (!found) print 0 }' "$3"; }

echo "| split | ranks × threads | output tok/s | mean step ms | comm ms/step: all_reduce | all_gather | send+recv | broadcast |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for split in "1 1" "2 1" "1 2"; do
  read -r tp pp <<<"$split"
  ranks=$((tp * pp))
  threads=$((CORES / ranks))
  [ "$threads" -ge 1 ] || threads=1
  read -r http cm wm client worker <<<"$(free_ports 5)"
  cat >"$work/c.yaml" <<EOF
model: {path: $MODEL}
coordinator: {client_endpoint: "tcp://127.0.0.1:$client", worker_endpoint: "tcp://127.0.0.1:$worker", http_port: $http, liveness_timeout_ms: 5000}
worker: {threads: $threads, heartbeat_ms: 250}
scheduler: {max_batch_tokens: 512, max_seqs: 32}
cache: {kv_bytes: 256MiB}
parallel: {tp: $tp, pp: $pp}
metrics: {coordinator_port: $cm, worker_port: $wm}
EOF
  "$BIN/bmad-coordinator" --config "$work/c.yaml" >"$work/coord.log" 2>&1 &
  pids+=($!)
  mpirun -np "$ranks" --bind-to none "$BIN/bmad-worker" --config "$work/c.yaml" --set worker.replica_id=r0 \
    >"$work/worker.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$http/ready" >/dev/null 2>&1 && break
    sleep 0.1
  done
  result=$("$BIN/bmad" bench http --url "http://127.0.0.1:$http" --requests "$REQUESTS" \
    --concurrency "$CONCURRENCY" --prompt-len "$PROMPT" --output-len "$OUTPUT" --timeout-s 600 \
    ${VOCAB:+--vocab-size "$VOCAB"} | tail -n 1 || true)  # it exits 1 when requests failed
  failed=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("failed", 0))' "$result")
  if [ "$failed" != 0 ]; then
    echo "parallel_bench: $failed requests failed with tp=$tp pp=$pp; the first errors:" >&2
    python3 -c 'import json,sys; [print("  ", e, file=sys.stderr) for e in json.loads(sys.argv[1]).get("errors", [])[:3]]' "$result"
    exit 1
  fi
  tps=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["output_tokens_per_s"])' "$result")
  curl -s "http://127.0.0.1:$wm/metrics" >"$work/m.txt"
  steps=$(metric bmad_worker_step_seconds_count '{replica="r0"}' "$work/m.txt")
  step_sum=$(metric bmad_worker_step_seconds_sum '{replica="r0"}' "$work/m.txt")
  per_step() {  # summed seconds of the given ops, in ms per step (the leader's histogram)
    local total=0 op
    for op in "$@"; do total=$(python3 -c "print($total + $(metric bmad_comm_seconds_sum "{op=\"$op\",replica=\"r0\"}" "$work/m.txt"))"); done
    python3 -c "print('%.2f' % (1000 * $total / max($steps, 1)))"
  }
  echo "| tp=$tp pp=$pp | $ranks × $threads | $tps | $(python3 -c "print('%.1f' % (1000 * $step_sum / max($steps, 1)))") | $(per_step all_reduce) | $(per_step all_gather) | $(per_step send recv) | $(per_step broadcast) |"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
done
echo
echo "model $(basename "$MODEL"), $REQUESTS requests, $CONCURRENCY in flight, prompt $PROMPT, output $OUTPUT, $CORES cores"
