{{/* The pod template of a worker pool's leader (role "leader": runs mpirun, rank 0 serves
     /metrics and /health) or of the other pods of a group (role "worker": sshd for mpirun). */}}
{{- define "bmad.workerPod" -}}
{{- $root := .root -}}
{{- $p := .p -}}
{{- $v := $p.values -}}
{{- $leader := eq .role "leader" -}}
{{- $multi := gt (int $v.podsPerReplica) 1 -}}
metadata:
  labels:
    {{- include "bmad.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: worker
    bmad.io/pool: {{ $p.pool }}
    bmad.io/role: {{ .role }}
    {{- with $root.Values.workers.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include "bmad.configFile" $root | sha256sum }}
    {{- if and $leader (not (include "bmad.serviceMonitorRendered" $root)) }}
    prometheus.io/scrape: "true"
    prometheus.io/port: {{ $root.Values.ports.workerMetrics | quote }}
    prometheus.io/path: /metrics
    {{- end }}
    {{- with $root.Values.workers.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  serviceAccountName: {{ include "bmad.serviceAccountName" $root }}
  automountServiceAccountToken: {{ $root.Values.automountServiceAccountToken }}
  terminationGracePeriodSeconds: {{ $root.Values.workers.terminationGracePeriodSeconds }}
  {{- /* Root unless told otherwise: the other pods of a multi-pod group run sshd, and the
         leader's ssh logs in as root (bmad.validate refuses a non-root one). */}}
  {{- with default $root.Values.podSecurityContext $v.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ ternary "leader" "worker" $leader }}
      image: {{ include "bmad.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      {{- with default $root.Values.securityContext $v.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if $leader }}
      command: ["/bin/bash", "/etc/bmad/launch-replica.sh"]
      {{- else }}
      command: ["/bin/bash", "/etc/bmad/group-sshd.sh"]
      # Its SIGTERM would stop sshd and the ranks under it while the leader drains: the pod
      # waits for its ranks to end (the leader stops them once drained) before it is stopped.
      lifecycle:
        preStop:
          exec:
            command: ["/bin/bash", "/etc/bmad/wait-for-ranks.sh"]
      {{- end }}
      env:
        - name: BMAD_POOL
          value: {{ $p.pool | quote }}
        - name: BMAD_RANKS
          value: {{ .ranks | quote }}
        - name: BMAD_SLOTS_PER_POD
          value: {{ include "bmad.ranksPerPod" $v | quote }}
        - name: BMAD_SSH_PORT
          value: {{ $root.Values.ports.ssh | quote }}
        - name: BMAD_SSH_KEY
          value: /etc/bmad-ssh/id_rsa
        - name: BMAD_GROUP_START_TIMEOUT_S
          value: {{ $root.Values.workers.groupStartTimeoutSeconds | quote }}
        - name: BMAD_REPLICA_ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        # Names mpirun passes on to every rank (they run under sshd on the other pods).
        {{- $forward := list }}
        {{- range $root.Values.workers.extraEnv }}{{ $forward = append $forward .name }}{{ end }}
        - name: BMAD_FORWARD_ENV
          value: {{ join " " $forward | quote }}
        # One argument a line: an argument may hold spaces (as coordinator.extraArgs's may).
        - name: BMAD_MPIRUN_ARGS
          value: {{ join "\n" $root.Values.workers.mpirunExtraArgs | quote }}
        - name: BMAD_WORKER_ARGS
          value: {{ join "\n" $root.Values.workers.extraArgs | quote }}
        {{- with $root.Values.workers.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        {{- if $leader }}
        - name: metrics
          containerPort: {{ $root.Values.ports.workerMetrics }}
          protocol: TCP
        {{- else }}
        - name: ssh
          containerPort: {{ $root.Values.ports.ssh }}
          protocol: TCP
        {{- end }}
      {{- if $leader }}
      # bmad-worker (rank 0) serves /health on the metrics port from before the model loads;
      # it fails while a step hangs past parallel.step_timeout_ms.
      startupProbe:
        httpGet:
          path: /health
          port: metrics
        periodSeconds: {{ $root.Values.workers.probes.startup.periodSeconds }}
        failureThreshold: {{ $root.Values.workers.probes.startup.failureThreshold }}
      livenessProbe:
        httpGet:
          path: /health
          port: metrics
        periodSeconds: {{ $root.Values.workers.probes.liveness.periodSeconds }}
        failureThreshold: {{ $root.Values.workers.probes.liveness.failureThreshold }}
      # Ready while registered with the coordinator, hearing from it, and not draining.
      readinessProbe:
        httpGet:
          path: /ready
          port: metrics
        periodSeconds: {{ $root.Values.workers.probes.readiness.periodSeconds }}
        failureThreshold: {{ $root.Values.workers.probes.readiness.failureThreshold }}
      {{- else }}
      livenessProbe:
        tcpSocket:
          port: ssh
        periodSeconds: {{ $root.Values.workers.probes.liveness.periodSeconds }}
        failureThreshold: {{ $root.Values.workers.probes.liveness.failureThreshold }}
      readinessProbe:
        tcpSocket:
          port: ssh
        periodSeconds: {{ $root.Values.workers.probes.readiness.periodSeconds }}
        failureThreshold: {{ $root.Values.workers.probes.readiness.failureThreshold }}
      {{- end }}
      resources:
        {{- $res := deepCopy (default (dict) $v.resources) }}
        {{- if gt (int $v.gpusPerPod) 0 }}
        {{- $_ := set $res "limits" (set (default (dict) $res.limits) "nvidia.com/gpu" (int $v.gpusPerPod)) }}
        {{- $_ := set $res "requests" (set (default (dict) $res.requests) "nvidia.com/gpu" (int $v.gpusPerPod)) }}
        {{- end }}
        {{- toYaml $res | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/bmad
          readOnly: true
        - name: model
          mountPath: {{ $root.Values.model.mountPath }}
          readOnly: true
        - name: shm
          mountPath: /dev/shm
        {{- if $multi }}
        - name: ssh
          mountPath: /etc/bmad-ssh
          readOnly: true
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "bmad.configMapName" $root }}
        defaultMode: 0755
    - name: model
      {{- toYaml $root.Values.model.volume | nindent 6 }}
    - name: shm
      emptyDir:
        medium: Memory
        sizeLimit: {{ $root.Values.workers.shmSize }}
    {{- if $multi }}
    - name: ssh
      secret:
        secretName: {{ include "bmad.sshSecretName" $root }}
        defaultMode: 0400
    {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
