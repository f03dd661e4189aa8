#!/usr/bin/env bash
# What scoring a prompt costs: the same prompts sent twice to one replica (coordinator + worker
# under mpirun, 127.0.0.1), once as lm-evaluation-harness scores them (token ids, echo, logprobs
# 1, max_tokens 0: every position's log-probability) and once plain (max_tokens 1: the prefill
# and one token), for each scheduler.max_prompt_logprob_tokens given. Prompts are random token
# ids, distinct per request (the prefix cache finds nothing), CONCURRENCY in flight. Prints each
# run's prompt tokens/s and, per setting, scored over plain.
#
#   tests/bench/prompt_logprobs_bench.sh            # ROWS="64 512" REQUESTS=16 PROMPT_LEN=256
#
# Model: the 134M synthetic Llama (F16) of serve_sweep.sh, in $BMAD_BENCH_MODELS.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/bench/bench_lib.sh
BIN=${BMAD_BIN:-build/bin}
MODELS=${BMAD_BENCH_MODELS:-/tmp/bmad-bench-models}
MODEL=${MODEL:-$MODELS/synth-134m-f16.gguf}
ROWS=${ROWS:-64 512}
REQUESTS=${REQUESTS:-16}
PROMPT_LEN=${PROMPT_LEN:-256}
CONCURRENCY=${CONCURRENCY:-4}
THREADS=${THREADS:-$(nproc)}
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  "$BIN/bmad" model synth --out "$MODEL" --layers 12 --dim 768 --heads 12 --ffn 2048 \
    --vocab-from ../shared/models/llama-2-tiny-random.gguf --dtype f16 >/dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
work=$(mktemp -d)
pids=()
trap 'stop_all; rm -rf "$work"' EXIT

# drive URL MODE SEED: REQUESTS requests of PROMPT_LEN random ids (seeded: both modes send the
# same prompts), CONCURRENCY at a time, each bounded to 600 s; prints "seconds prompt_tokens failed".
drive() {
  python3 - "$1" "$2" "$3" "$REQUESTS" "$PROMPT_LEN" "$CONCURRENCY" <<'PY'
import json, random, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
url, mode, seed, n, length, conc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
rng = random.Random(seed)
prompts = [[1] + [rng.randrange(3, 32000) for _ in range(length - 1)] for _ in range(n)]
def one(prompt):
    body = {"prompt": prompt, "temperature": 0, "max_tokens": 1}
    if mode == "scored":
        body.update({"echo": True, "logprobs": 1, "max_tokens": 0})
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.load(r)
        if mode == "scored" and len(answer["choices"][0]["logprobs"]["token_logprobs"]) != len(prompt):
            return 0
        return answer["usage"]["prompt_tokens"]
    except Exception:
        return 0
start = time.monotonic()
with ThreadPoolExecutor(conc) as pool:
    done = list(pool.map(one, prompts))
print("%.3f %d %d" % (time.monotonic() - start, sum(done), done.count(0)))
PY
}

echo "| max_prompt_logprob_tokens | requests | prompt tokens | plain s | plain prompt tok/s | scored s | scored prompt tok/s | scored / plain | failed |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for rows in $ROWS; do
  start_bmad "$work" "$MODEL" "$THREADS" "scheduler: {max_batch_tokens: 512, max_prompt_logprob_tokens: $rows}"
  url=$BMAD_URL
  drive "$url" plain 7 >/dev/null  # warm-up
  read -r p_s p_tokens p_fail <<<"$(drive "$url" plain 1)"
  read -r s_s s_tokens s_fail <<<"$(drive "$url" scored 1)"
  python3 -c "
p_s, s_s, tokens = $p_s, $s_s, $p_tokens
print('| $rows | $REQUESTS | %d | %.2f | %.0f | %.2f | %.0f | %.2f | %d |' % (tokens, p_s, tokens / p_s, s_s, $s_tokens / s_s, ($s_tokens / s_s) / (tokens / p_s), $p_fail + $s_fail))"
  stop_all
done
echo
echo "model $(basename "$MODEL"), $THREADS threads, prompts of $PROMPT_LEN tokens, $CONCURRENCY in flight"
