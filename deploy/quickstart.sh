#!/usr/bin/env bash
# The main job: a local bmad cluster serving a model, with requests through it.
#
#   ./deploy/quickstart.sh [MODEL.gguf] [--keep]     start, send requests, stop (--keep: leave it up)
#   ./deploy/quickstart.sh --stop                    stop a cluster left running with --keep
#
# It installs what is missing, builds bmad, starts the coordinator and two worker replicas with
# mpirun (one in the long-tail pool), sends a few requests through the ZeroMQ socket and through
# the OpenAI-compatible HTTP API, prints the answers and the /metrics addresses, and stops
# everything. Without a model it writes a small random-weight one with `bmad model synth`: its text
# is noise, but every part of the path is real.
#
# Environment (for tests): BMAD_QUICKSTART_BIN=DIR uses binaries already built there (no install,
# no build); BMAD_QUICKSTART_STATE=DIR keeps logs and pid files there (default /tmp/bmad-quickstart).
set -euo pipefail
caller=$(pwd)  # a relative model path is relative to where the script was run from
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."
root=$(pwd)
state=${BMAD_QUICKSTART_STATE:-/tmp/bmad-quickstart}
model=""
keep=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --stop) exec ./deploy/cluster.sh stop --state "$state" ;;
    -h|--help) sed -n '2,12p' "$self"; exit 0 ;;
    -*) echo "quickstart: unknown flag $arg" >&2; exit 2 ;;
    /*) model=$arg ;;
    *) model=$caller/$arg ;;
  esac
done

if [ -n "${BMAD_QUICKSTART_BIN:-}" ]; then
  bin=$BMAD_QUICKSTART_BIN
  for b in bmad bmad-coordinator bmad-worker; do
    [ -x "$bin/$b" ] || { echo "quickstart: BMAD_QUICKSTART_BIN=$bin has no executable $b" >&2; exit 2; }
  done
else
  ./deploy/install-deps.sh --build-only  # the build and mpirun; the tests' tools are not needed
  echo "== building (first run: a few minutes)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target bmad bmad-coordinator bmad-worker >/dev/null
  bin=$root/build/bin
fi

mkdir -p "$state"
if [ -z "$model" ]; then
  model=$state/random-llama.gguf
  if [ ! -f "$model" ]; then
    "$bin/bmad" model synth --out "$model" --layers 4 --dim 256 --heads 8 --kv-heads 4 --ffn 512 \
      --vocab 4096 --ctx 1024 --seed 7 >/dev/null
  fi
  echo "== no model given: serving $model, a random-weight Llama (its text will be noise)"
fi
[ -f "$model" ] || { echo "quickstart: no such model file: $model" >&2; exit 2; }

# Free ports on 127.0.0.1 (so that another server or cluster on the machine is never in the way;
# a second quickstart with the same state directory, though, stops this one), below the
# kernel's ephemeral range, where the source port of some outgoing connection could take one
# between this check and the server's bind.
# free_port N: the first of N consecutive free ports (replica i's /metrics is worker_port + i)
# into `port`, none of them one picked before (`taken`): nothing listens on a port until the
# cluster starts, so a second pick could land on the first.
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "${ephemeral_low:-0}" -gt 12000 ] 2>/dev/null || ephemeral_low=32768
taken=" "
free_port() {
  local n=$1 p i
  while true; do
    p=$(( (RANDOM << 2 | RANDOM % 4) % (ephemeral_low - 10000 - n) + 10000 ))
    for ((i = 0; i < n; i++)); do
      [[ $taken == *" $((p + i)) "* ]] && continue 2
      (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && continue 2
    done
    for ((i = 0; i < n; i++)); do taken+="$((p + i)) "; done
    port=$p
    return
  done
}
free_port 1; http_port=$port
free_port 1; client_port=$port
free_port 1; worker_endpoint_port=$port
free_port 1; coordinator_metrics_port=$port
free_port 2; worker_metrics_port=$port
sets=(--set "model.path=$model" --set "coordinator.http_port=$http_port"
      --set "coordinator.client_endpoint=tcp://127.0.0.1:$client_port"
      --set "coordinator.worker_endpoint=tcp://127.0.0.1:$worker_endpoint_port"
      --set "metrics.coordinator_port=$coordinator_metrics_port" --set "metrics.worker_port=$worker_metrics_port")
config=$root/deploy/config/local.yaml
# Returns once both replicas are live; names a process that exits while starting, with its log.
# It runs in the background so that a signal to this script reaches it: its own trap stops what
# it launched. A `cluster.sh stop` from here while it still ran could come before its launches.
trap '[ $keep -eq 1 ] || ./deploy/cluster.sh stop --state "$state" >/dev/null' EXIT
interrupted=0
starting=""
trap 'interrupted=1; [ -z "$starting" ] || kill -TERM "$starting" 2>/dev/null || true' INT TERM HUP
./deploy/cluster.sh start --config "$config" "${sets[@]}" --state "$state" --bin "$bin" --wait 120 &
starting=$!
while :; do
  wait "$starting" && started=0 || started=$?
  kill -0 "$starting" 2>/dev/null || break  # else a signal cut the wait short
done
trap - INT TERM HUP
[ $interrupted -eq 0 ] || { keep=0; exit 130; }
[ "$started" -eq 0 ] || { echo "quickstart: stopping (the reason is above; logs in $state)" >&2; keep=0; exit 1; }

client=$("$bin/bmad" config get coordinator.client_endpoint "$config" "${sets[@]}")
echo
echo "== through the ZeroMQ socket: bmad generate --coordinator $client"
"$bin/bmad" generate --coordinator "$client" --prompt "Once upon a time" --max-tokens 24 --temperature 0
echo
echo "== through HTTP: POST /v1/completions"
curl -fsS --max-time 60 "http://127.0.0.1:$http_port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}'
echo
echo "== through HTTP: POST /v1/chat/completions (streaming)"
curl -fsSN --max-time 60 "http://127.0.0.1:$http_port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 4, "stream": true}'
echo
echo "== cluster status"
"$bin/bmad" status --coordinator "$client"
echo
echo "metrics: coordinator http://127.0.0.1:$http_port/metrics"
for f in "$state"/replica-*.log; do
  grep -o 'metrics=http[^ ]*' "$f" | head -n 1 | sed "s|^metrics=|  $(basename "$f" .log): |"
done
if [ $keep -eq 1 ]; then
  echo
  echo "cluster left running: http://127.0.0.1:$http_port   (stop it with ./deploy/quickstart.sh --stop)"
else
  echo
  echo "== stopping"
fi
