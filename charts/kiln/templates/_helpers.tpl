{{/* The release's base name: "kiln" unless overridden. */}}
{{- define "kiln.fullname" -}}
{{- default "kiln" .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "kiln.labels" -}}
app.kubernetes.io/name: kiln
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component (operator, apiserver). */}}
{{- define "kiln.selectorLabels" -}}
app.kubernetes.io/name: kiln
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference: registry/repository, then @digest if given, else :tag (default: v<appVersion>,
as `make release VERSION=vX.Y.Z` tags the images of chart X.Y.Z). */}}
{{- define "kiln.image" -}}
{{- $repo := .image.repository -}}
{{- if .image.registry }}{{ $repo = printf "%s/%s" .image.registry .image.repository }}{{ end -}}
{{- if .image.digest -}}
{{ $repo }}@{{ .image.digest }}
{{- else -}}
{{ $repo }}:{{ .image.tag | default (printf "v%s" (trimPrefix "v" .root.Chart.AppVersion)) }}
{{- end -}}
{{- end -}}

{{/* The restricted Pod Security Standard, for every Kiln container. */}}
{{- define "kiln.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Scheduling and pull settings shared by Kiln's pods, from .values (operator or apiserver); the
topology spread constraints only for a Deployment's pods (.component), whose labels they select. */}}
{{- define "kiln.podSettings" -}}
{{- with (concat .root.Values.imagePullSecrets .values.imagePullSecrets) }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if and .component .values.topologySpreadConstraints }}
{{- $selector := dict "matchLabels" (include "kiln.selectorLabels" (dict "root" .root "component" .component) | fromYaml) }}
{{- $constraints := list }}
{{- range .values.topologySpreadConstraints }}
{{- $constraints = append $constraints (merge (dict) . (dict "labelSelector" $selector)) }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{/*
The users whose TrainJob updates keep Kiln-only fields (the operator's --preserve-fields-for):
Kueue's controller, as a separate install names it, as this release's Kueue names it (the Kueue
chart's kueue.fullname, followed by "-controller-manager"), and operator.preserveFieldsFor.
*/}}
{{- define "kiln.preservingUsers" -}}
{{- $users := list "system:serviceaccount:kueue-system:kueue-controller-manager" -}}
{{- if .Values.kueue.install -}}
{{- $users = append $users (printf "system:serviceaccount:%s:%s-controller-manager" .Release.Namespace (include "kiln.kueueFullname" .)) -}}
{{- end -}}
{{- concat $users .Values.operator.preserveFieldsFor | uniq | join "," -}}
{{- end -}}

{{/* The names of this release's Kueue objects: the Kueue chart's kueue.fullname, computed from its values. */}}
{{- define "kiln.kueueFullname" -}}
{{- $k := .Values.kueue -}}
{{- $name := default "kueue" $k.nameOverride -}}
{{- $full := printf "%s-%s" .Release.Name $name -}}
{{- if $k.fullnameOverride }}{{ $full = $k.fullnameOverride }}{{ else if contains $name .Release.Name }}{{ $full = .Release.Name }}{{ end -}}
{{- $full | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The OpenTelemetry variables of a Kiln container (monitoring.tracing): none unless an OTLP endpoint is set. */}}
{{- define "kiln.tracingEnv" -}}
{{- with .Values.monitoring.tracing }}
{{- if .otlpEndpoint -}}
env:
  - name: OTEL_EXPORTER_OTLP_ENDPOINT
    value: {{ .otlpEndpoint | quote }}
  {{- range $k, $v := .env }}
  - name: {{ $k }}
    value: {{ $v | quote }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The CA bundle of the webhook configurations: the CA in the operator's certificate Secret, when it exists
(an upgrade), so that a configuration the upgrade creates or renames is trusted before the new operator injects
it. Empty on a first install (the operator injects it once it has made its CA) and with cert-manager (whose
injector does). */}}
{{- define "kiln.webhookCABundle" -}}
{{- if ne .Values.operator.webhook.certManagement "cert-manager" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (printf "%s-webhook-certs" (include "kiln.fullname" .)) -}}
{{- if $secret -}}
{{- index ($secret.data | default dict) "ca.crt" | default "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
