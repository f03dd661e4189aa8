#!/usr/bin/env bash
# Continuous batching with paged KV against the static-batching baseline, in-process with
# `bmad bench serve` (open-loop Poisson arrivals): for each scheduler and each arrival rate, the
# latency percentiles and throughput; then the highest rate each sustains with p99 end-to-end
# latency under TARGET_P99_MS and with p99 time to first token under TARGET_TTFT_P99_MS (each
# may list several targets, "1000 2000 4000": one line per target; a rate counts only if the
# run's throughput reached 90% of the arrival rate it offered), and p99 at a rate both ran.
#
#   tests/bench/serve_sweep.sh            # knobs: RATES_continuous, RATES_static, REQUESTS,
#                                         #        TARGET_P99_MS, TARGET_TTFT_P99_MS, PROMPT,
#                                         #        OUTPUT, MODEL
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BMAD_BIN:-build/bin}
MODELS=${BMAD_BENCH_MODELS:-/tmp/bmad-bench-models}
MODEL=${MODEL:-$MODELS/synth-134m-f16.gguf}
REQUESTS=${REQUESTS:-40}
PROMPT=${PROMPT:-32-512}
OUTPUT=${OUTPUT:-32-128}
TARGET_P99_MS=${TARGET_P99_MS:-20000}
TARGET_TTFT_P99_MS=${TARGET_TTFT_P99_MS:-2000}
RATES_continuous=${RATES_continuous-0.5 1 1.5 2 2.5 3}  # set but empty: skip this scheduler
RATES_static=${RATES_static-0.25 0.5 0.75 1 1.5}
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  "$BIN/bmad" model synth --out "$MODEL" --layers 12 --dim 768 --heads 12 --ffn 2048 \
    --vocab-from ../shared/models/llama-2-tiny-random.gguf --dtype f16 >/dev/null
fi
results=$(mktemp)
trap 'rm -f "$results" "$results.out" "$results.err"' EXIT
echo "| scheduler | rate req/s | achieved req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | KV waste mean |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for sched in continuous static; do
  rates_var="RATES_$sched"
  for rate in ${!rates_var}; do
    if ! "$BIN/bmad" bench serve --model "$MODEL" --scheduler "$sched" --rate "$rate" \
      --requests "$REQUESTS" --prompt-len "$PROMPT" --output-len "$OUTPUT" >"$results.out" 2>"$results.err"; then
      echo "serve_sweep: bench serve --scheduler $sched --rate $rate failed:" >&2
      tail -n 5 "$results.err" >&2
      exit 1
    fi
    line=$(tail -n 1 "$results.out")
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
python3 - "$results" "$TARGET_P99_MS" "$TARGET_TTFT_P99_MS" <<'PY'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    sched, rate, j = line.split(" ", 2)
    runs[(sched, float(rate))] = json.loads(j)

# A rate is sustained only when the run kept up with it: its throughput is at least this share
# of the arrival rate the run actually offered, (requests - 1) / the last arrival's time (a
# finite Poisson draw is off the nominal rate by about 1/sqrt(requests)). The run's end also
# waits for the last request's service, which costs a run that keeps up a few percent (0.94 or
# more at 80 requests); a queue growing without bound reaches only capacity / offered rate, so
# this rejects rates above about 1.1x capacity. Without it, such a queue passes any p99 target
# when the run is too short for it to grow long enough.
KEEPS_UP = 0.9

def offered(run, rate):
    span = run.get("arrival_span_s", 0)
    return (run["requests"] - 1) / span if span > 0 and run["requests"] > 1 else rate

def capacity(metric, target):
    # The highest rate run whose p99 of `metric` is within target and that kept up; every lower
    # rate must pass too, so a lucky run above a failing one does not count.
    best = {}
    for sched in ("continuous", "static"):
        for rate in sorted(r for s, r in runs if s == sched):
            run = runs[(sched, rate)]
            if run[metric]["p99"] > target or (rate > 0 and run["requests_per_s"] < KEEPS_UP * offered(run, rate)):
                break
            best[sched] = rate
    return best

print()
targets = [("e2e_ms", "end-to-end latency", float(t)) for t in sys.argv[2].split()] + \
          [("ttft_ms", "time to first token", float(t)) for t in sys.argv[3].split()]
for metric, name, target in targets:
    best = capacity(metric, target)
    line = "highest rate with p99 %s under %g ms: continuous %s req/s, static %s req/s" % (
        name, target, best.get("continuous", "none"), best.get("static", "none"))
    if best.get("static") and best.get("continuous"):
        line += "; ratio %.2f x" % (best["continuous"] / best["static"])
    print(line)
common = sorted(set(r for s, r in runs if s == "continuous") & set(r for s, r in runs if s == "static"))
for r in common:
    print("at %g req/s: p99 e2e continuous %.0f ms, static %.0f ms; p99 TTFT continuous %.0f ms, static %.0f ms"
          % (r, runs[("continuous", r)]["e2e_ms"]["p99"], runs[("static", r)]["e2e_ms"]["p99"],
             runs[("continuous", r)]["ttft_ms"]["p99"], runs[("static", r)]["ttft_ms"]["p99"]))
PY
echo
echo "model $(basename "$MODEL"), $REQUESTS requests per run, prompt $PROMPT, output $OUTPUT, $(nproc) cores"
