#!/bin/bash
# The leader pod of one bmad replica (a LeaderWorkerSet group): runs the replica's
# tp x pp ranks with mpirun over the group's pods (rank 0 here, the leader), as one MPI job.
# The pod's SIGTERM drains the replica (it finishes its running requests, then exits): this
# shell passes it on to mpirun as SIGUSR1, which mpirun forwards to every rank at once (a SIGTERM
# it would turn into SIGKILL two seconds later). A second SIGTERM stops the replica after its
# current step; the coordinator moves what it still ran.
#
# Environment: BMAD_POOL, BMAD_RANKS, BMAD_SLOTS_PER_POD, BMAD_SSH_PORT, BMAD_SSH_KEY,
# BMAD_GROUP_START_TIMEOUT_S, BMAD_FORWARD_ENV (names passed to every rank), BMAD_REPLICA_ID
# (default: this pod's name), BMAD_MPIRUN_ARGS, BMAD_WORKER_ARGS (one argument a line, each
# passed whole: spaces and glob characters included); from the LeaderWorkerSet
# controller: LWS_GROUP_SIZE, LWS_LEADER_ADDRESS (<leader>.<service>.<namespace>).
# BMAD_DRY_RUN=1 prints the hostfile and the mpirun command instead of running them (tests).
set -euo pipefail

pool=${BMAD_POOL:?BMAD_POOL is not set}
ranks=${BMAD_RANKS:?BMAD_RANKS is not set}
slots=${BMAD_SLOTS_PER_POD:?BMAD_SLOTS_PER_POD is not set}
size=${LWS_GROUP_SIZE:-1}
leader=${LWS_LEADER_ADDRESS:-}
leader=${leader%%.*}
leader=${leader:-$(hostname)}
domain=""
[[ ${LWS_LEADER_ADDRESS:-} == *.* ]] && domain=.${LWS_LEADER_ADDRESS#*.}
replica_id=${BMAD_REPLICA_ID:-$leader}
config=${BMAD_CONFIG:-/etc/bmad/bmad.yaml}
ssh_port=${BMAD_SSH_PORT:-2222}
ssh_key=${BMAD_SSH_KEY:-/etc/bmad-ssh/id_rsa}
timeout_s=${BMAD_GROUP_START_TIMEOUT_S:-600}
hostfile=${BMAD_HOSTFILE:-/tmp/bmad-hostfile}

if (( size * slots != ranks )); then
  echo "launch-replica: $size pods x $slots slots != $ranks ranks (parallel.tp x parallel.pp)" >&2
  exit 2
fi

# The group's pods: the leader (this pod), then <leader>-1 ... <leader>-(size-1) under the
# group's headless Service.
hosts=("$leader")
for ((i = 1; i < size; i++)); do hosts+=("$leader-$i$domain"); done
: >"$hostfile"
for h in "${hosts[@]}"; do echo "$h slots=$slots" >>"$hostfile"; done

ssh_opts="-p $ssh_port -i $ssh_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# orte_keep_fqdn_hostnames: Open MPI 4 cuts a hostfile name at its first dot, and a pod is
# found only by its full name (<pod>.<service>.<namespace>): cut, ssh cannot resolve it.
cmd=(mpirun -np "$ranks" --hostfile "$hostfile" --bind-to none --mca orte_keep_fqdn_hostnames 1
     --mca plm_rsh_agent ssh --mca plm_rsh_args "$ssh_opts")
for name in PATH LD_LIBRARY_PATH ${BMAD_FORWARD_ENV:-}; do cmd+=(-x "$name"); done
# Appends the lines of $1 to `cmd`, one argument each (none for an empty value).
add_lines() {
  local lines=()
  [[ -n $1 ]] && mapfile -t lines <<<"$1"
  cmd+=("${lines[@]}")
}
add_lines "${BMAD_MPIRUN_ARGS:-}"
cmd+=(bmad-worker --config "$config" --set "worker.replica_id=$replica_id" --set "worker.pool=$pool"
      --replica-index 0)
add_lines "${BMAD_WORKER_ARGS:-}"

if [[ ${BMAD_DRY_RUN:-0} == 1 ]]; then
  echo "hostfile:"
  cat "$hostfile"
  printf 'command:'
  printf ' %q' "${cmd[@]}"
  echo
  exit 0
fi

# As the pod's first process this shell ignores a signal it has no trap for: until the replica
# runs, a SIGTERM just ends it.
trap 'echo "launch-replica: stopped before the replica started" >&2; exit 143' TERM INT

# Wait (bounded) until every other pod of the group accepts ssh.
deadline=$((SECONDS + timeout_s))
for h in "${hosts[@]:1}"; do
  # shellcheck disable=SC2086
  until ssh $ssh_opts "$h" true 2>/dev/null; do
    if ((SECONDS > deadline)); then
      echo "launch-replica: $h did not accept ssh on port $ssh_port within ${timeout_s}s" >&2
      exit 1
    fi
    sleep 2
  done
done
echo "launch-replica: replica $replica_id ($pool): $ranks ranks on ${hosts[*]}"
"${cmd[@]}" &
mpirun_pid=$!
trap 'echo "launch-replica: stop requested: draining the replica" >&2; kill -USR1 "$mpirun_pid" 2>/dev/null || true' TERM INT
# `wait` returns early when a trapped signal arrives; the job is waited for until it is gone.
status=0
while kill -0 "$mpirun_pid" 2>/dev/null; do
  status=0
  wait "$mpirun_pid" || status=$?
done
exit "$status"
