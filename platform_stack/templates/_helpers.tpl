{{/*
apprafter.merge: deep-merge the map (index . 1) into the map (index . 0), in place.
Maps merge key by key, any other value replaces, a null deletes the key. Unlike sprig's
mergeOverwrite this lets false, 0 and "" override (PlatformStack overrides must be able to turn
things off). platform_stack/effective.py implements the same rule; tests hold the two together.
*/}}
{{- define "apprafter.merge" -}}
{{- $dst := index . 0 -}}
{{- $src := index . 1 -}}
{{- range $k, $v := $src -}}
{{- if kindIs "invalid" $v -}}
{{- $_ := unset $dst $k -}}
{{- else if and (kindIs "map" $v) (hasKey $dst $k) (kindIs "map" (index $dst $k)) -}}
{{- $_ := include "apprafter.merge" (list (index $dst $k) $v) -}}
{{- else if kindIs "map" $v -}}
{{- $_ := set $dst $k (deepCopy $v) -}}
{{- else -}}
{{- $_ := set $dst $k $v -}}
{{- end -}}
{{- end -}}
{{- end -}}
