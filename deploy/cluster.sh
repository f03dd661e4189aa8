#!/usr/bin/env bash
# Starts and stops a bmad cluster from one config file: the coordinator, then every replica as
# its own `mpirun` job (one job per replica, so one replica's death cannot abort another), on
# this host or over the config's cluster.hostfile.
#
#   deploy/cluster.sh start --config FILE [--set section.key=value]... [--state DIR] [--bin DIR]
#                           [--wait SECONDS] [--foreground]
#   deploy/cluster.sh stop  [--state DIR]        # drains: coordinator, then replicas; SIGKILL last
#   deploy/cluster.sh status [--state DIR]        # exit 3 when nothing of a cluster runs there
#   deploy/cluster.sh plan  --config FILE [--set ...]   # print what `start` would run (starts
#                                                       # nothing; writes the replicas' hostfiles)
#
# The state directory (default /tmp/bmad-cluster) holds the processes' logs and pids. `start`
# returns once every replica is live (exit 0), or once a process has exited while starting (that
# process named with the end of its log, everything stopped, exit 1); after --wait seconds
# (default 300; 0: do not wait) it says how many are live and exits 3, leaving the rest starting
# (with --foreground it goes on waiting for the coordinator instead). Ctrl-C, SIGTERM or SIGHUP
# while it starts, or to `start --foreground` later, stops everything cleanly; a coordinator
# that exits on its own under --foreground stops the replicas, and the script exits with its
# status. `start` checks everything (the config, the hostfile, `bmad model check`) before it
# stops a cluster already running, and keeps that cluster's logs as *.log.1. The pid files
# hold each process's pid and start time, and every process started carries a random token in
# its environment: `stop` signals nothing else.
set -euo pipefail

cmd=${1:-}
shift || true
state=/tmp/bmad-cluster
config=""
bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
foreground=0
wait_s=300
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config|--set|--state|--bin|--wait)
      [ $# -ge 2 ] || { echo "cluster.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --config) config=$2 ;;
        --set) sets+=(--set "$2") ;;
        --state) state=$2 ;;
        --bin) bin=$2 ;;
        --wait) wait_s=$2 ;;
      esac
      shift 2 ;;
    --foreground) foreground=1; shift ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

get() { "$bin/bmad" config get "$1" "$config" "${sets[@]}"; }

# The fields of /proc/$1/stat after the command name (which may hold spaces and parentheses),
# into the array `stat_fields`: [0] state, [3] session, [19] start time.
read_stat() {
  local line
  # Braces: a redirection that fails (the process just exited) is reported before a
  # 2>/dev/null on the same command takes effect.
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
  read -ra stat_fields <<<"${line##*) }"
}

# running PID: the process exists and has not exited (a zombie whose parent has not reaped it
# yet has).
running() {
  kill -0 "$1" 2>/dev/null || return 1
  read_stat "$1" || return 0
  [ "${stat_fields[0]}" != Z ]
}

# The pid a pid file records, if that process is still the one `start` launched: the file
# holds "PID STARTTIME", and a pid the system has since given to another process has another
# start time. Nothing else is ever signalled (a stale file, or one someone else wrote).
pid_of() {
  local pid started
  [ -f "$1" ] || return 1
  read -r pid started <"$1" 2>/dev/null || return 1
  [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] && [ -n "${started:-}" ] || return 1
  read_stat "$pid" || return 1
  [ "${stat_fields[19]}" = "$started" ] || return 1
  echo "$pid"
}

# Records the process $2 in the pid file $1 (one that already exited is recorded as gone:
# wait_live names it with its log).
record_pid() {
  if read_stat "$2"; then echo "$2 ${stat_fields[19]}"; else echo "$2 gone"; fi >"$1"
}

alive() { local p; p=$(pid_of "$1") && running "$p"; }

# The session a pid file's process led, to sweep at the end of a stop: its pid while it is the
# recorded process, and also once it has exited (mpirun killed while a rank lives on: the kernel
# gives no process a pid that is still some session's id, so nothing else can hold it); nothing
# when that pid now belongs to another process.
session_of() {
  local pid started
  [ -f "$1" ] || return 1
  read -r pid started <"$1" 2>/dev/null || return 1
  [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] || return 1
  if read_stat "$pid"; then
    [ "${stat_fields[19]}" = "${started:-}" ] || return 1
  fi
  echo "$pid"
}

# The token `start` puts in the environment of everything it launches (kept in the state
# directory; empty for a state directory of an older cluster.sh). A pid file's session can
# outlive its processes: after a crash, the pid may go to another program that leads a session
# of its own, and its processes would be swept with ours. Only processes carrying the token are.
cluster_token() { cat "$state/token" 2>/dev/null || true; }

# The processes still running in any of the sessions given after the token $1 (each process
# `start` launches leads a session of its own, setsid, which holds everything it started: Open
# MPI puts each rank in a process group of its own, so the group of mpirun alone would miss the
# ranks), and carrying the token when there is one. One pass over /proc for them all.
session_members() {
  local f p sid token=$1
  shift
  for f in /proc/[0-9]*/stat; do
    p=${f#/proc/}
    p=${p%/stat}
    read_stat "$p" || continue
    [ "${stat_fields[0]}" != Z ] || continue
    for sid in "$@"; do
      if [ "${stat_fields[3]}" = "$sid" ]; then
        if [ -z "$token" ] || grep -qzx "BMAD_CLUSTER_TOKEN=$token" "/proc/$p/environ" 2>/dev/null; then echo "$p"; fi
        break
      fi
    done
  done
  return 0
}

# The state directory holds the pid files that decide what `stop` signals: it must be this
# user's, and not writable by anyone else.
# The config as `config check` sees it; its errors (once) and exit 2 when it is not valid.
check_config() {
  local errors
  if ! errors=$("$bin/bmad" config check --quiet "$config" "${sets[@]}" 2>&1 >/dev/null); then
    printf '%s\n' "$errors" >&2
    exit 2
  fi
}

# The model serves under the config: it opens, and the parallel layout splits it (a missing or
# broken file, or parallel.tp not dividing its heads, would stop every new process only after
# the running cluster was stopped).
check_model() {
  local errors
  if ! errors=$("$bin/bmad" model check --config "$config" "${sets[@]}" 2>&1 >/dev/null); then
    echo "cluster.sh start: ${errors#bmad model check: }" >&2
    exit 2
  fi
}

check_state_dir() {
  if [ -L "$state" ] || { [ -e "$state" ] && ! [ -O "$state" ]; }; then
    echo "cluster.sh: the state directory $state is a symbolic link or belongs to another user" >&2
    exit 2
  fi
  if [ -d "$state" ] && [ -n "$(find "$state" -maxdepth 0 -perm /022)" ]; then
    echo "cluster.sh: others can write to the state directory $state: chmod go-w it or pick another" >&2
    exit 2
  fi
}

# Waits until the coordinator counts $1 live replicas, for at most wait_s seconds. A process
# that exits meanwhile will not come up: it is named with the end of its log, everything is
# stopped, and the script exits 1.
wait_live() {
  local want=$1 endpoint live=0 f name deadline=$((SECONDS + wait_s))
  # Asked on this host: an endpoint bound on every interface is reached on the loopback one.
  # (Called in an `||` list, where set -e does not act: a failure is checked here.)
  endpoint=$(get coordinator.client_endpoint | sed -E 's#//(0\.0\.0\.0|\*):#//127.0.0.1:#')
  [ -n "$endpoint" ] || { echo "cluster.sh: cannot read coordinator.client_endpoint" >&2; stop_all; exit 2; }
  echo "waiting for $want replicas to register (at most $wait_s s)"
  while [ $SECONDS -lt $deadline ]; do
    for f in "$state"/*.pid; do
      [ -f "$f" ] || continue
      alive "$f" && continue
      name=$(basename "$f" .pid)
      echo "cluster.sh: $name exited while starting; the end of $state/$name.log:" >&2
      tail -n 30 "$state/$name.log" >&2
      stop_all
      exit 1
    done
    # Until the coordinator listens, status fails: that is "not yet".
    live=$("$bin/bmad" status --coordinator "$endpoint" --timeout-ms 1000 2>/dev/null |
             sed -n 's/.*(\([0-9]*\) live).*/\1/p' || true)
    [ "${live:-0}" -ge "$want" ] && { echo "$want replicas live"; return 0; }
    sleep 0.2
  done
  echo "cluster.sh: ${live:-0} of $want replicas live after $wait_s s; the rest are still starting (logs in $state)" >&2
  return 3
}

# Waits up to $1 seconds for every session given after it to hold none of the token $2's
# processes.
wait_gone() {
  local deadline=$((SECONDS + $1)) token=$2
  shift 2
  while [ -n "$(session_members "$token" "$@")" ]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
  return 0
}

# Drains, then stops: the coordinator first (it refuses new requests and waits, up to
# coordinator.drain_timeout_ms as `start` recorded it, for the in-flight ones, which the
# still-running replicas finish), then every replica (SIGUSR1 to its mpirun, which forwards it
# to every rank at once: the leader drains and stops its ranks; a SIGTERM mpirun would turn into
# SIGKILL two seconds later), then SIGKILL to whatever is left.
stop_all() {
  [ -d "$state" ] || return 0
  local sessions=() replicas=() f p coordinator drain_ms=10000 token
  token=$(cluster_token)
  for f in "$state"/replica-*.pid; do p=$(pid_of "$f") && replicas+=("$p"); done
  coordinator=$(pid_of "$state/coordinator.pid") || coordinator=""
  # Without a token (an older cluster.sh started it), only the sessions of processes still
  # verified as launched.
  for f in "$state"/*.pid; do
    if [ -n "$token" ]; then p=$(session_of "$f"); else p=$(pid_of "$f"); fi && sessions+=("$p")
  done
  if [ ${#sessions[@]} -gt 0 ]; then
    [ -f "$state/drain_ms" ] && drain_ms=$(cat "$state/drain_ms")
    if [ -n "$coordinator" ]; then
      kill -TERM "$coordinator" 2>/dev/null || true
      # Its drain, and 5 s to stop after it.
      wait_gone $((drain_ms / 1000 + 5)) "$token" "$coordinator" ||
        echo "cluster.sh: the coordinator did not stop in $((drain_ms / 1000 + 5)) s" >&2
    fi
    for p in "${replicas[@]}"; do kill -USR1 "$p" 2>/dev/null || true; done
    if [ ${#replicas[@]} -gt 0 ]; then
      wait_gone 10 "$token" "${replicas[@]}" || echo "cluster.sh: replicas still running after 10 s: killing them" >&2
    fi
    # Whatever is left of each session, ranks included (also of a session whose leader, mpirun,
    # has already gone).
    for f in $(session_members "$token" "${sessions[@]}"); do kill -KILL "$f" 2>/dev/null || true; done
    wait_gone 5 "$token" "${sessions[@]}" || echo "cluster.sh: processes of sessions ${sessions[*]} survived SIGKILL" >&2
  fi
  rm -f "$state"/*.pid "$state/token"
}

# Where each replica's ranks run. Sets `plan_ids`, `plan_pools`, `plan_hosts` (one
# "host:slots,host:slots" entry per replica, empty without a hostfile) and `plan_devices` (the
# CUDA_VISIBLE_DEVICES a replica's ranks get, or empty). With a hostfile, replicas take
# consecutive slots (one slot per rank) and never share a host they do not fit in: a replica
# that fits one host stays on one host, a bigger one starts on a fresh host, so two replicas
# never use the same GPU. Without one, every replica runs here and takes the next `ranks` GPUs
# when worker.backend is cuda.
plan() {
  local normal long_tail hostfile backend pool count i index=0
  normal=$(get cluster.normal_replicas)
  long_tail=$(get cluster.long_tail_replicas)
  hostfile=$(get cluster.hostfile)
  backend=$(get worker.backend)
  ranks=$(( $(get parallel.tp) * $(get parallel.pp) ))
  plan_ids=() plan_pools=() plan_hosts=() plan_devices=()
  local hosts=() slots=() line host rest n
  if [ -n "$hostfile" ]; then
    [ -f "$hostfile" ] || { echo "cluster.sh: cluster.hostfile $hostfile does not exist" >&2; exit 2; }
    while read -r line || [ -n "$line" ]; do
      line=${line%%#*}
      read -r host rest <<<"$line" || true
      [ -n "${host:-}" ] || continue
      n=1
      [[ ${rest:-} =~ (^|[[:space:]])slots=([0-9]+) ]] && n=${BASH_REMATCH[2]}
      hosts+=("$host")
      slots+=("$n")
    done <"$hostfile"
    [ ${#hosts[@]} -gt 0 ] || { echo "cluster.sh: $hostfile lists no host" >&2; exit 2; }
  fi
  local h=0 used=0 need take free chunks first_offset devices
  for pool in normal long_tail; do
    count=$normal
    [ "$pool" = long_tail ] && count=$long_tail
    for ((i = 0; i < count; i++, index++)); do
      plan_ids+=("$pool-$i")
      plan_pools+=("$pool")
      if [ ${#hosts[@]} -eq 0 ]; then
        plan_hosts+=("")
        devices=""
        if [ "$backend" = cuda ]; then
          devices=$(seq -s, $((index * ranks)) $((index * ranks + ranks - 1)))
        fi
        plan_devices+=("$devices")
        continue
      fi
      need=$ranks chunks="" first_offset=-1
      while [ "$need" -gt 0 ]; do
        if [ "$h" -ge ${#hosts[@]} ]; then
          echo "cluster.sh: $hostfile has too few slots for ${normal} + ${long_tail} replicas of $ranks ranks" >&2
          exit 2
        fi
        free=$(( ${slots[$h]} - used ))
        # Move to the next host when this one is full, or when the replica would have to share
        # it while starting mid-host.
        if [ "$free" -le 0 ] || { [ "$used" -gt 0 ] && [ "$need" -gt "$free" ]; }; then
          h=$((h + 1)) used=0
          continue
        fi
        take=$(( need < free ? need : free ))
        [ "$first_offset" -lt 0 ] && first_offset=$used
        chunks+="${chunks:+,}${hosts[$h]}:$take"
        used=$((used + take)) need=$((need - take))
      done
      plan_hosts+=("$chunks")
      # A replica sharing its host starts at GPU `offset` there: say so to its ranks.
      devices=""
      if [ "$backend" = cuda ] && [[ $chunks != *,* ]] && [ "$ranks" -lt "${slots[$h]}" ]; then
        devices=$(seq -s, "$first_offset" $((first_offset + ranks - 1)))
      fi
      plan_devices+=("$devices")
    done
  done
}

# The mpirun command of replica $1 (index into the plan), into the array `replica_cmd`.
replica_command() {
  local k=$1 chunk parts
  replica_cmd=(mpirun -np "$ranks" --bind-to none -x OPENBLAS_NUM_THREADS=1 --mca btl "self,vader,tcp")
  if [ -n "${plan_hosts[$k]}" ]; then
    : >"$state/hosts-${plan_ids[$k]}"
    IFS=, read -ra parts <<<"${plan_hosts[$k]}"
    for chunk in "${parts[@]}"; do echo "${chunk%:*} slots=${chunk##*:}" >>"$state/hosts-${plan_ids[$k]}"; done
    replica_cmd+=(--hostfile "$state/hosts-${plan_ids[$k]}")
    # Every replica's mpirun runs here, and replicas share hosts: each job gets its own session
    # directory as below, under /tmp (the state directory need not exist on the other hosts;
    # Open MPI creates the path).
    replica_cmd+=(--mca orte_tmpdir_base "/tmp/bmad-ompi-$(id -u)-$(cksum <<<"$state" | cut -d' ' -f1)/${plan_ids[$k]}")
  else
    # Jobs on this host get their own session directory: Open MPI 4 jobs sharing
    # /tmp/ompi.<host>.<uid> race when one starts while another creates or removes it
    # ("mkdir ... File exists", open-mpi/ompi#8510).
    mkdir -p "$state/ompi-${plan_ids[$k]}"
    replica_cmd+=(--mca orte_tmpdir_base "$state/ompi-${plan_ids[$k]}")
    # Without a hostfile Open MPI gives this host one slot per physical core, not per hardware
    # thread (a 4-vCPU VM of 2 SMT cores has 2): let the ranks share them.
    replica_cmd+=(--oversubscribe)
  fi
  if [ -n "${plan_devices[$k]}" ]; then
    replica_cmd=(env "CUDA_VISIBLE_DEVICES=${plan_devices[$k]}" "${replica_cmd[@]}" -x CUDA_VISIBLE_DEVICES)
  fi
  replica_cmd+=("$bin/bmad-worker" --config "$config" "${sets[@]}" --set "worker.replica_id=${plan_ids[$k]}"
                --set "worker.pool=${plan_pools[$k]}" --replica-index "$k")
}

case "$cmd" in
  plan)
    # What `start` would run, without running it.
    [ -n "$config" ] || { echo "cluster.sh plan: --config is required" >&2; exit 2; }
    check_config
    check_state_dir
    mkdir -p -m 700 "$state"
    check_state_dir  # again: someone else could have made it between the check and mkdir
    plan
    printf 'coordinator:'; printf ' %q' "$bin/bmad-coordinator" --config "$config" "${sets[@]}"; echo
    for k in "${!plan_ids[@]}"; do
      replica_command "$k"
      printf '%s [%s]:' "${plan_ids[$k]}" "${plan_hosts[$k]:-this host}"
      printf ' %q' "${replica_cmd[@]}"
      echo
    done
    ;;
  start)
    [ -n "$config" ] || { echo "cluster.sh start: --config is required" >&2; exit 2; }
    check_config
    [[ $wait_s =~ ^[0-9]+$ ]] || { echo "cluster.sh start: --wait takes whole seconds, not '$wait_s'" >&2; exit 2; }
    check_state_dir
    mkdir -p -m 700 "$state"
    check_state_dir  # again: someone else could have made it between the check and mkdir
    # Everything checked before a cluster already running is stopped: a bad hostfile or model
    # must not take it down and start nothing.
    plan
    check_model
    drain_ms=$(get coordinator.drain_timeout_ms)
    stop_all  # (with the drain it was started with)
    # The stopped cluster's logs are kept, one generation back.
    for f in "$state"/*.log; do
      if [ -f "$f" ]; then mv -f "$f" "$f.1"; fi
    done
    echo "$drain_ms" >"$state/drain_ms"
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    (umask 077 && echo "$token" >"$state/token")
    export BMAD_CLUSTER_TOKEN=$token
    # From the first launch on, an interruption (Ctrl-C, SIGTERM, the terminal going away) or a
    # failure of this script stops whatever was started: for --foreground that is the way to
    # stop it (exit 0), at any time; otherwise the start was cut short (130).
    stopped_code=130
    [ $foreground -eq 1 ] && stopped_code=0
    trap 'trap "" INT TERM HUP; stop_all; exit $stopped_code' INT TERM HUP
    trap 'stop_all' EXIT
    setsid "$bin/bmad-coordinator" --config "$config" "${sets[@]}" >"$state/coordinator.log" 2>&1 &
    coordinator_pid=$!
    record_pid "$state/coordinator.pid" $coordinator_pid
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    for k in "${!plan_ids[@]}"; do
      replica_command "$k"
      setsid "${replica_cmd[@]}" >"$state/replica-${plan_ids[$k]}.log" 2>&1 &
      record_pid "$state/replica-${plan_ids[$k]}.pid" $!
    done
    index=${#plan_ids[@]}
    echo "started coordinator and $index replicas; logs in $state"
    waited=0
    if [ "$wait_s" -gt 0 ]; then wait_live "$index" || waited=$?; fi
    if [ $foreground -eq 0 ]; then
      # Started (or still starting, exit 3): the cluster outlives this script.
      trap - INT TERM HUP EXIT
      [ $waited -ne 0 ] && exit $waited
      exit 0
    fi
    # `wait` returns as soon as a signal arrives, so the trap runs at once.
    while alive "$state/coordinator.pid"; do sleep 1 & wait $! || true; done
    # The coordinator ended without this script being asked to stop: its exit status is the
    # script's, so that a supervisor (systemd's Restart=on-failure) sees a crash as one.
    coordinator_status=0
    wait "$coordinator_pid" || coordinator_status=$?
    trap - EXIT
    stop_all
    if [ $coordinator_status -ne 0 ]; then
      echo "cluster.sh: the coordinator exited with status $coordinator_status; the end of $state/coordinator.log:" >&2
      tail -n 30 "$state/coordinator.log" >&2 || true
      exit $coordinator_status
    fi
    ;;
  stop)
    check_state_dir
    stop_all
    echo "stopped"
    ;;
  status)
    check_state_dir
    # (3, as an init script's status says "not running")
    [ -d "$state" ] || { echo "no cluster started with the state directory $state"; exit 3; }
    running=0 listed=0
    for f in "$state"/*.pid; do
      [ -f "$f" ] || continue
      listed=1
      name=$(basename "$f" .pid)
      if alive "$f"; then
        echo "$name: running (pid $(pid_of "$f"))"
        running=1
      else
        echo "$name: stopped"
      fi
    done
    if [ $listed -eq 0 ]; then
      # stop (and a start that failed) remove the pid files: the logs say which it was.
      echo "no cluster running from $state (stopped, or its start failed: see its *.log)"
    fi
    [ $running -eq 1 ] || exit 3
    ;;
  *)
    echo "usage: deploy/cluster.sh start|stop|status|plan [--config FILE] [--set k=v]... [--state DIR] [--wait S] [--foreground] [--bin DIR]" >&2
    exit 2
    ;;
esac
