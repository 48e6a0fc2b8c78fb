{{/* Labels every object of the chart carries. */}}
{{- define "gateway.labels" -}}
app.kubernetes.io/name: apprafter-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: apprafter
app.kubernetes.io/version: {{ .Chart.Version | quote }}
{{- end -}}

{{/* gateway.secret (list $ network): the Secret a Gateway's HTTPS listener serves, written by its Certificate. */}}
{{- define "gateway.secret" -}}
{{- $gw := index (index . 0).Values.gateways (index . 1) -}}
{{- printf "%s-tls" $gw.name -}}
{{- end -}}

{{/* gateway.base (list $ network): the domain a network's hostnames live under. */}}
{{- define "gateway.base" -}}
{{- $root := index . 0 -}}
{{- $gw := index $root.Values.gateways (index . 1) -}}
{{- $domain := required "domain: set the platform's base domain (PlatformStack spec.values.domain)" $root.Values.domain -}}
{{- if $gw.subdomain }}{{ printf "%s.%s" $gw.subdomain $domain }}{{ else }}{{ $domain }}{{ end -}}
{{- end -}}

{{/* gateway.wildcards: "true" when the issuer can sign the networks' wildcard certificates (a CA of the cluster's
own, the administrator's issuer, or ACME with a DNS-01 solver); HTTP-01 proves one hostname at a time. */}}
{{- define "gateway.wildcards" -}}
{{- $issuer := .Values.issuer -}}
{{- if or (ne $issuer.type "acme") $issuer.acme.dns01 }}true{{ end -}}
{{- end -}}
