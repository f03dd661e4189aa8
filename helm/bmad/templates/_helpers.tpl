{{/* Names, labels and the rendered config file. */}}

{{- define "bmad.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object name, cut to 38 characters. The tightest name is a pool's:
     LeaderWorkerSet names a group's StatefulSet "<fullname>-long-tail-<group>", and the
     StatefulSet controller labels each pod "<that name>-<10-character hash>", which must fit
     in 63: 38 + 10 + 4 (up to group 999) + 11 = 63. Service names ("-coordinator-workers",
     20 more) then fit too. */}}
{{- define "bmad.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 38 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 38 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 38 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "bmad.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bmad.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "bmad.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "bmad.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bmad
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "bmad.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "bmad.configMapName" -}}
{{- printf "%s-config" (include "bmad.fullname" .) -}}
{{- end -}}

{{- define "bmad.coordinatorName" -}}
{{- printf "%s-coordinator" (include "bmad.fullname" .) -}}
{{- end -}}

{{/* The Service replica leaders connect to; it publishes the coordinator before it is ready
     (it becomes ready only once a replica has registered through this very Service). */}}
{{- define "bmad.coordinatorWorkersService" -}}
{{- printf "%s-coordinator-workers" (include "bmad.fullname" .) -}}
{{- end -}}

{{/* The pods' ServiceAccount: the one the chart creates (named after the release unless
     serviceAccount.name says otherwise), else serviceAccount.name, else the namespace's default. */}}
{{- define "bmad.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bmad.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "bmad.sshSecretName" -}}
{{- default (printf "%s-mpi-ssh" (include "bmad.fullname" .)) .Values.workers.sshSecretName -}}
{{- end -}}

{{/* The enabled pools as a list of dicts: key (values key), pool (config name), kname (in
     object names), values. */}}
{{- define "bmad.pools" -}}
{{- $pools := list -}}
{{- range $key, $pool := dict "normal" "normal" "longTail" "long_tail" -}}
{{- $v := index $.Values.pools $key -}}
{{- if $v.enabled -}}
{{- $pools = append $pools (dict "key" $key "pool" $pool "kname" ($pool | replace "_" "-") "values" $v) -}}
{{- end -}}
{{- end -}}
{{- toJson $pools -}}
{{- end -}}

{{/* MPI ranks in each pod of a pool (given its values): ranksPerPod, else one per GPU, else 1. */}}
{{- define "bmad.ranksPerPod" -}}
{{- if not (kindIs "invalid" .ranksPerPod) | and (ne (toString .ranksPerPod) "") -}}
{{- int .ranksPerPod -}}
{{- else if gt (int .gpusPerPod) 0 -}}
{{- int .gpusPerPod -}}
{{- else -}}
1
{{- end -}}
{{- end -}}

{{- define "bmad.ranks" -}}
{{- mul (int (default 1 .Values.config.parallel.tp)) (int (default 1 .Values.config.parallel.pp)) -}}
{{- end -}}

{{/* Milliseconds in a Prometheus duration (15s, 1m30s, 500ms; values.schema.json checks the
     form). */}}
{{- define "bmad.durationMs" -}}
{{- $units := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000 "w" 604800000 "y" 31536000000 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|y|w|d|h|m|s)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9]+" . -}}
{{- $total = add $total (mul (int64 $number) (get $units (trimPrefix $number .))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Fails the render on values that cannot work. values.schema.json refuses wrong types and
     out-of-range numbers first (a replicas of -1, a minReplicas of 0); the checks of them here
     remain for renders that skip the schema. */}}
{{- define "bmad.validate" -}}
{{- /* `default` takes 0 for unset: a 0 given is refused here, before it reads as 1. */ -}}
{{- $parallel := .Values.config.parallel | default dict -}}
{{- range $key := list "tp" "pp" -}}
{{- $n := index $parallel $key -}}
{{- if and (hasKey $parallel $key) (not (kindIs "invalid" $n)) (or (not (regexMatch "^[0-9]+$" (toString $n))) (lt (int $n) 1)) -}}
{{- fail (printf "config.parallel.%s must be a whole number of at least 1, got %v" $key $n) -}}
{{- end -}}
{{- end -}}
{{- /* The pod must outlive the coordinator's drain (and the few seconds its stop takes after it). */ -}}
{{- $drainS := div (int (dig "coordinator" "drain_timeout_ms" 10000 .Values.config)) 1000 -}}
{{- if lt (int .Values.coordinator.terminationGracePeriodSeconds) (add $drainS 5) -}}
{{- fail (printf "coordinator.terminationGracePeriodSeconds (%d) is shorter than config.coordinator.drain_timeout_ms (%d s) and the 5 s a stop takes after it: the pod would be killed mid-drain; set it to at least %d" (int .Values.coordinator.terminationGracePeriodSeconds) $drainS (add $drainS 5)) -}}
{{- end -}}
{{- /* Likewise a worker's: its drain must end (and its requests move) before the pod is killed. */ -}}
{{- $workerDrainMs := int (dig "worker" "drain_timeout_ms" -1 .Values.config) -}}
{{- $workerGrace := int .Values.workers.terminationGracePeriodSeconds -}}
{{- if eq $workerDrainMs 0 -}}
{{- fail (printf "config.worker.drain_timeout_ms 0 (no bound) lets Kubernetes kill a draining worker at workers.terminationGracePeriodSeconds (%d s) with requests still on it (they move only once the coordinator finds it dead); leave it unset (the chart sets %d s) or bound it" $workerGrace (max 1 (sub $workerGrace 15))) -}}
{{- end -}}
{{- if and (gt $workerDrainMs 0) (lt $workerGrace (add (div (add $workerDrainMs 999) 1000) 5)) -}}
{{- fail (printf "workers.terminationGracePeriodSeconds (%d) is shorter than config.worker.drain_timeout_ms (%d ms) and the 5 s a stop takes after it: the pod would be killed mid-drain" $workerGrace $workerDrainMs) -}}
{{- end -}}
{{- /* Prometheus refuses a scrape config whose timeout is longer than its interval. */ -}}
{{- with .Values.serviceMonitor.scrapeTimeout -}}
{{- $timeoutMs := int64 (include "bmad.durationMs" .) -}}
{{- $intervalMs := int64 (include "bmad.durationMs" $.Values.serviceMonitor.interval) -}}
{{- if gt $timeoutMs $intervalMs -}}
{{- fail (printf "serviceMonitor.scrapeTimeout (%s) is longer than serviceMonitor.interval (%s): Prometheus refuses a scrape timeout longer than its interval" . $.Values.serviceMonitor.interval) -}}
{{- end -}}
{{- end -}}
{{- $ranks := int (include "bmad.ranks" .) -}}
{{- $pools := include "bmad.pools" . | fromJsonArray -}}
{{- if eq (len $pools) 0 -}}
{{- fail "pools: enable at least one of pools.normal and pools.longTail" -}}
{{- end -}}
{{- $replicas := 0 -}}
{{- range $pools -}}
{{- $v := .values -}}
{{- /* An autoscaled pool's count is the HorizontalPodAutoscaler's: from minReplicas up. */ -}}
{{- if and $v.autoscaling $v.autoscaling.enabled -}}
{{- if lt (int $v.autoscaling.minReplicas) 1 -}}
{{- fail (printf "pools.%s.autoscaling.minReplicas must be at least 1" .key) -}}
{{- end -}}
{{- if lt (int $v.autoscaling.maxReplicas) (int $v.autoscaling.minReplicas) -}}
{{- fail (printf "pools.%s.autoscaling.maxReplicas (%d) is below minReplicas (%d)" .key (int $v.autoscaling.maxReplicas) (int $v.autoscaling.minReplicas)) -}}
{{- end -}}
{{- $replicas = add $replicas $v.autoscaling.minReplicas -}}
{{- else -}}
{{- if not (regexMatch "^[0-9]+$" (toString $v.replicas)) -}}
{{- fail (printf "pools.%s.replicas must be a whole number of 0 or more, got %v" .key $v.replicas) -}}
{{- end -}}
{{- $replicas = add $replicas $v.replicas -}}
{{- end -}}
{{- $perPod := int (include "bmad.ranksPerPod" $v) -}}
{{- $slots := mul (int $v.podsPerReplica) $perPod -}}
{{- if lt (int $v.podsPerReplica) 1 -}}
{{- fail (printf "pools.%s.podsPerReplica must be at least 1" .key) -}}
{{- end -}}
{{- if lt (int $v.gpusPerPod) 0 -}}
{{- fail (printf "pools.%s.gpusPerPod must be 0 or more" .key) -}}
{{- end -}}
{{- if lt $perPod 1 -}}
{{- fail (printf "pools.%s.ranksPerPod must be at least 1" .key) -}}
{{- end -}}
{{- if and (eq (toString $.Values.config.worker.backend) "cuda") (eq (int $v.gpusPerPod) 0) -}}
{{- fail (printf "pools.%s.gpusPerPod is 0 but config.worker.backend is cuda: give the pods GPUs, or set config.worker.backend to cpu" .key) -}}
{{- end -}}
{{- if and (eq (toString $.Values.config.worker.backend) "cuda") (gt $perPod (int $v.gpusPerPod)) -}}
{{- fail (printf "pools.%s: ranksPerPod (%d) is more than gpusPerPod (%d): the cuda backend runs one rank per GPU" .key $perPod (int $v.gpusPerPod)) -}}
{{- end -}}
{{- if and (eq (toString $.Values.config.worker.backend) "cuda") (lt $perPod (int $v.gpusPerPod)) -}}
{{- fail (printf "pools.%s: gpusPerPod (%d) is more than ranksPerPod (%d): the cuda backend runs one rank per GPU, so the other GPUs would sit idle" .key (int $v.gpusPerPod) $perPod) -}}
{{- end -}}
{{- if and (ne (toString $.Values.config.worker.backend) "cuda") (gt (int $v.gpusPerPod) 0) -}}
{{- fail (printf "pools.%s.gpusPerPod is %d but config.worker.backend is %s: its ranks use no GPU; set gpusPerPod to 0" .key (int $v.gpusPerPod) (toString $.Values.config.worker.backend)) -}}
{{- end -}}
{{- /* The pool's security contexts, as _worker-pod.tpl picks them. */ -}}
{{- $podSecurity := default $.Values.podSecurityContext $v.podSecurityContext | default dict -}}
{{- $security := default $.Values.securityContext $v.securityContext | default dict -}}
{{- if eq (toString (index $security "readOnlyRootFilesystem")) "true" -}}
{{- fail (printf "pools.%s: readOnlyRootFilesystem cannot work for worker pods: the leader's launch script writes its hostfile in /tmp, Open MPI its session directory, and the sshd of multi-pod groups its keys" .key) -}}
{{- end -}}
{{- if gt (int $v.podsPerReplica) 1 -}}
{{- /* The container's setting wins over the pod's, as in Kubernetes. */ -}}
{{- $user := "0" -}}
{{- $nonRoot := "false" -}}
{{- range $context := list $podSecurity $security -}}
{{- if not (kindIs "invalid" (index $context "runAsUser")) }}{{ $user = toString (int (index $context "runAsUser")) }}{{ end -}}
{{- if not (kindIs "invalid" (index $context "runAsNonRoot")) }}{{ $nonRoot = toString (index $context "runAsNonRoot") }}{{ end -}}
{{- end -}}
{{- if or (ne $user "0") (eq $nonRoot "true") -}}
{{- fail (printf "pools.%s: podsPerReplica is %d, so its pods must run as root (the group's other pods run sshd, and the leader's ssh logs in to them as root), but its security context sets %s: run them as root, or use podsPerReplica 1" .key (int $v.podsPerReplica) (ternary "runAsNonRoot" (printf "runAsUser %s" $user) (eq $nonRoot "true"))) -}}
{{- end -}}
{{- end -}}
{{- if ne (int $slots) $ranks -}}
{{- fail (printf "pools.%s: podsPerReplica (%d) x ranksPerPod (%d) = %d ranks per replica, but config.parallel tp x pp = %d ranks; they must be equal (by default one rank per GPU: ranksPerPod is gpusPerPod)" .key (int $v.podsPerReplica) $perPod (int $slots) $ranks) -}}
{{- end -}}
{{- end -}}
{{- if lt (int $replicas) 1 -}}
{{- fail "pools: the enabled pools have no replicas" -}}
{{- end -}}
{{- end -}}

{{/* The config file: values.config with the keys the chart owns set from the other values. */}}
{{- define "bmad.configFile" -}}
{{- $ns := .Release.Namespace -}}
{{- $domain := .Values.clusterDomain -}}
{{- $clientHost := printf "%s.%s.svc.%s" (include "bmad.coordinatorName" .) $ns $domain -}}
{{- $workerHost := printf "%s.%s.svc.%s" (include "bmad.coordinatorWorkersService" .) $ns $domain -}}
{{- /* cluster.*_replicas are cluster.sh's counts. Here the LeaderWorkerSets (and their HPAs) own
     the counts, and this file's checksum rolls every pod when it changes, so it says only which
     pools exist: a scale must not restart the coordinator and both pools. */ -}}
{{- $normal := ternary 1 0 (and .Values.pools.normal.enabled true) -}}
{{- $longTail := ternary 1 0 (and .Values.pools.longTail.enabled true) -}}
{{- $owned := dict
  "model" (dict "path" .Values.model.path "name" .Values.model.name)
  "coordinator" (dict
    "client_endpoint" (printf "tcp://%s:%d" $clientHost (int .Values.ports.client))
    "worker_endpoint" (printf "tcp://%s:%d" $workerHost (int .Values.ports.worker))
    "http_host" "0.0.0.0"
    "http_port" (int .Values.ports.http))
  "metrics" (dict
    "host" "0.0.0.0"
    "coordinator_port" (int .Values.ports.coordinatorMetrics)
    "worker_port" (int .Values.ports.workerMetrics))
  "cluster" (dict
    "normal_replicas" (int $normal)
    "long_tail_replicas" (int $longTail)
    "hostfile" "")
-}}
{{- /* Key by key, not mustMergeOverwrite: whether that lets an empty value (hostfile "")
     overwrite differs between Helm releases (helm/helm#9591). */ -}}
{{- $config := deepCopy .Values.config -}}
{{- /* A draining worker stops (its requests move to other replicas) before Kubernetes kills it at
     the end of its grace period: by default 15 s before (at least 1 s after it began). */ -}}
{{- $workerSection := default (dict) (get $config "worker") -}}
{{- if not (hasKey $workerSection "drain_timeout_ms") -}}
{{- $_ := set $workerSection "drain_timeout_ms" (mul (max 1 (sub (int .Values.workers.terminationGracePeriodSeconds) 15)) 1000) -}}
{{- $_ := set $config "worker" $workerSection -}}
{{- end -}}
{{- range $section, $keys := $owned -}}
{{- $into := default (dict) (get $config $section) -}}
{{- range $key, $value := $keys -}}
{{- $_ := set $into $key $value -}}
{{- end -}}
{{- $_ := set $config $section $into -}}
{{- end -}}
# bmad config file rendered by the {{ .Chart.Name }} chart {{ .Chart.Version }} (release {{ .Release.Name }}).
# Every key: docs/configuration.md. Replica leaders connect to coordinator.worker_endpoint; the
# coordinator binds its endpoints on 0.0.0.0 (--set on its command line).
{{ toYaml $config }}
{{- end -}}

{{/* "true" when the chart renders its ServiceMonitor (enabled, and the cluster serves the
Prometheus operator's CRD). The pods' prometheus.io annotations are written only otherwise: a
Prometheus that honours both would scrape every series twice and double every sum. */}}
{{- define "bmad.serviceMonitorRendered" -}}
{{- if and .Values.serviceMonitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}
true
{{- end -}}
{{- end }}
