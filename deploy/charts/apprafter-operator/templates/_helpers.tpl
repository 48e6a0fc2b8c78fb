{{/* Labels every object carries, but the instance. */}}
{{- define "apprafter.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: apprafter
{{- end }}

{{/* Labels of objects that belong to neither component. */}}
{{- define "apprafter.labels" -}}
{{ include "apprafter.commonLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector labels of one component: (list $ "operator"|"webhook"). */}}
{{- define "apprafter.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ (index $root.Values (index . 1)).name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end }}

{{/* All labels of one component's objects: (list $ "operator"|"webhook"). */}}
{{- define "apprafter.componentLabels" -}}
{{ include "apprafter.selector" . }}
app.kubernetes.io/component: {{ index . 1 }}
{{ include "apprafter.commonLabels" (index . 0) }}
{{- end }}

{{/* The image reference: registry/repository:tag[@digest]; the tag defaults to appVersion, never latest. */}}
{{- define "apprafter.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: latest is not allowed: pin a version (or set image.digest)" -}}
{{- end -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end -}}
{{- printf "%s:%s" $repo $tag -}}
{{- with .Values.image.digest }}@{{ . }}{{ end -}}
{{- end }}

{{/* The operator's username, the only writer of status the webhook accepts. */}}
{{- define "apprafter.operatorUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.operator.name }}
{{- end }}

{{/* "true" when the operator binds ResourceClaims to ServiceProviders (--claim-binder): the webhook names no other
claim provider (webhook.claimStatusUsers empty, or the operator's account among them). Named others alone may write
claim status, so they bind (docs/platform-services.md). */}}
{{- define "apprafter.claimBinder" -}}
{{- $users := .Values.webhook.claimStatusUsers | default list -}}
{{- if or (empty $users) (has (include "apprafter.operatorUser" .) $users) }}true{{ end -}}
{{- end }}

{{/* cert-manager's Certificate of the webhook's serving certificate, as namespace/name. */}}
{{- define "apprafter.webhookCertificate" -}}
{{ .Release.Namespace }}/{{ .Values.webhook.name }}
{{- end }}

{{/* Pod placement and pull settings of one component: (list $ "operator"|"webhook"). */}}
{{- define "apprafter.podCommon" -}}
{{- $root := index . 0 -}}
{{- $v := index $root.Values (index . 1) -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- end }}

{{/* The Secret holding the webhook's serving certificate (tls.crt, tls.key). */}}
{{- define "apprafter.webhookTLSSecret" -}}
{{- if .Values.webhook.certManager.enabled -}}
{{ .Values.webhook.name }}-tls
{{- else -}}
{{ required "webhook.tls.secretName: name the kubernetes.io/tls Secret of the webhook (or enable webhook.certManager)" .Values.webhook.tls.secretName }}
{{- end -}}
{{- end }}

{{/* How the API server reaches and trusts the webhook (one entry of a webhook configuration): (list $ path). */}}
{{- define "apprafter.webhookClient" -}}
{{- $root := index . 0 -}}
clientConfig:
  service:
    name: {{ $root.Values.webhook.name }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ index . 1 }}
    port: 443
  {{- if not $root.Values.webhook.certManager.enabled }}
  caBundle: {{ required "webhook.tls.caBundle: the base64 PEM of the CA that signed webhook.tls.secretName (or enable webhook.certManager)" $root.Values.webhook.tls.caBundle }}
  {{- end }}
admissionReviewVersions: [v1]
sideEffects: None
timeoutSeconds: {{ $root.Values.webhook.timeoutSeconds }}
matchPolicy: Equivalent
{{- end }}

{{/* The platform file's mount, argument, volume and checksum (platform.settings non-empty): (list $ "part"). */}}
{{- define "apprafter.platformFile" -}}/etc/apprafter/platform/platform.yaml{{- end }}
{{- define "apprafter.platformConfigMap" -}}{{ .Release.Name }}-platform{{- end }}
