{{/*
Names. The fullname is truncated to 52 characters so that "<fullname>-metrics" (and every other
suffix used here) stays within the 63 characters of a DNS label.
*/}}
{{- define "probelint.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "probelint.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "probelint.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "probelint.selectorLabels" -}}
app.kubernetes.io/name: {{ include "probelint.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "probelint.labels" -}}
helm.sh/chart: {{ include "probelint.chart" . }}
{{ include "probelint.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: probelint
{{- end }}

{{- define "probelint.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "probelint.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "probelint.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Service the apiserver calls, and the names its certificate must carry. */}}
{{- define "probelint.serviceName" -}}
{{ include "probelint.fullname" . }}
{{- end }}

{{- define "probelint.dnsNames" -}}
{{- $svc := include "probelint.serviceName" . }}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) | toJson }}
{{- end }}

{{- define "probelint.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "secret" }}
{{- .Values.certificates.secret.name }}
{{- else }}
{{- printf "%s-tls" (include "probelint.fullname" .) }}
{{- end }}
{{- end }}

{{- define "probelint.policyConfigMapName" -}}
{{- printf "%s-policy" (include "probelint.fullname" .) }}
{{- end }}

{{/* `https` or `metrics`: where the kubelet probes. The TLS port refuses clients without a
certificate once --client-ca is set, and the kubelet has none. */}}
{{- define "probelint.probePort" -}}
{{- if .Values.clientAuth.caConfigMap }}metrics{{ else }}{{ .Values.probes.port }}{{ end }}
{{- end }}

{{- define "probelint.probeScheme" -}}
{{- if eq (include "probelint.probePort" .) "https" }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/*
The failurePolicy of each webhook, as JSON {"validating": ..., "mutating": ...}, refusing the
values with which the chart could lock a cluster (webhook-configurations.yaml and NOTES.txt both
include it, so they can never disagree):
- validating: empty means by mode, `Ignore` in warn mode and `Fail` in enforce mode;
- warn mode never denies, so `Fail` there (either webhook) would only make applies wait on, and
  fail with, a webhook that is down: refused;
- `Fail` with fewer than two replicas in the cluster: each restart, eviction or image pull of the
  one replica refuses every matching object in scope. Refused unless
  webhook.allowSingleReplicaFailClosed says that is wanted. (With webhook.external.url there is
  no Deployment: the replicas are the operator's.)
*/}}
{{- define "probelint.failurePolicies" -}}
{{- $hook := .Values.webhook }}
{{- $enforce := eq $hook.mode "enforce" }}
{{- $validating := $hook.validating.failurePolicy | default ($enforce | ternary "Fail" "Ignore") }}
{{- $mutating := $hook.mutating.failurePolicy | default "Ignore" }}
{{- $failing := list }}
{{- if and $hook.validating.enabled (eq $validating "Fail") }}
{{- $failing = append $failing "webhook.validating.failurePolicy" }}
{{- end }}
{{- if and $hook.mutating.enabled (eq $mutating "Fail") }}
{{- $failing = append $failing "webhook.mutating.failurePolicy" }}
{{- end }}
{{- if and $failing (not $enforce) }}
{{- fail (printf "%s is Fail in warn mode: warn mode never denies, so Fail would only refuse every matching apply while the webhook is down. Leave webhook.validating.failurePolicy empty (Ignore in warn mode, Fail in enforce mode) and webhook.mutating.failurePolicy Ignore, or set webhook.mode=enforce" (join " and " $failing)) }}
{{- end }}
{{- if and $failing (not $hook.external.url) (lt (int .Values.replicaCount) 2) (not $hook.allowSingleReplicaFailClosed) }}
{{- fail (printf "%s is Fail with replicaCount %d: while the one webhook replica restarts, is evicted or pulls its image, the apiserver refuses every matching object in scope. Set replicaCount to 2 or more, or webhook.validating.failurePolicy=Ignore, or accept the outages with webhook.allowSingleReplicaFailClosed=true" (join " and " $failing) (int .Values.replicaCount)) }}
{{- end }}
{{- dict "validating" $validating "mutating" $mutating | toJson }}
{{- end }}

{{/*
The rules of both webhooks: Pods and every workload kind whose pod templates the engine reads
(policies/src/analysis/layout.rs, `builtin_layout`). CRD versions are "*": the apiserver matches whichever version a
cluster serves. Rules for CRDs a cluster does not have are harmless.

Operations follow what the webhook evaluates (webhook/src/review.rs, `scope`): Pods, Jobs,
JobSets and RayJobs on CREATE only. Their Pods come from the spec they were created with (a
Pod's containers and probes and a Job's or JobSet's template are immutable; Kueue changes only
where they are scheduled), the webhook never evaluates their UPDATEs, and sending those to it
would only make Kueue's admissions, `kubectl label pod` and every other Pod UPDATE wait on it,
or fail with it under failurePolicy Fail. Every other kind on CREATE and UPDATE: an UPDATE that
changes a pod template is judged and mutated, one that does not is answered at once.

What a controller creates (objects with a controller ownerReference, sent by a controller) is
kept away from the webhooks by matchConditions ("probelint.controllerCondition"), not by these
rules.
Argument: a dict with "root" (the chart context) and "podsOnly".
*/}}
{{- define "probelint.webhookRules" -}}
{{- $both := list "CREATE" "UPDATE" }}
{{- $create := list "CREATE" }}
- apiGroups: [""]
  apiVersions: ["v1"]
  operations: {{ toJson $create }}
  resources: ["pods"]
  scope: Namespaced
{{- if not .podsOnly }}
- apiGroups: [""]
  apiVersions: ["v1"]
  operations: {{ toJson $both }}
  resources: ["replicationcontrollers"]
  scope: Namespaced
- apiGroups: ["apps"]
  apiVersions: ["v1"]
  operations: {{ toJson $both }}
  resources: ["deployments", "statefulsets", "daemonsets", "replicasets"]
  scope: Namespaced
- apiGroups: ["batch"]
  apiVersions: ["v1"]
  operations: {{ toJson $create }}
  resources: ["jobs"]
  scope: Namespaced
- apiGroups: ["batch"]
  apiVersions: ["v1"]
  operations: {{ toJson $both }}
  resources: ["cronjobs"]
  scope: Namespaced
- apiGroups: ["leaderworkerset.x-k8s.io"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["leaderworkersets"]
  scope: Namespaced
- apiGroups: ["serving.kserve.io"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["inferenceservices", "servingruntimes", "llminferenceservices"]
  scope: Namespaced
- apiGroups: ["serving.kserve.io"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["clusterservingruntimes"]
  scope: Cluster
- apiGroups: ["ray.io"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["rayservices", "rayclusters"]
  scope: Namespaced
- apiGroups: ["ray.io"]
  apiVersions: ["*"]
  operations: {{ toJson $create }}
  resources: ["rayjobs"]
  scope: Namespaced
- apiGroups: ["argoproj.io"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["rollouts"]
  scope: Namespaced
- apiGroups: ["serving.knative.dev"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["services"]
  scope: Namespaced
- apiGroups: ["jobset.x-k8s.io"]
  apiVersions: ["*"]
  operations: {{ toJson $create }}
  resources: ["jobsets"]
  scope: Namespaced
- apiGroups: ["apps.nvidia.com"]
  apiVersions: ["*"]
  operations: {{ toJson $both }}
  resources: ["nimservices"]
  scope: Namespaced
{{- with .root.Values.webhook.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The users whose objects are a controller's: the built-in controllers' service accounts
(webhook/src/review.rs, BUILTIN_CONTROLLERS), the controller manager's own identity where it runs
without per-controller credentials, and the operators listed in webhook.controllerServiceAccounts.
A JSON list.
*/}}
{{- define "probelint.controllerUsers" -}}
{{- $builtin := list }}
{{- range list "replicaset" "deployment" "statefulset" "daemon-set" "job" "cronjob" "replication" }}
{{- $builtin = append $builtin (printf "system:serviceaccount:kube-system:%s-controller" .) }}
{{- end }}
{{- $builtin = append $builtin "system:kube-controller-manager" }}
{{- concat $builtin (.Values.webhook.controllerServiceAccounts | default list) | uniq | toJson }}
{{- end }}

{{/*
matchConditions that keep what a controller creates from a webhook: an object with a controller
ownerReference that a controller sent — the ReplicaSets of Deployments and Rollouts, a CronJob's
Jobs, a LeaderWorkerSet's StatefulSets, the Deployments KServe and other operators make. Who sent
it is the apiserver's word (`request.userInfo.username`, one of "probelint.controllerUsers"),
never what the object says about itself: anyone may write an ownerReference (to the
`kube-root-ca.crt` ConfigMap every namespace has), and such an object goes to both webhooks and
is judged as its author's. Mutating a controller's object fights the controller (the Deployment
controller makes a new ReplicaSet whenever one's template differs from the Deployment's: a loop);
refusing one blocks that controller's scaling and rollouts with an error no person sees. The
object a person applied was judged, and is what the webhook mutates. The webhook decides the same
(webhook/src/review.rs, given the same operators with --controller-service-account); the
condition also spares the apiserver the calls, and keeps an outage of the webhook from blocking
controllers.

For the mutating webhook ("pods": true), Pods are the exception: the fixes for workloads that
predate the webhook (or that it did not mutate) land on their Pods at CREATE. The validating
webhook never sees the Pods a controller creates: it would never refuse them (that would block
scale-ups, node-drain replacements and the rollout that fixes the template), and in failure mode
Fail an outage of the webhook would.
Argument: a dict with "root" (the chart context) and "pods".
*/}}
{{- define "probelint.controllerCondition" -}}
{{- $users := include "probelint.controllerUsers" .root | replace "\"" "'" | replace "," ", " }}
{{- $free := printf "!(request.userInfo.username in %s && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))" $users -}}
{{- if .pods }}
- name: pod-or-not-created-by-a-controller
  expression: {{ printf "object.kind == 'Pod' || %s" $free | quote }}
{{- else }}
- name: not-created-by-a-controller
  expression: {{ $free | quote }}
{{- end }}
{{- end }}

{{/* Never the release namespace (the webhook must not gate its own pods), the listed system
namespaces, or a namespace labelled <namespaceOptOutLabel>=true. */}}
{{- define "probelint.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ .Values.webhook.excludeNamespaces | concat (list .Release.Namespace) | uniq | toJson }}
  - key: {{ .Values.webhook.namespaceOptOutLabel }}
    operator: NotIn
    values: ["true"]
{{- with .Values.webhook.namespaceSelectorExpressions }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- end }}

{{/* Only the expressions the values add: an object's own opt-out label
(webhook.objectOptOutLabel) is decided by the webhook, which honours it only where the policy
lets an object exempt itself (allowAnnotationExemptions), and logs and counts each use with who
asked. A selector here would let anyone who can label an object take it out of scope unseen. */}}
{{- define "probelint.objectSelector" -}}
{{- with .Values.webhook.objectSelectorExpressions }}
matchExpressions:
{{ toYaml . | indent 2 }}
{{- else -}}
{}
{{- end }}
{{- end }}

{{/*
matchConditions: call the webhook only for objects with an accelerator in some pod spec, the way
the engine decides it (policies/src/analysis/layout.rs, `builtin_layout`): a container or native sidecar requesting an
accelerator resource or a DRA claim, or a pod with an accelerator runtimeClassName. Init
containers and pod-level resourceClaims count too: a superset only costs a webhook call. Objects
of kinds not listed here (extraRules) always go to the webhook.

The expression collects the object's pod specs by kind into a list, then asks whether any of
their containers (plus KServe's model containers) requests an accelerator.
*/}}

{{/* "(has(a.b) && has(a.b.c)) ? [a.b.c] : []" for base "a" and path "b.c". */}}
{{- define "probelint.cel.at" -}}
{{- $expr := .base }}
{{- $guards := list }}
{{- range (splitList "." .path) }}
{{- $expr = printf "%s.%s" $expr . }}
{{- $guards = append $guards (printf "has(%s)" $expr) }}
{{- end }}
{{- printf "(%s ? [%s] : [])" (join " && " $guards) $expr }}
{{- end }}

{{/* Pod specs of a Ray cluster spec "base": the head group and each worker group. */}}
{{- define "probelint.cel.rayCluster" -}}
{{- include "probelint.cel.at" (dict "base" .base "path" "headGroupSpec.template.spec") }} + (has({{ .base }}.workerGroupSpecs) ? {{ .base }}.workerGroupSpecs.filter(g, has(g.template) && has(g.template.spec)).map(g, g.template.spec) : [])
{{- end }}

{{- define "probelint.cel.globRegex" -}}
{{- $alternatives := list }}
{{- range . }}
{{- $alternatives = append $alternatives (regexQuoteMeta . | replace "\\*" ".*") }}
{{- end }}
{{- printf "^(?:%s)$" (join "|" $alternatives) }}
{{- end }}

{{- define "probelint.acceleratorCondition" -}}
{{- $filter := .Values.webhook.acceleratorsOnly }}
{{- $policyAccelerators := (.Values.policy.accelerators | default dict) }}
{{- $builtin := .Files.Get "files/builtin-accelerators.yaml" | fromYaml }}
{{- $resources := $filter.resources | default $policyAccelerators.resources | default $builtin.resources }}
{{- $runtimeClasses := $filter.runtimeClassNames | default $policyAccelerators.runtimeClassNames | default $builtin.runtimeClassNames }}
{{- $templateKinds := list "Deployment" "StatefulSet" "DaemonSet" "ReplicaSet" "ReplicationController" "Job" "Rollout" }}
{{- $kserveModelKeys := list "model" "sklearn" "xgboost" "tensorflow" "pytorch" "triton" "onnx" "huggingface" "pmml" "lightgbm" "paddle" -}}
!(object.kind in ['Pod', 'Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'ReplicationController', 'Job', 'CronJob', 'Rollout', 'LeaderWorkerSet', 'JobSet', 'RayCluster', 'RayService', 'RayJob', 'InferenceService', 'ServingRuntime', 'ClusterServingRuntime', 'LLMInferenceService', 'NIMService']
  || (object.kind == 'Service' && object.apiVersion.startsWith('serving.knative.dev/'))) ||
{{- /* A ServingRuntime declares no accelerator (the InferenceService that uses it does), and the
engine judges the known model servers it runs as GPU serving containers: always sent. */}}
object.kind in ['ServingRuntime', 'ClusterServingRuntime'] ||
(
  object.kind == 'Pod' ? [object.spec] :
  object.kind in {{ $templateKinds | toJson | replace "\"" "'" | replace "," ", " }} || object.kind == 'Service' ? {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.template.spec") }} :
  object.kind == 'CronJob' ? {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.jobTemplate.spec.template.spec") }} :
  object.kind == 'LeaderWorkerSet' ?
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.leaderWorkerTemplate.leaderTemplate.spec") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.leaderWorkerTemplate.workerTemplate.spec") }} :
  object.kind == 'JobSet' ?
    (has(object.spec) && has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.filter(j, has(j.template) && has(j.template.spec) && has(j.template.spec.template) && has(j.template.spec.template.spec)).map(j, j.template.spec.template.spec) : []) :
  object.kind == 'RayCluster' ?
    (has(object.spec) ? {{ include "probelint.cel.rayCluster" (dict "base" "object.spec") }} : []) :
  object.kind == 'RayService' ?
    (has(object.spec) && has(object.spec.rayClusterConfig) ? {{ include "probelint.cel.rayCluster" (dict "base" "object.spec.rayClusterConfig") }} : []) :
  object.kind == 'RayJob' ?
    (has(object.spec) && has(object.spec.rayClusterSpec) ? {{ include "probelint.cel.rayCluster" (dict "base" "object.spec.rayClusterSpec") }} : []) +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.submitterPodTemplate.spec") }} :
  object.kind == 'InferenceService' ?
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.predictor") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.predictor.workerSpec") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.transformer") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.explainer") }} :
  {{- /* The NIM Operator builds its one container from the NIMService's spec. */}}
  object.kind == 'NIMService' ? {{ include "probelint.cel.at" (dict "base" "object" "path" "spec") }} :
  object.kind == 'LLMInferenceService' ?
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.template") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.worker") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.prefill.template") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.prefill.worker") }} :
  {{- /* ServingRuntime, ClusterServingRuntime */}}
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec") }} +
    {{ include "probelint.cel.at" (dict "base" "object" "path" "spec.workerSpec") }}
).exists(s,
  ((has(s.containers) ? s.containers : []) + (has(s.initContainers) ? s.initContainers : [])
    + (object.kind == 'NIMService' ? [s] : [])
    + (object.kind == 'InferenceService' ? {{ $kserveModelKeys | toJson | replace "\"" "'" | replace "," ", " }}.filter(k, k in s).map(k, s[k]) : [])
  ).exists(c, (has(c.resources) && (
    (has(c.resources.limits) && c.resources.limits.exists(name, name.matches(r'{{ include "probelint.cel.globRegex" $resources }}'))) ||
    (has(c.resources.requests) && c.resources.requests.exists(name, name.matches(r'{{ include "probelint.cel.globRegex" $resources }}')))
    {{- if $filter.resourceClaims }} ||
    (has(c.resources.claims) && size(c.resources.claims) > 0)
    {{- end }}
  ))
  {{- /* The NVIDIA container runtime gives a container the GPUs its NVIDIA_VISIBLE_DEVICES
  names, with no resource request (the engine's `visible_devices`): void, none and empty name
  none. Other spellings of those (` Void `) are sent too: a condition may send more than the
  engine judges, never less. */}}
  || (has(c.env) && c.env.exists(e, has(e.name) && e.name == 'NVIDIA_VISIBLE_DEVICES' && has(e.value) && !(e.value in ['', 'void', 'none']))))
  {{- if $runtimeClasses }}
  || (has(s.runtimeClassName) && s.runtimeClassName.matches(r'{{ include "probelint.cel.globRegex" $runtimeClasses }}'))
  {{- end }}
  {{- if $filter.resourceClaims }}
  || (has(s.resourceClaims) && size(s.resourceClaims) > 0)
  {{- end }}
)
{{- end }}

{{/* A webhook's clientConfig for one endpoint: the Service with `path`, or (webhook.external)
the URL with `path` appended. */}}
{{- define "probelint.clientConfig" -}}
{{- $config := deepCopy .config }}
{{- if hasKey $config "url" }}
{{- $_ := set $config "url" (printf "%s%s" $config.url .path) }}
{{- else }}
{{- $_ := set $config.service "path" .path }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
"true" where the chart runs the webhook in the cluster: not with webhook.external.url (it runs
elsewhere), and not in admission.mode policies (the apiserver's admission policies judge; no
webhook is called, so none is deployed, no certificate is made).
*/}}
{{- define "probelint.webhookInCluster" -}}
{{- and (not .Values.webhook.external.url) (ne .Values.admission.mode "policies") | toString -}}
{{- end }}
