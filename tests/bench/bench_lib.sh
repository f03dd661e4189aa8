# What the benchmark scripts share; sourced, not run.

# free_ports N: N distinct free ports on 127.0.0.1 (all held at once while picked, so no two are
# the same).
free_ports() {
  python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# stop_all: TERM to every pid in the caller's `pids` array, waits for them, empties it.
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

# wait_ready URL: until URL answers 2xx, at most a minute.
wait_ready() {
  for _ in $(seq 600); do curl -sf "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "not ready: $1" >&2
  return 1
}

# start_bmad WORK MODEL THREADS [YAML LINE...]: a coordinator and one replica (mpirun -np 1) of
# MODEL on free 127.0.0.1 ports, their config (with the extra YAML lines) and logs in WORK, pids
# in the caller's `pids`; waits until the coordinator is ready and sets BMAD_URL to its HTTP
# URL. Not in a subshell (`$(start_bmad ...)`): the pids would not reach the caller.
start_bmad() {
  local work=$1 model=$2 threads=$3 http cm wm client worker
  shift 3
  read -r http cm wm client worker <<<"$(free_ports 5)"
  {
    echo "model: {path: $model}"
    echo "coordinator: {client_endpoint: \"tcp://127.0.0.1:$client\", worker_endpoint: \"tcp://127.0.0.1:$worker\", http_port: $http}"
    echo "worker: {threads: $threads}"
    echo "cache: {kv_bytes: 256MiB}"
    echo "metrics: {coordinator_port: $cm, worker_port: $wm}"
    for line in "$@"; do echo "$line"; done
  } >"$work/bmad.yaml"
  "$BIN/bmad-coordinator" --config "$work/bmad.yaml" >"$work/coord.log" 2>&1 &
  pids+=($!)
  mpirun -np 1 --bind-to none "$BIN/bmad-worker" --config "$work/bmad.yaml" --set worker.replica_id=r0 \
    >"$work/worker.log" 2>&1 &
  pids+=($!)
  BMAD_URL="http://127.0.0.1:$http"
  wait_ready "$BMAD_URL/ready"
}
