#!/usr/bin/env bash
# Starts and stops a bmad cluster from one config file: the coordinator, then every replica as
# its own `mpirun` job (one job per replica, so one replica's death cannot abort another), on
# this host or over the config's cluster.hostfile.
#
#   deploy/cluster.sh start --config FILE [--set section.key=value]... [--state DIR] [--bin DIR]
#   deploy/cluster.sh stop  [--state DIR]        # drains: SIGTERM, waits, then SIGKILL
#   deploy/cluster.sh status [--state DIR]
#
# The state directory (default /tmp/bmad-cluster) holds the processes' logs and pids. Ctrl-C or
# SIGTERM to `start --foreground` stops everything cleanly.
set -euo pipefail

cmd=${1:-}
shift || true
state=/tmp/bmad-cluster
config=""
bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
foreground=0
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --state) state=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --foreground) foreground=1; shift ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

get() { "$bin/bmad" config get "$1" "$config" "${sets[@]}"; }

stop_all() {
  [ -d "$state" ] || return 0
  local pids=()
  for f in "$state"/*.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  [ ${#pids[@]} -eq 0 ] && return 0
  # Replicas first (they drain their running requests), then the coordinator.
  for f in "$state"/replica-*.pid; do [ -f "$f" ] && kill -TERM -- "-$(cat "$f")" 2>/dev/null || true; done
  for _ in $(seq 100); do
    alive=0
    for f in "$state"/replica-*.pid; do [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  [ -f "$state/coordinator.pid" ] && kill -TERM "$(cat "$state/coordinator.pid")" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$(cat "$state/coordinator.pid" 2>/dev/null || echo 0)" 2>/dev/null || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  rm -f "$state"/*.pid
}

case "$cmd" in
  start)
    [ -n "$config" ] || { echo "cluster.sh start: --config is required" >&2; exit 2; }
    "$bin/bmad" config check --quiet "$config" "${sets[@]}" >/dev/null || { "$bin/bmad" config check "$config" "${sets[@]}" >&2; exit 2; }
    mkdir -p "$state"
    stop_all
    normal=$(get cluster.normal_replicas)
    long_tail=$(get cluster.long_tail_replicas)
    hostfile=$(get cluster.hostfile)
    tp=$(get parallel.tp)
    pp=$(get parallel.pp)
    ranks=$((tp * pp))
    setsid "$bin/bmad-coordinator" --config "$config" "${sets[@]}" >"$state/coordinator.log" 2>&1 &
    echo $! >"$state/coordinator.pid"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpi_flags=(--bind-to none -x OPENBLAS_NUM_THREADS=1 --mca btl self,vader,tcp)
    [ "$ranks" -gt "$(nproc)" ] && mpi_flags+=(--oversubscribe)
    [ -n "$hostfile" ] && mpi_flags+=(--hostfile "$hostfile")
    index=0
    for pool in normal long_tail; do
      count=$normal
      [ "$pool" = long_tail ] && count=$long_tail
      for i in $(seq 0 $((count - 1))); do
        id="$pool-$i"
        setsid mpirun -np "$ranks" "${mpi_flags[@]}" "$bin/bmad-worker" --config "$config" "${sets[@]}" \
          --set "worker.replica_id=$id" --set "worker.pool=$pool" --replica-index "$index" \
          >"$state/replica-$id.log" 2>&1 &
        echo $! >"$state/replica-$id.pid"
        index=$((index + 1))
      done
    done
    echo "started coordinator and $index replicas; logs in $state"
    if [ $foreground -eq 1 ]; then
      trap 'stop_all; exit 0' INT TERM
      while kill -0 "$(cat "$state/coordinator.pid")" 2>/dev/null; do sleep 1; done
      stop_all
    fi
    ;;
  stop)
    stop_all
    echo "stopped"
    ;;
  status)
    for f in "$state"/*.pid; do
      [ -f "$f" ] || continue
      name=$(basename "$f" .pid)
      if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: stopped"; fi
    done
    ;;
  *)
    echo "usage: deploy/cluster.sh start|stop|status [--config FILE] [--set k=v]... [--state DIR]" >&2
    exit 2
    ;;
esac
