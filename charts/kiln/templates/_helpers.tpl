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

{{/* An image reference: registry/repository, then @digest if given, else :tag (default: appVersion). */}}
{{- define "kiln.image" -}}
{{- $repo := .image.repository -}}
{{- if .image.registry }}{{ $repo = printf "%s/%s" .image.registry .image.repository }}{{ end -}}
{{- if .image.digest -}}
{{ $repo }}@{{ .image.digest }}
{{- else -}}
{{ $repo }}:{{ .image.tag | default .root.Chart.AppVersion }}
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

{{/* Scheduling and pull settings shared by Kiln's pods, from .values (operator or apiserver). */}}
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
