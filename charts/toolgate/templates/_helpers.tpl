{{/* Chart name, possibly overridden. */}}
{{- define "toolgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of object names: the release name, plus the chart name unless
the release name already contains it. */}}
{{- define "toolgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "toolgate.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "toolgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolgate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component ("operator" or "gateway"). */}}
{{- define "toolgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgate.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "toolgate.operator.fullname" -}}
{{- printf "%s-operator" (include "toolgate.fullname" .) -}}
{{- end -}}

{{- define "toolgate.gateway.fullname" -}}
{{- printf "%s-gateway" (include "toolgate.fullname" .) -}}
{{- end -}}

{{- define "toolgate.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "toolgate.operator.fullname" .) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "toolgate.gateway.serviceAccountName" -}}
{{- if .Values.gateway.serviceAccount.create -}}
{{- default (include "toolgate.gateway.fullname" .) .Values.gateway.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.gateway.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "toolgate.operator.image" -}}
{{- printf "%s:%s" .Values.operator.image.repository (default .Chart.AppVersion .Values.operator.image.tag) -}}
{{- end -}}

{{- define "toolgate.gateway.image" -}}
{{- printf "%s:%s" .Values.gateway.image.repository (default .Chart.AppVersion .Values.gateway.image.tag) -}}
{{- end -}}

{{/* Host header values the gateway accepts: the Ingress host, the
Service's DNS names, loopback (kubectl port-forward), and any extra. */}}
{{- define "toolgate.gateway.allowedHosts" -}}
{{- $svc := include "toolgate.gateway.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list -}}
{{- if and .Values.ingress.enabled .Values.ingress.host -}}
{{- $hosts = append $hosts .Values.ingress.host -}}
{{- end -}}
{{- if .Values.gatewayApi.enabled -}}
{{- $hosts = concat $hosts .Values.gatewayApi.hostnames -}}
{{- end -}}
{{- $hosts = concat $hosts (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) "localhost" "127.0.0.1") -}}
{{- $hosts = concat $hosts .Values.gateway.extraAllowedHosts -}}
{{- range $hosts }}
- --allowed-host
- {{ . | quote }}
{{- end -}}
{{- end -}}

{{/* host:port to listen on: `listenHost` (an IPv6 address gets brackets)
and the port given. */}}
{{- define "toolgate.listenAddress" -}}
{{- $host := .root.Values.listenHost -}}
{{- if and (contains ":" $host) (not (hasPrefix "[" $host)) -}}
{{- $host = printf "[%s]" $host -}}
{{- end -}}
{{- printf "%s:%v" $host .port -}}
{{- end -}}

{{/* Whether any inbound authentication method is configured. */}}
{{- define "toolgate.gateway.authEnabled" -}}
{{- $in := .Values.gateway.inbound -}}
{{- if or $in.jwt $in.apiKeys.existingSecret $in.introspection.url -}}true{{- end -}}
{{- end -}}

{{/* The gateway's public MCP URL (RFC 9728 resource): the value, else
from the Ingress host or the first HTTPRoute hostname. */}}
{{- define "toolgate.gateway.resource" -}}
{{- $in := .Values.gateway.inbound -}}
{{- if $in.resource -}}
{{- $in.resource -}}
{{- else if and .Values.ingress.enabled .Values.ingress.host -}}
{{- printf "%s://%s/mcp" (ternary "https" "http" (not (empty .Values.ingress.tlsSecretName))) .Values.ingress.host -}}
{{- else if and .Values.gatewayApi.enabled .Values.gatewayApi.hostnames -}}
{{- printf "https://%s/mcp" (first .Values.gatewayApi.hostnames) -}}
{{- end -}}
{{- end -}}

{{/* The gateway config file: the `inbound:` section. Secrets appear as
the paths they are mounted at, never as values. */}}
{{- define "toolgate.gateway.config" -}}
{{- $in := .Values.gateway.inbound -}}
{{- if include "toolgate.gateway.authEnabled" . -}}
{{- $resource := include "toolgate.gateway.resource" . -}}
{{- if not $resource -}}
{{- fail "gateway.inbound.resource is required with inbound authentication (the gateway's public MCP URL, e.g. https://mcp.example.com/mcp): no ingress.host or gatewayApi hostname to derive it from" -}}
{{- end -}}
{{- if and $in.introspection.url (not $in.introspection.clientSecret.existingSecret) -}}
{{- fail "gateway.inbound.introspection.clientSecret.existingSecret is required with gateway.inbound.introspection.url" -}}
{{- end -}}
{{- $cfg := dict "resource" $resource "leewaySeconds" (int $in.leewaySeconds) "defaultAccess" $in.defaultAccess -}}
{{- with $in.jwt }}{{ $_ := set $cfg "jwt" . }}{{ end -}}
{{- with $in.claims }}{{ $_ := set $cfg "claims" . }}{{ end -}}
{{- with $in.scopesSupported }}{{ $_ := set $cfg "scopesSupported" . }}{{ end -}}
{{- if $in.apiKeys.existingSecret -}}
{{- $_ := set $cfg "apiKeys" (dict "file" (printf "/var/run/toolgate/api-keys/%s" $in.apiKeys.key)) -}}
{{- end -}}
{{- if $in.introspection.url -}}
{{- $_ := set $cfg "introspection" (dict "url" $in.introspection.url "clientId" $in.introspection.clientId "clientSecret" (dict "file" (printf "/var/run/toolgate/introspection/%s" $in.introspection.clientSecret.key)) "cacheTtlSeconds" (int $in.introspection.cacheTtlSeconds)) -}}
{{- end -}}
{{- toYaml (dict "inbound" $cfg) -}}
{{- else -}}
# No inbound authentication: the MCP endpoints are open (gateway.inbound).
inbound:
  defaultAccess: {{ $in.defaultAccess }}
{{- end -}}
{{- with include "toolgate.gateway.listing" . }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* `listing:` of the gateway config (gateway.listing): only what differs
from the defaults, so a default install renders no section. */}}
{{- define "toolgate.gateway.listing" -}}
{{- $l := .Values.gateway.listing -}}
{{- $cfg := dict -}}
{{- if and $l.mode (ne $l.mode "all") }}{{ $_ := set $cfg "mode" $l.mode }}{{ end -}}
{{- with $l.prefixMode }}{{ $_ := set $cfg "prefixMode" . }}{{ end -}}
{{- with $l.pinned }}{{ $_ := set $cfg "pinned" . }}{{ end -}}
{{- with $l.descriptions }}{{ $_ := set $cfg "descriptions" . }}{{ end -}}
{{- if $cfg }}{{ toYaml (dict "listing" $cfg) }}{{ end -}}
{{- end -}}

{{/* Environment of one component's logs and traces (dict "root" .
"component" "gateway"|"operator"): TOOLGATE_LOG_FORMAT, and the standard
OTEL_* variables only when otel.endpoint is set. Goes after POD_NAME and
POD_NAMESPACE, which the resource attributes refer to. */}}
{{- define "toolgate.telemetryEnv" -}}
{{- $o := .root.Values.otel -}}
- name: TOOLGATE_LOG_FORMAT
  value: {{ .root.Values.logFormat | quote }}
{{- if $o.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $o.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $o.protocol | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "toolgate-%s" .component | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $o.sampler | quote }}
{{- with $o.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- $attrs := list "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.pod.name=$(POD_NAME)" }}
{{- range $k, $v := $o.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $k $v) }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
{{- with $o.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $o.headersSecret.key }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Label matchers of one component's series in the PrometheusRule (dict
"root" . "component" "gateway"|"operator"): the value, else the job the
chart's ServiceMonitor gives them (the metrics Service's name) and the
release namespace. */}}
{{- define "toolgate.metrics.selector" -}}
{{- $custom := get .root.Values.metrics.prometheusRule (printf "%sSelector" .component) -}}
{{- if $custom -}}
{{- $custom -}}
{{- else -}}
{{- printf "job=%q,namespace=%q" (printf "%s-%s-metrics" (include "toolgate.fullname" .root) .component) .root.Release.Namespace -}}
{{- end -}}
{{- end -}}
