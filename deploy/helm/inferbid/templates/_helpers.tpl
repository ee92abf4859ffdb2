{{/* The chart's names and labels. */}}
{{- define "inferbid.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "inferbid.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "inferbid.labels" -}}
{{ include "inferbid.selectorLabels" . }}
app.kubernetes.io/version: {{ include "inferbid.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image tag: image.tag, or the chart's appVersion (make image's
default IMAGE_TAG). */}}
{{- define "inferbid.tag" -}}
{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The image: REPOSITORY for the TensorFlow sidecar, REPOSITORY-onnx for
ONNX, REPOSITORY-pytorch for PyTorch. */}}
{{- define "inferbid.image" -}}
{{- if eq .Values.runtime "tensorflow" -}}
{{ .Values.image.repository }}:{{ include "inferbid.tag" . }}
{{- else if or (eq .Values.runtime "onnx") (eq .Values.runtime "pytorch") -}}
{{ .Values.image.repository }}-{{ .Values.runtime }}:{{ include "inferbid.tag" . }}
{{- else -}}
{{ fail (printf "runtime %q: want tensorflow, onnx or pytorch" .Values.runtime) }}
{{- end -}}
{{- end -}}

{{/*
The memory request in MiB, from the models' size (values.yaml explains the
terms; docs/scaling.md the measurements behind them).
*/}}
{{- define "inferbid.memoryMiB" -}}
{{- $mib := 1048576 -}}
{{- $server := add (div (mul (int64 .Values.jsHeapBudgetMB) 5) 4) 64 -}}
{{- $sidecar := 64 -}}
{{- $loaded := div (mul (int64 .Values.models.totalBytes) 13) (mul 10 $mib) -}}
{{- $peak := div (mul (int64 .Values.models.largestBytes) 3) $mib -}}
{{- add $server $sidecar $loaded $peak -}}
{{- end -}}

{{/* preStop sleep + drain + shutdown grace + the sidecar's 10 s stop + 5 s. */}}
{{- define "inferbid.terminationGrace" -}}
{{- with .Values.lifecycle -}}
{{- add (int64 .preStopSleepSeconds) (int64 .drainPeriodSeconds) (int64 .shutdownGraceSeconds) 10 5 -}}
{{- end -}}
{{- end -}}
