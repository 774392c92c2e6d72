{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "aibom-vault.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name. With the release named like the chart (`helm install aibom-vault ...`)
it is `aibom-vault`, so objects are named as in manifests/rbac.yaml (aibom-vault-controller, ...).
Truncated to 63 characters (the Service name is a DNS label).
*/}}
{{- define "aibom-vault.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "aibom-vault.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "aibom-vault.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aibom-vault.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "aibom-vault.labels" -}}
helm.sh/chart: {{ include "aibom-vault.chart" . }}
{{ include "aibom-vault.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: aibom-vault
{{- end }}

{{/* Selector labels of one component (controller or api): "ctx" the root, "component" its name. */}}
{{- define "aibom-vault.componentSelectorLabels" -}}
{{ include "aibom-vault.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "aibom-vault.componentLabels" -}}
{{ include "aibom-vault.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "aibom-vault.controllerServiceAccountName" -}}
{{- default (printf "%s-controller" (include "aibom-vault.fullname" .)) .Values.controller.serviceAccount.name }}
{{- end }}

{{- define "aibom-vault.apiServiceAccountName" -}}
{{- default (printf "%s-api" (include "aibom-vault.fullname" .)) .Values.sidecar.serviceAccount.name }}
{{- end }}

{{/*
The service's own Secrets (signer, SCITT log key) as a JSON map namespace -> [names]; a
`namespace/name` reference lands in its namespace, a bare name in the release namespace. RBAC
grants `get` on exactly these names.
*/}}
{{- define "aibom-vault.systemSecrets" -}}
{{- $out := dict -}}
{{- $refs := list (include "aibom-vault.signerSecretName" .) -}}
{{- with .Values.transparency.logSecretName }}{{ $refs = append $refs . }}{{ end -}}
{{- range $refs -}}
{{- $ns := $.Release.Namespace -}}
{{- $name := . -}}
{{- if contains "/" . }}{{ $ns = (splitList "/" .) | first }}{{ $name = (splitList "/" .) | last }}{{ end -}}
{{- $_ := set $out $ns (append (get $out $ns | default list) $name | uniq) -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}

{{/*
Secrets only the controller reads (the note key of the C2SP checkpoints), by namespace, as
systemSecrets.
*/}}
{{- define "aibom-vault.controllerSecrets" -}}
{{- $out := dict -}}
{{- with .Values.tlog.noteSecretName -}}
{{- $ns := $.Release.Namespace -}}
{{- $name := . -}}
{{- if contains "/" . }}{{ $ns = (splitList "/" .) | first }}{{ $name = (splitList "/" .) | last }}{{ end -}}
{{- $_ := set $out $ns (list $name) -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}

{{/* TLOG_WITNESSES: `<url> <vkey>` entries, comma-separated. */}}
{{- define "aibom-vault.witnesses" -}}
{{- $out := list -}}
{{- range .Values.tlog.witnesses }}{{ $out = append $out (printf "%s %s" .url .key) }}{{ end -}}
{{- join ", " $out -}}
{{- end }}

{{- define "aibom-vault.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) }}
{{- end }}

{{- define "aibom-vault.databaseSecretName" -}}
{{- default (printf "%s-database" (include "aibom-vault.fullname" .)) .Values.database.secretName }}
{{- end }}

{{- define "aibom-vault.s3SecretName" -}}
{{- default (printf "%s-s3" (include "aibom-vault.fullname" .)) .Values.s3.secretName }}
{{- end }}

{{- define "aibom-vault.signerSecretName" -}}
{{- default (printf "%s-signer" (include "aibom-vault.fullname" .)) .Values.signer.secretName }}
{{- end }}

{{- define "aibom-vault.leaseName" -}}
{{- default (printf "%s-controller" (include "aibom-vault.fullname" .)) .Values.controller.leaseName }}
{{- end }}

{{/*
SERVICE_REQUIRE_SIGNED_EXPORTS: "1" in a managed environment (managed: true, the default), where
turning it off is refused; otherwise what requireSignedExports says.
*/}}
{{- define "aibom-vault.requireSignedExports" -}}
{{- if .Values.managed -}}
{{- if not .Values.requireSignedExports -}}
{{- fail "requireSignedExports: false is refused in a managed environment (managed: true): every artifact leaving a managed install carries a signed manifest. Set managed: false if this install's admin alone decides (docs/install.md, Signed exports)" -}}
{{- end -}}
1
{{- else -}}
{{- include "aibom-vault.flag" .Values.requireSignedExports -}}
{{- end -}}
{{- end }}

{{/* A boolean value as the "1" / "0" the service's flag parser expects. */}}
{{- define "aibom-vault.flag" -}}
{{- if or (eq (toString .) "true") (eq (toString .) "1") }}1{{ else }}0{{ end }}
{{- end }}

{{/*
Environment shared by both containers. Each process validates every key of the schema, so both get
the same configuration; only the listen ports differ (set per container).
*/}}
{{- define "aibom-vault.env" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "aibom-vault.databaseSecretName" . }}
      key: {{ .Values.database.secretKey }}
{{- if .Values.database.migrationSecretKey }}
- name: DATABASE_MIGRATION_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "aibom-vault.databaseSecretName" . }}
      key: {{ .Values.database.migrationSecretKey }}
{{- end }}
{{- if .Values.s3.endpoint }}
- name: S3_ENDPOINT
  value: {{ .Values.s3.endpoint | quote }}
{{- else }}
- name: S3_ENDPOINT
  valueFrom:
    secretKeyRef:
      name: {{ include "aibom-vault.s3SecretName" . }}
      key: {{ .Values.s3.endpointKey }}
{{- end }}
- name: S3_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "aibom-vault.s3SecretName" . }}
      key: {{ .Values.s3.accessKeyKey }}
- name: S3_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "aibom-vault.s3SecretName" . }}
      key: {{ .Values.s3.secretKeyKey }}
- name: S3_BUCKET
  value: {{ .Values.s3.bucket | quote }}
- name: S3_REGION
  value: {{ .Values.s3.region | quote }}
{{- if .Values.s3.tls.caSecret }}
- name: S3_CA_FILE
  value: /etc/aibom-vault/s3-ca/ca.crt
{{- end }}
{{- if .Values.database.tls.caSecret }}
- name: DATABASE_CA_FILE
  value: /etc/aibom-vault/database-ca/ca.crt
{{- end }}
- name: PG_POOL_MAX
  value: {{ .Values.database.poolMax | quote }}
- name: SIGNER_SECRET
  value: {{ include "aibom-vault.signerSecretName" . | quote }}
- name: CUSTOMER_SIGNER_SECRET
  value: {{ .Values.signer.customerSecretName | quote }}
- name: SERVICE_REQUIRE_SIGNED_EXPORTS
  value: {{ include "aibom-vault.requireSignedExports" . | quote }}
- name: SERVICE_TRANSPARENCY_WRITER
  value: {{ include "aibom-vault.flag" .Values.transparency.writer | quote }}
- name: SCITT_BACKEND
  value: {{ .Values.transparency.backend | quote }}
{{- if .Values.transparency.url }}
- name: SCITT_URL
  value: {{ .Values.transparency.url | quote }}
{{- end }}
{{- if .Values.transparency.token.secretName }}
- name: SCITT_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.transparency.token.secretName }}
      key: {{ .Values.transparency.token.secretKey }}
{{- end }}
{{- if .Values.transparency.logSecretName }}
- name: SCITT_LOG_SECRET
  value: {{ .Values.transparency.logSecretName | quote }}
{{- end }}
{{- if .Values.transparency.logIssuer }}
- name: SCITT_LOG_ISSUER
  value: {{ .Values.transparency.logIssuer | quote }}
{{- end }}
{{- if .Values.tsa.url }}
- name: TSA_URL
  value: {{ .Values.tsa.url | quote }}
- name: TSA_TRUST_ANCHORS
  value: /etc/aibom-vault/tsa/ca.crt
- name: TSA_DEADLINE_MS
  value: {{ .Values.tsa.deadlineMs | quote }}
{{- end }}
{{- with .Values.tlog.noteSecretName }}
- name: TLOG_NOTE_SECRET
  value: {{ . | quote }}
{{- end }}
{{- with .Values.tlog.origin }}
- name: TLOG_ORIGIN
  value: {{ . | quote }}
{{- end }}
{{- if .Values.tlog.witnesses }}
- name: TLOG_WITNESSES
  value: {{ include "aibom-vault.witnesses" . | quote }}
{{- end }}
- name: TLOG_WITNESS_TIMEOUT_MS
  value: {{ .Values.tlog.witnessTimeoutMs | quote }}
- name: TLOG_PUBLIC
  value: {{ include "aibom-vault.flag" .Values.tlog.public | quote }}
- name: LEADER_ELECTION_LEASE
  value: {{ include "aibom-vault.leaseName" . | quote }}
{{- if .Values.controller.watchNamespace }}
- name: WATCH_NAMESPACE
  value: {{ .Values.controller.watchNamespace | quote }}
{{- end }}
{{- end }}

{{- define "aibom-vault.volumeMounts" -}}
# readOnlyRootFilesystem: the only writable path is /tmp (in memory for the controller, on the
# node's disk for the API, whose exports spool there).
- name: tmp
  mountPath: /tmp
{{- if .Values.tsa.url }}
- name: tsa-trust-anchors
  mountPath: /etc/aibom-vault/tsa
  readOnly: true
{{- end }}
{{- if .Values.database.tls.caSecret }}
- name: database-ca
  mountPath: /etc/aibom-vault/database-ca
  readOnly: true
{{- end }}
{{- if .Values.s3.tls.caSecret }}
- name: s3-ca
  mountPath: /etc/aibom-vault/s3-ca
  readOnly: true
{{- end }}
{{- end }}
