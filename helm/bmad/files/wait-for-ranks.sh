#!/bin/bash
# preStop hook of the other pods of a multi-pod replica. Kubernetes deletes a group's pods
# together; a pod's SIGTERM stops sshd, its first process, and with it every rank in the pod,
# which would take the replica down while its leader drains. So each of these pods waits here
# while it still runs a rank (a `bmad-worker` process): the leader finishes its requests, then
# stops its ranks, and only then is the pod stopped. Kubernetes bounds the wait by the pod's
# terminationGracePeriodSeconds. BMAD_RANK_PROCESS names the process to wait for (tests).
name=${BMAD_RANK_PROCESS:-bmad-worker}

# A live process of that name (a zombie, ended but not yet reaped, does not count).
ranks_running() {
  local d stat comm state
  for d in /proc/[0-9]*; do
    read -r stat <"$d/stat" 2>/dev/null || continue  # the process ended meanwhile
    comm=${stat#*\(}
    comm=${comm%\)*}
    state=${stat##*\) }
    state=${state%% *}
    [[ $comm == "$name" && $state != Z ]] && return 0
  done
  return 1
}

while ranks_running; do sleep 1; done
