{{/* Names, labels and shared snippets. */}}

{{- define "threadcast.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "threadcast.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "threadcast.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "threadcast.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* selectorLabels takes (dict "ctx" . "component" "ingest"). */}}
{{- define "threadcast.selectorLabels" -}}
app.kubernetes.io/name: {{ include "threadcast.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "threadcast.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "threadcast.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "threadcast.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{/*
The name of the client Service the bundled NATS chart creates: its
service.name, else its fullname (the NATS chart's nats.fullname rule:
fullnameOverride, else the release name if it contains the chart name
(nameOverride or "nats"), else <release>-<name>).
*/}}
{{- define "threadcast.natsServiceName" -}}
{{- $n := .Values.nats -}}
{{- if ($n.service).name -}}
{{- $n.service.name -}}
{{- else if $n.fullnameOverride -}}
{{- $n.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "nats" $n.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The NATS URLs: the bundled cluster's client Service, or externalNats.urls. */}}
{{- define "threadcast.natsURL" -}}
{{- if .Values.nats.enabled -}}
{{- $port := 4222 -}}
{{- with ((.Values.nats.config).nats).port }}{{ $port = . }}{{ end -}}
{{- printf "nats://%s:%v" (include "threadcast.natsServiceName" .) $port -}}
{{- else -}}
{{- required "externalNats.urls is required when nats.enabled=false" .Values.externalNats.urls -}}
{{- end -}}
{{- end -}}

{{- define "threadcast.authSecretName" -}}
{{- default (printf "%s-auth" (include "threadcast.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "threadcast.authSecretKey" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecretKey }}{{- else -}}auth-key{{- end -}}
{{- end -}}

{{/* Environment shared by ingest and fanout (flags are THREADCAST_<FLAG>). */}}
{{- define "threadcast.commonEnv" -}}
- name: THREADCAST_NATS_URL
  value: {{ include "threadcast.natsURL" . | quote }}
- name: THREADCAST_PARTITIONS
  value: {{ .Values.pipeline.partitions | quote }}
{{- if .Values.externalNats.credsSecret }}
- name: THREADCAST_NATS_CREDS
  value: /etc/threadcast/nats/{{ .Values.externalNats.credsSecretKey }}
{{- end }}
{{- if .Values.busAuth.existingSecret }}
- name: THREADCAST_NATS_NKEY
  value: /etc/threadcast/bus/{{ .Values.busAuth.serviceSeedKey }}
{{- end }}
{{- end -}}

{{- define "threadcast.credsVolumeMount" -}}
{{- if .Values.externalNats.credsSecret }}
- name: nats-creds
  mountPath: /etc/threadcast/nats
  readOnly: true
{{- end }}
{{- if .Values.busAuth.existingSecret }}
- name: bus-auth
  mountPath: /etc/threadcast/bus
  readOnly: true
{{- end }}
{{- end -}}

{{- define "threadcast.credsVolume" -}}
{{- if .Values.externalNats.credsSecret }}
- name: nats-creds
  secret:
    secretName: {{ .Values.externalNats.credsSecret }}
{{- end }}
{{- if .Values.busAuth.existingSecret }}
- name: bus-auth
  secret:
    secretName: {{ .Values.busAuth.existingSecret }}
{{- end }}
{{- end -}}

{{- define "threadcast.authKeyEnv" -}}
- name: THREADCAST_AUTH_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "threadcast.authSecretName" . }}
      key: {{ include "threadcast.authSecretKey" . }}
{{- end -}}
