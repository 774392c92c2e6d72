{{/*
Checks across values that a JSON Schema cannot express; each failure names the values involved.
*/}}
{{- define "aibom-vault.validate" -}}
{{- if and (eq .Values.transparency.backend "scrapi") (not .Values.transparency.url) }}
{{- fail "transparency.url (SCITT_URL) is required when transparency.backend is scrapi" }}
{{- end }}
{{- if and .Values.tsa.url (not .Values.tsa.caConfigMap) }}
{{- fail "tsa.caConfigMap (the ConfigMap with the TSA's ca.crt, TSA_TRUST_ANCHORS) is required when tsa.url is set" }}
{{- end }}
{{- if and .Values.s3.accessKey .Values.s3.secretKey (not .Values.s3.endpoint) }}
{{- fail "s3.endpoint is required when the chart creates the S3 Secret from s3.accessKey/s3.secretKey" }}
{{- end }}
{{- if eq (int .Values.sidecar.port) (int .Values.sidecar.metricsPort) }}
{{- fail (printf "sidecar.port and sidecar.metricsPort are both %v: the API pod listens on both, they must differ" .Values.sidecar.port) }}
{{- end }}
{{- if eq (int .Values.service.port) (int .Values.service.metricsPort) }}
{{- fail (printf "service.port and service.metricsPort are both %v: Service %s exposes both, they must differ" .Values.service.port (include "aibom-vault.fullname" .)) }}
{{- end }}
{{- end }}
