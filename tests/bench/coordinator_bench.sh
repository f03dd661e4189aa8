#!/usr/bin/env bash
# Coordinator benchmarks (issue 8): bmad-coordinator in front of simulated replicas
# (bmad-fake-worker, tests/bench/fake_worker.cc), driven by `bmad bench http`, on 127.0.0.1.
# Prints Markdown on stdout, progress on stderr:
#
#   a. the latency the coordinator adds per request (a fast fake worker: 0 ms steps), at 1 and at
#      16 requests in flight, and routing decisions per second (bmad_router_bench);
#   b. router.policy weighted vs round_robin vs least_loaded on a skewed cluster (four replicas,
#      one 3x slower) with skewed request lengths, closed and open loop, same seed;
#   c. the long-tail pool on vs off (router.long_tail): three normal replicas and one long-tail
#      replica, mostly short prompts with ~14% long ones whose prefill is expensive; short and
#      long requests' time to first token reported separately (bench http --report-split-at).
#   d. overload fairness: replicas with short queues (scheduler.max_waiting 2) offered ~1.1x what
#      they serve, the coordinator's queue timeout 5 s: how many requests fail it, and the
#      latency tail; and a replica that takes one request a step (max_waiting 1) at 3/4 load.
#   e. deadlines in the coordinator's queue: the replicas of d offered ~1.1x what they serve, a
#      fifth of the requests with slo_ms 1000 (bench http --urgent-share): how many of those end
#      within it, and both groups' latencies.
#   With --baseline-bin DIR, DIR's bmad-coordinator runs cases d and e first (a build of an
#   earlier commit), for a ratio measured in one run.
#
#   tests/bench/coordinator_bench.sh [--quick] [--only a|b|c|d|e]... [--model FILE] [--baseline-bin DIR]
#
# --quick runs each case with a quarter of the requests (a smoke test). Every process gets a
# --max-run-ms bound and every bench a `timeout`; everything started is stopped on exit. The full
# run takes about 5 minutes on 2 cores. Needs build/bin/{bmad,bmad-coordinator,bmad-fake-worker,
# bmad_router_bench} (BMAD_BIN overrides the directory) and jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BMAD_BIN:-build/bin}
MODEL=../shared/models/llama-2-tiny-random.gguf   # the coordinator reads its vocabulary only
SCALE=1
ONLY=""
BASELINE_BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) SCALE=4 ;;
    --only) ONLY="$ONLY $2"; shift ;;
    --model) MODEL=$2; shift ;;
    --baseline-bin) BASELINE_BIN=$2; shift ;;
    *) echo "usage: $0 [--quick] [--only a|b|c|d|e]... [--model FILE] [--baseline-bin DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$ONLY" ] || ONLY="a b c d e"
if [ -n "$BASELINE_BIN" ] && [ ! -x "$BASELINE_BIN/bmad-coordinator" ]; then
  echo "missing $BASELINE_BIN/bmad-coordinator" >&2; exit 1
fi
for b in bmad bmad-coordinator bmad-fake-worker bmad_router_bench; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (build it: cmake --build build --target $b)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "missing model $MODEL" >&2; exit 1; }
MODEL_NAME=$(basename "$MODEL" .gguf)
VOCAB=32000   # Llama-2: bench http draws prompt ids in 100..31999

work=$(mktemp -d /tmp/bmad-coord-bench.XXXXXX)
pids=()
stop_all() {
  # Anything the processes warned about during the run goes to stderr (with the bench log).
  if [ -n "${CLUSTER_DIR:-}" ]; then
    grep -H -E ' (WARN|ERROR) ' "$CLUSTER_DIR"/*.log >&2 || true
    CLUSTER_DIR=""
  fi
  # Workers first (they drain in no time when idle), then the coordinator; SIGKILL stragglers.
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[coordinator_bench $(date +%T)] $*" >&2; }
raw=()   # "title|file" of every bench's text output, printed at the end
declare -A routed_closed routed_open routed_c long_tail_c routed_d2

# start_cluster TAG MAX_RUN_S ROUTER_YAML WORKER_SPEC...
#   WORKER_SPEC: "id pool base_ms per_seq_ms per_prefill_token_ms max_seqs"
# Sets URL and METRICS_URL; waits until every replica has registered. COORDINATOR (a binary),
# QUEUE_TIMEOUT_MS and MAX_WAITING override the defaults for one call.
start_cluster() {
  local tag=$1 max_run_s=$2 router=$3
  shift 3
  local dir="$work/$tag"
  mkdir -p "$dir"
  CLUSTER_DIR=$dir
  cat >"$dir/c.yaml" <<EOF
log: {level: info}
model: {path: $MODEL}
coordinator:
  client_endpoint: ipc://$dir/client.ipc
  worker_endpoint: tcp://127.0.0.1:*
  http_host: 127.0.0.1
  http_port: 0
  liveness_timeout_ms: 3000
  max_queued_per_priority: 100000
  queue_timeout_ms: ${QUEUE_TIMEOUT_MS:-60000}
router: $router
metrics: {coordinator_port: 0}
EOF
  "${COORDINATOR:-$BIN/bmad-coordinator}" --config "$dir/c.yaml" --max-run-ms $((max_run_s * 1000)) 2>"$dir/coord.log" &
  pids+=($!)
  local worker_ep=""
  for _ in $(seq 100); do
    worker_ep=$(grep -o 'workers=tcp://[^ ]*' "$dir/coord.log" | head -1 | cut -d= -f2 || true)
    [ -n "$worker_ep" ] && break
    sleep 0.1
  done
  [ -n "$worker_ep" ] || { cat "$dir/coord.log" >&2; echo "coordinator did not start" >&2; exit 1; }
  URL=$(grep -o 'http=http://[^ ]*' "$dir/coord.log" | head -1 | cut -d= -f2)
  METRICS_URL=$(grep -o 'metrics=http://[^ ]*' "$dir/coord.log" | head -1 | cut -d= -f2)
  local n=0 spec
  for spec in "$@"; do
    local id pool base per_seq per_prefill max_seqs
    read -r id pool base per_seq per_prefill max_seqs <<<"$spec"
    "$BIN/bmad-fake-worker" --coordinator "$worker_ep" --model "$MODEL_NAME" --replica-id "$id" \
      --pool "$pool" --base-ms "$base" --per-seq-ms "$per_seq" --per-prefill-token-ms "$per_prefill" \
      --max-seqs "$max_seqs" --max-batch-tokens 512 --kv-blocks 4096 --block-size 16 \
      --context-length 4096 --heartbeat-ms 100 --max-waiting "${MAX_WAITING:-4096}" \
      --max-run-ms $((max_run_s * 1000)) \
      2>"$dir/$id.log" &
    pids+=($!)
    n=$((n + 1))
  done
  for _ in $(seq 100); do
    [ "$(grep -c 'replica registered' "$dir/coord.log" || true)" -ge "$n" ] && break
    sleep 0.1
  done
  [ "$(grep -c 'replica registered' "$dir/coord.log" || true)" -ge "$n" ] ||
    { cat "$dir"/*.log >&2; echo "replicas did not register" >&2; exit 1; }
  sleep 0.3   # a first heartbeat from each
}

# bench TAG TIMEOUT_S ARGS...: runs bench http against $URL; the JSON line goes to $work/TAG.json.
bench() {
  local tag=$1 limit=$2
  shift 2
  log "bench $tag: $*"
  if ! timeout "$limit" "$BIN/bmad" bench http --url "$URL" --model "$MODEL_NAME" \
      --vocab-size "$VOCAB" --timeout-s 120 "$@" >"$work/$tag.out" 2>"$work/$tag.err"; then
    log "bench $tag failed or timed out"; cat "$work/$tag.err" >&2
  fi
  tail -n 1 "$work/$tag.out" >"$work/$tag.json"
  jq -e . "$work/$tag.json" >/dev/null 2>&1 || echo '{}' >"$work/$tag.json"
  raw+=("$tag|$work/$tag.out")
}

# j TAG FILTER: a number from the bench's JSON, formatted.
j() { jq -r "($2)" "$work/$1.json"; }  # a latency with no samples is null: f1/f2 print n/a
f1() { if [ "$1" = null ]; then printf 'n/a'; else printf '%.1f' "$1"; fi; }
f2() { if [ "$1" = null ]; then printf 'n/a'; else printf '%.2f' "$1"; fi; }

# routed_counts FILE: "replica count" lines (sorted) from the coordinator's routing counter.
routed_counts() {
  { curl -s --max-time 5 "$METRICS_URL" || true; } | awk '
    /^bmad_coordinator_requests_routed_total\{/ {
      match($0, /replica="[^"]*"/); n[substr($0, RSTART + 9, RLENGTH - 10)] += $NF }
    END { for (id in n) print id, n[id] }' | sort >"$1"
}
# routed_delta BEFORE AFTER: "id=count ..." routed between the two snapshots.
routed_delta() {
  join -a 2 -e 0 -o 0,1.2,2.2 "$1" "$2" | awk '{ printf "%s%s=%d", (NR > 1 ? " " : ""), $1, $3 - $2 }'
}
metric_value() {  # metric_value NAME: the unlabelled sample's value
  { curl -s --max-time 5 "$METRICS_URL" || true; } | awk -v m="$1" '$1 == m && !done { print $2; done = 1 }'
}

echo "# Coordinator benchmarks"
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))," \
  "load average at start: $(cut -d' ' -f1-3 /proc/loadavg). Coordinator, fake workers and the" \
  "load generator share these cores. Model (vocabulary only): $MODEL_NAME. Scale: 1/$SCALE."
echo

# ---------------------------------------------------------------------------------------------
if [[ " $ONLY " == *" a "* ]]; then
  A_REQ=$((5000 / SCALE))
  start_cluster a 120 "{policy: weighted}" "fast-0 normal 0 0 0 64"
  # Warm-up: connections, first allocations.
  bench a-warmup 60 --requests 200 --concurrency 4 --prompt-len 64 --output-len 4
  bench a-c1 120 --requests "$A_REQ" --concurrency 1 --prompt-len 64 --output-len 4
  bench a-c16 120 --requests "$A_REQ" --concurrency 16 --prompt-len 64 --output-len 4
  routing_sum=$(metric_value bmad_coordinator_routing_seconds_sum)
  routing_count=$(metric_value bmad_coordinator_routing_seconds_count)
  stop_all
  echo "## a. Latency the coordinator adds (fast fake worker, 0 ms steps)"
  echo
  echo "One fake replica that computes nothing: every step takes 0 ms, so each request's time is"
  echo "the coordinator's and the client's own: HTTP parse and validation, the prompt's token"
  echo "ids checked and block-hashed, routing, Assign over ZeroMQ, 4 TokenChunks back over"
  echo "ZeroMQ, SSE to the client. Prompts of 64 token ids, max_tokens 4, $A_REQ requests per row,"
  echo "after a 200-request warm-up. The load generator runs on the same cores."
  echo
  echo "| in flight | requests/s | output tok/s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | failed |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  for c in 1 16; do
    t=a-c$c
    echo "| $c | $(f1 "$(j $t .requests_per_s)") | $(f1 "$(j $t .output_tokens_per_s)") |" \
      "$(f2 "$(j $t .ttft_ms.p50)") | $(f2 "$(j $t .ttft_ms.p99)") | $(f2 "$(j $t .e2e_ms.p50)") |" \
      "$(f2 "$(j $t .e2e_ms.p99)") | $(j $t .failed) |"
  done
  echo
  if [ -n "$routing_count" ] && [ "${routing_count%.*}" -gt 0 ] 2>/dev/null; then
    echo "Router time inside the coordinator (bmad_coordinator_routing_seconds, Pick only):" \
      "mean $(awk -v s="$routing_sum" -v c="$routing_count" 'BEGIN { printf "%.2f", s / c * 1e6 }') µs" \
      "over ${routing_count%.*} decisions."
    echo
  fi
  log "router_bench"
  echo "Routing decisions per second (\`bmad_router_bench\`: Router::Pick + Record, default config,"
  echo "weighted with long-tail and prefix affinity on; items_per_second is decisions/s on one core):"
  echo
  echo '```'
  timeout 120 "$BIN/bmad_router_bench" --benchmark_min_time=0.3 2>&1 | grep -E '^(BM_|Benchmark|-{10})' || true
  echo '```'
  echo
fi

# ---------------------------------------------------------------------------------------------
if [[ " $ONLY " == *" b "* ]]; then
  B_REQ=$((480 / SCALE))
  B_OPEN_REQ=$((600 / SCALE))
  B_RATE=24
  # Three replicas with 8 ms steps (+0.2 ms per sequence, +0.02 ms per prompt token) and one 3x
  # slower; 16 sequences per step each. Requests skewed: prompts 32..1024 tokens, outputs
  # 8..256 (mean 84).
  FAST="8 0.2 0.02 16"
  SLOW="24 0.6 0.06 16"
  B_PROMPT=32-1024
  B_OUTPUT=8,16,32,64,128,256
  for policy in weighted round_robin least_loaded; do
    start_cluster "b-$policy" 240 "{policy: $policy, long_tail: false}" \
      "fast-0 normal $FAST" "fast-1 normal $FAST" "fast-2 normal $FAST" "slow-3 normal $SLOW"
    bench "b-closed-$policy" 150 --requests "$B_REQ" --concurrency 64 \
      --prompt-len "$B_PROMPT" --output-len "$B_OUTPUT" --seed 7
    routed_counts "$work/after"
    routed_closed[$policy]=$(routed_delta /dev/null "$work/after")
    stop_all
    start_cluster "b-open-$policy" 240 "{policy: $policy, long_tail: false}" \
      "fast-0 normal $FAST" "fast-1 normal $FAST" "fast-2 normal $FAST" "slow-3 normal $SLOW"
    bench "b-open-$policy" 150 --requests "$B_OPEN_REQ" --rate "$B_RATE" \
      --prompt-len "$B_PROMPT" --output-len "$B_OUTPUT" --seed 7
    routed_counts "$work/after"
    routed_open[$policy]=$(routed_delta /dev/null "$work/after")
    stop_all
  done
  echo "## b. Routing policies on a skewed cluster"
  echo
  echo "Four fake replicas, 16 sequences per step, 512-token step budget: fast-0..2 with steps of"
  echo "8 ms + 0.2 ms per sequence + 0.02 ms per prompt token, slow-3 three times slower in every"
  echo "term. Prompts uniform in $B_PROMPT tokens, outputs one of {$B_OUTPUT} tokens; same seed for"
  echo "every policy; long_tail off, prefix affinity on (random prompts share no prefix). A fresh"
  echo "coordinator and fresh replicas for every row."
  echo
  echo "Closed loop, 64 in flight, $B_REQ requests:"
  echo
  echo "| policy | output tok/s | requests/s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | routed (per replica) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|"
  for policy in weighted round_robin least_loaded; do
    t=b-closed-$policy
    echo "| $policy | $(f1 "$(j $t .output_tokens_per_s)") | $(f2 "$(j $t .requests_per_s)") |" \
      "$(f1 "$(j $t .ttft_ms.p50)") | $(f1 "$(j $t .ttft_ms.p99)") | $(f1 "$(j $t .e2e_ms.p50)") |" \
      "$(f1 "$(j $t .e2e_ms.p99)") | ${routed_closed[$policy]} |"
  done
  echo
  echo "Open loop, Poisson arrivals at $B_RATE requests/s, $B_OPEN_REQ requests:"
  echo
  echo "| policy | output tok/s | duration s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | routed (per replica) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|"
  for policy in weighted round_robin least_loaded; do
    t=b-open-$policy
    echo "| $policy | $(f1 "$(j $t .output_tokens_per_s)") | $(f1 "$(j $t .duration_s)") |" \
      "$(f1 "$(j $t .ttft_ms.p50)") | $(f1 "$(j $t .ttft_ms.p99)") | $(f1 "$(j $t .e2e_ms.p50)") |" \
      "$(f1 "$(j $t .e2e_ms.p99)") | ${routed_open[$policy]} |"
  done
  echo
fi

# ---------------------------------------------------------------------------------------------
if [[ " $ONLY " == *" c "* ]]; then
  C_REQ=$((600 / SCALE))
  C_RATE=20
  # Every replica alike: 8 ms steps + 0.2 ms per sequence + 0.1 ms per prompt token, so a 512-token
  # prompt chunk adds 51 ms to the step every sequence in it waits for.
  SPEC="8 0.2 0.1 32"
  # 18 short lengths (64..128, ten of them 128) and 3 long ones (1500..2000): ~14% long. The
  # router's rolling p80 then sits at 128 (prompts up to 120 are 38% of the mix, up to 128 86%),
  # so no short prompt counts as long. (With the short lengths spread evenly, 76% of prompts
  # were at most 120: a window holding a few more of them moved the p80 to 120, and some
  # 128-token prompts went to the long-tail pool.)
  C_PROMPT=64,72,80,88,96,104,112,120,128,128,128,128,128,128,128,128,128,128,1500,1750,2000
  C_OUTPUT=16-64
  for lt in true false; do
    start_cluster "c-$lt" 200 "{policy: weighted, long_tail: $lt, long_tail_quantile: 0.8}" \
      "normal-0 normal $SPEC" "normal-1 normal $SPEC" "normal-2 normal $SPEC" "longtail-3 long_tail $SPEC"
    # Warm-up with the same mix (another seed): fills the router's prompt-length window, so the
    # measured run has a long-tail threshold from its first request.
    bench "c-$lt-warmup" 60 --requests 64 --rate 40 --prompt-len "$C_PROMPT" --output-len 4 --seed 99
    routed_counts "$work/before"
    lt_before=$(metric_value bmad_coordinator_long_tail_requests_total)
    bench "c-$lt" 150 --requests "$C_REQ" --rate "$C_RATE" --prompt-len "$C_PROMPT" \
      --output-len "$C_OUTPUT" --seed 11 --report-split-at 1000
    routed_counts "$work/after"
    routed_c[$lt]=$(routed_delta "$work/before" "$work/after")
    long_tail_c[$lt]=$(awk -v a="${lt_before:-0}" -v b="$(metric_value bmad_coordinator_long_tail_requests_total)" \
      'BEGIN { printf "%d", b - a }')
    stop_all
  done
  echo "## c. Long-tail pool on vs off"
  echo
  echo "Three normal replicas and one long-tail replica, all alike: steps of 8 ms + 0.2 ms per"
  echo "sequence + 0.1 ms per prompt token (a 2000-token prompt is ~200 ms of prefill, in 512-token"
  echo "chunks of 51 ms each), 32 sequences per step. Poisson arrivals at $C_RATE requests/s, $C_REQ"
  echo "requests, outputs $C_OUTPUT tokens, prompts: 6/7 short (64..128 tokens), 1/7 long"
  echo "(1500, 1750 or 2000), same seed. router.policy weighted, long_tail_quantile 0.8. Each run"
  echo "follows a 64-request warm-up with the same prompt mix (so the router's rolling prompt-length"
  echo "window has a threshold from the first request); the routing counts below"
  echo "exclude it. With the pool off the long-tail replica is just a fourth replica."
  echo
  echo "| long_tail | short TTFT p50 ms | short TTFT p99 ms | short e2e p99 ms | long TTFT p50 ms | long TTFT p99 ms | all TTFT p99 ms | output tok/s | routed as long | routed (per replica) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  for lt in true false; do
    t=c-$lt
    echo "| $lt | $(f1 "$(j $t .short_prompts.ttft_ms.p50)") | $(f1 "$(j $t .short_prompts.ttft_ms.p99)") |" \
      "$(f1 "$(j $t .short_prompts.e2e_ms.p99)") | $(f1 "$(j $t .long_prompts.ttft_ms.p50)") |" \
      "$(f1 "$(j $t .long_prompts.ttft_ms.p99)") | $(f1 "$(j $t .ttft_ms.p99)") |" \
      "$(f1 "$(j $t .output_tokens_per_s)") | ${long_tail_c[$lt]:-0} | ${routed_c[$lt]} |"
  done
  echo
  echo "Requests: $(j c-true .short_prompts.succeeded) short, $(j c-true .long_prompts.succeeded) long" \
    "(split at 1000 prompt tokens, \`bmad bench http --report-split-at 1000\`)."
  echo
fi

# ---------------------------------------------------------------------------------------------
if [[ " $ONLY " == *" d "* ]]; then
  D_REQ=$((720 / SCALE))
  D_RATE=26
  # Two replicas of 4 sequences per 10 ms step, each refusing past 2 waiting: with 32-token
  # outputs they serve 25 requests/s between them.
  SPEC="10 0 0 4"
  d_runs="current"
  [ -n "$BASELINE_BIN" ] && d_runs="baseline current"
  # And one replica of 64 sequences per 50 ms step taking one request a step into its queue
  # (max_waiting 1), at about three quarters of what it serves: refusals come from offers
  # landing in the same step, not from a full replica.
  D2_REQ=$((450 / SCALE))
  for which in $d_runs; do
    if [ "$which" = baseline ]; then coordinator=$BASELINE_BIN/bmad-coordinator; else coordinator=$BIN/bmad-coordinator; fi
    COORDINATOR=$coordinator QUEUE_TIMEOUT_MS=5000 MAX_WAITING=2 \
      start_cluster "d-$which" 200 "{policy: weighted, long_tail: false}" "r-0 normal $SPEC" "r-1 normal $SPEC"
    bench "d-$which" 150 --requests "$D_REQ" --rate "$D_RATE" --prompt-len 16 --output-len 32 --seed 5
    stop_all
    COORDINATOR=$coordinator QUEUE_TIMEOUT_MS=5000 MAX_WAITING=1 \
      start_cluster "d2-$which" 200 "{policy: weighted, long_tail: false}" "r-0 normal 50 0 0 64"
    bench "d2-$which" 150 --requests "$D2_REQ" --rate 15 --prompt-len 16 --output-len 32-96 --seed 1
    routed_counts "$work/after"
    routed_d2[$which]=$(routed_delta /dev/null "$work/after")
    stop_all
  done
  echo "## d. Overload fairness"
  echo
  echo "Two fake replicas, 4 sequences per 10 ms step, \`scheduler.max_waiting\` 2 (each refuses a"
  echo "request while 2 wait): 25 requests/s of 32 output tokens between them. Poisson arrivals at"
  echo "$D_RATE requests/s (about 1.1x), $D_REQ requests, prompts of 16 tokens, same seed;"
  echo "\`coordinator.queue_timeout_ms\` 5000 (a request no replica takes in 5 s fails with 503)."
  echo "The coordinator's queue grows by about 2 requests a second."
  [ -n "$BASELINE_BIN" ] && echo "baseline: \`$BASELINE_BIN/bmad-coordinator\`; current: \`$BIN/bmad-coordinator\`."
  echo
  echo "| coordinator | succeeded | failed | output tok/s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | e2e max ms |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for which in $d_runs; do
    t=d-$which
    echo "| $which | $(j $t .succeeded) | $(j $t .failed) | $(f1 "$(j $t .output_tokens_per_s)") |" \
      "$(f1 "$(j $t .ttft_ms.p50)") | $(f1 "$(j $t .ttft_ms.p99)") | $(f1 "$(j $t .e2e_ms.p50)") |" \
      "$(f1 "$(j $t .e2e_ms.p99)") | $(f1 "$(j $t .e2e_ms.max)") |"
  done
  echo
  echo "One fake replica, 64 sequences per 50 ms step, \`scheduler.max_waiting\` 1: it takes one"
  echo "request a step into its queue. Poisson arrivals at 15 requests/s (about three quarters of what"
  echo "it serves), $D2_REQ requests, outputs 32-96 tokens, same seed; offers = routing decisions."
  echo
  echo "| coordinator | succeeded | failed | TTFT p50 ms | TTFT p99 ms | e2e p99 ms | offers |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  for which in $d_runs; do
    t=d2-$which
    echo "| $which | $(j $t .succeeded) | $(j $t .failed) | $(f1 "$(j $t .ttft_ms.p50)") |" \
      "$(f1 "$(j $t .ttft_ms.p99)") | $(f1 "$(j $t .e2e_ms.p99)") | ${routed_d2[$which]} |"
  done
  echo
fi

# ---------------------------------------------------------------------------------------------
if [[ " $ONLY " == *" e "* ]]; then
  E_REQ=$((720 / SCALE))
  E_RATE=28
  e_runs="current"
  [ -n "$BASELINE_BIN" ] && e_runs="baseline current"
  for which in $e_runs; do
    if [ "$which" = baseline ]; then coordinator=$BASELINE_BIN/bmad-coordinator; else coordinator=$BIN/bmad-coordinator; fi
    COORDINATOR=$coordinator MAX_WAITING=2 \
      start_cluster "e-$which" 200 "{policy: weighted, long_tail: false}" "r-0 normal 10 0 0 4" "r-1 normal 10 0 0 4"
    bench "e-$which" 150 --requests "$E_REQ" --rate "$E_RATE" --prompt-len 16 --output-len 32 --seed 5 \
      --urgent-share 0.2 --urgent-slo-ms 1000
    stop_all
  done
  echo "## e. Deadlines in the coordinator's queue"
  echo
  echo "The replicas of d (two, 4 sequences per 10 ms step, \`scheduler.max_waiting\` 2: 25"
  echo "requests/s of 32 output tokens between them). Poisson arrivals at $E_RATE requests/s (about"
  echo "1.1x), $E_REQ requests, prompts of 16 tokens, same seed; a fifth of them (drawn apart) carry"
  echo "\`slo_ms: 1000\`, the others the default (\`scheduler.default_slo_ms\` 5000), all of one class."
  echo "The queue grows by about 3 requests a second; nothing times out (60 s)."
  [ -n "$BASELINE_BIN" ] && echo "baseline: \`$BASELINE_BIN/bmad-coordinator\`; current: \`$BIN/bmad-coordinator\`."
  echo
  echo "| coordinator | urgent sent | urgent within 1000 ms | urgent TTFT p50 ms | urgent e2e p50 ms | urgent e2e p99 ms | others e2e p50 ms | others e2e p99 ms | output tok/s | failed |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for which in $e_runs; do
    t=e-$which
    echo "| $which | $(j $t .urgent.sent) | $(j $t .urgent.within_slo) | $(f1 "$(j $t .urgent.ttft_ms.p50)") |" \
      "$(f1 "$(j $t .urgent.e2e_ms.p50)") | $(f1 "$(j $t .urgent.e2e_ms.p99)") | $(f1 "$(j $t .relaxed.e2e_ms.p50)") |" \
      "$(f1 "$(j $t .relaxed.e2e_ms.p99)") | $(f1 "$(j $t .output_tokens_per_s)") | $(j $t .failed) |"
  done
  echo
fi

echo "## Raw \`bmad bench http\` output"
echo
for entry in "${raw[@]}"; do
  echo "### ${entry%%|*}"
  echo
  echo '```'
  head -n -1 "${entry#*|}"
  echo '```'
  echo
done
log "done in ${SECONDS}s"
