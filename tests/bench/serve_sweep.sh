#!/usr/bin/env bash
# Continuous batching with paged KV against the static-batching baseline, in-process with
# `bmad bench serve` (open-loop Poisson arrivals): for each scheduler and each arrival rate, the
# latency percentiles and throughput; then the highest rate each sustains with p99 end-to-end
# latency under TARGET_P99_MS, and p99 at a rate both ran.
#
#   tests/bench/serve_sweep.sh            # knobs: RATES_continuous, RATES_static, REQUESTS,
#                                         #        TARGET_P99_MS, PROMPT, OUTPUT, MODEL
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BMAD_BIN:-build/bin}
MODELS=${BMAD_BENCH_MODELS:-/tmp/bmad-bench-models}
MODEL=${MODEL:-$MODELS/synth-134m-f16.gguf}
REQUESTS=${REQUESTS:-40}
PROMPT=${PROMPT:-32-512}
OUTPUT=${OUTPUT:-32-128}
TARGET_P99_MS=${TARGET_P99_MS:-20000}
RATES_continuous=${RATES_continuous-0.5 1 1.5 2 2.5 3}  # set but empty: skip this scheduler
RATES_static=${RATES_static-0.25 0.5 0.75 1 1.5}
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  "$BIN/bmad" model synth --out "$MODEL" --layers 12 --dim 768 --heads 12 --ffn 2048 \
    --vocab-from ../shared/models/llama-2-tiny-random.gguf --dtype f16 >/dev/null
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "| scheduler | rate req/s | achieved req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | KV waste mean |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for sched in continuous static; do
  rates_var="RATES_$sched"
  for rate in ${!rates_var}; do
    line=$("$BIN/bmad" bench serve --model "$MODEL" --scheduler "$sched" --rate "$rate" \
      --requests "$REQUESTS" --prompt-len "$PROMPT" --output-len "$OUTPUT" 2>/dev/null | tail -n 1)
    echo "$sched $rate $line" >>"$results"
    python3 - "$sched" "$rate" "$line" <<'PY'
import json, sys
s, rate, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print("| %s | %s | %.2f | %.1f | %.0f | %.0f | %.0f | %.0f | %.2f%% |" % (
    s, rate, j["requests_per_s"], j["output_tokens_per_s"], j["ttft_ms"]["p50"], j["ttft_ms"]["p99"],
    j["e2e_ms"]["p50"], j["e2e_ms"]["p99"], 100 * j["kv_waste_mean"]))
PY
  done
done
python3 - "$results" "$TARGET_P99_MS" <<'PY'
import json, sys
best = {}
p99 = {}
for line in open(sys.argv[1]):
    sched, rate, j = line.split(" ", 2)
    j = json.loads(j)
    p99[(sched, float(rate))] = j["e2e_ms"]["p99"]
    if j["e2e_ms"]["p99"] <= float(sys.argv[2]):
        best[sched] = max(best.get(sched, 0.0), float(rate))
print()
print("highest rate with p99 end-to-end latency under %s ms: continuous %s req/s, static %s req/s"
      % (sys.argv[2], best.get("continuous", "none"), best.get("static", "none")))
if best.get("static") and best.get("continuous"):
    print("ratio: %.2f x" % (best.get("continuous", 0) / best["static"]))
common = sorted(set(r for s, r in p99 if s == "continuous") & set(r for s, r in p99 if s == "static"))
for r in common:
    print("at %g req/s: p99 e2e continuous %.0f ms, static %.0f ms" % (r, p99[("continuous", r)], p99[("static", r)]))
PY
echo
echo "model $(basename "$MODEL"), $REQUESTS requests per run, prompt $PROMPT, output $OUTPUT, $(nproc) cores"
