#!/usr/bin/env bash
# End to end on a real (kind) cluster: what a person does with toolgate,
# checked. Needs docker, kind, kubectl, helm and curl, and host ports 80/443
# free (kind-config.yaml maps them). It cannot run on toolgate's CI or dev
# machines (no Docker engine, no internet): run it by hand.
#
#   1. creates the kind cluster of kind-config.yaml (ingress-ready node);
#   2. builds the gateway and operator images (deploy/docker/Dockerfile)
#      and loads them into the cluster;
#   3. installs ingress-nginx and `helm install`s charts/toolgate with an
#      Ingress for $MCP_HOST -- or, with EXPOSE=gateway-api, installs Envoy
#      Gateway (a Gateway API implementation) and a Gateway, and installs
#      the chart with an HTTPRoute instead (reached through a port-forward
#      to the Gateway's Service);
#   4. connects an MCP client (curl speaking JSON-RPC over streamable HTTP)
#      through the ingress, `kubectl apply -f deploy/examples/`, and measures
#      the time from the apply to the pet store's tools being listed, over
#      $ROUNDS delete/apply rounds;
#   5. waits for the McpUpstream to be Ready, calls a tool end to end
#      (gateway -> in-cluster pet store), and tears the cluster down.
#
# Env: CLUSTER (default toolgate), MCP_HOST (default mcp.toolgate.localhost;
# curl resolves it to 127.0.0.1 itself), ROUNDS (default 5), KEEP_CLUSTER=1
# (leave the cluster up), SKIP_BUILD=1 (images already loaded),
# INGRESS_NGINX_MANIFEST (the ingress-nginx manifest for kind to apply),
# EXPOSE (ingress, the default, or gateway-api), ENVOY_GATEWAY_VERSION
# (the Envoy Gateway Helm chart for EXPOSE=gateway-api; it brings the
# Gateway API CRDs).
#
# Images are built without provenance/SBOM attestations: Docker Engine 29+
# keeps images in the containerd store, where `docker save` (which `kind
# load` runs) leaves the attestation manifests out and kind then fails with
# `ctr: content digest ... not found` (kind issues #3795, #4236).
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER=${CLUSTER:-toolgate}
MCP_HOST=${MCP_HOST:-mcp.toolgate.localhost}
ROUNDS=${ROUNDS:-5}
NS=toolgate-system
INGRESS_NGINX_MANIFEST=${INGRESS_NGINX_MANIFEST:-https://raw.githubusercontent.com/kubernetes/ingress-nginx/controller-v1.12.1/deploy/static/provider/kind/deploy.yaml}
EXPOSE=${EXPOSE:-ingress}
ENVOY_GATEWAY_VERSION=${ENVOY_GATEWAY_VERSION:-v1.5.0}
case $EXPOSE in
  ingress) MCP_PORT=80 ;;
  gateway-api) MCP_PORT=${MCP_PORT:-18080} ;;
  *) echo "kind.sh: EXPOSE must be ingress or gateway-api, not $EXPOSE" >&2; exit 1 ;;
esac
TAG=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/toolgate/Chart.yaml)
GATEWAY_IMAGE=ghcr.io/toolgate/toolgate-gateway:$TAG
OPERATOR_IMAGE=ghcr.io/toolgate/toolgate-operator:$TAG
MCP_URL="http://$MCP_HOST:$MCP_PORT/mcp"
PROTOCOL=2025-06-18

for tool in docker kind kubectl helm curl; do
  command -v "$tool" >/dev/null || { echo "kind.sh: $tool is required" >&2; exit 1; }
done

log() { printf '\n== %s\n' "$*"; }

work=$(mktemp -d)
port_forward=""
cleanup() {
  local status=$?
  [ -z "$port_forward" ] || kill "$port_forward" 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "kind.sh: FAILED (exit $status); state of the install:" >&2
    kubectl get mcpu -A -o wide >&2 || true
    kubectl -n "$NS" get pods -o wide >&2 || true
    kubectl -n "$NS" logs deploy/toolgate-operator --tail=50 >&2 || true
    kubectl -n "$NS" logs deploy/toolgate-gateway --tail=50 >&2 || true
  fi
  rm -rf "$work"
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  else
    echo "cluster $CLUSTER kept (kind delete cluster --name $CLUSTER)"
  fi
}
trap cleanup EXIT

# Milliseconds since the epoch (bash 5's EPOCHREALTIME; else python3).
now_ms() {
  if [ -n "${EPOCHREALTIME:-}" ]; then
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
  else
    python3 -c 'import time; print(int(time.time() * 1000))'
  fi
}

# POSTs one JSON-RPC message to the MCP endpoint through the ingress.
# Prints the JSON response (from an SSE `data:` line or a plain body);
# headers go to $work/headers. Extra args: more curl headers.
mcp_post() {
  local body=$1
  shift
  curl -sS --max-time 10 --resolve "$MCP_HOST:$MCP_PORT:127.0.0.1" \
    -D "$work/headers" -o "$work/body" \
    -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    "$@" --data "$body" "$MCP_URL" || return 1
  if grep -qi '^content-type: *text/event-stream' "$work/headers"; then
    sed -n 's/^data: *//p' "$work/body" | grep '"jsonrpc"' | tail -n 1
  else
    cat "$work/body"
  fi
}

# JSON-RPC message in the current session ($SESSION); prints the response.
mcp_request() {
  local headers=(-H "MCP-Protocol-Version: $PROTOCOL")
  if [ -n "$SESSION" ]; then
    headers+=(-H "Mcp-Session-Id: $SESSION")
  fi
  mcp_post "$1" "${headers[@]}"
}

# A fresh MCP session (initialize, then initialized); sets SESSION (empty
# when the server runs without sessions).
SESSION=""
mcp_connect() {
  SESSION=""
  local out
  out=$(mcp_post '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'"$PROTOCOL"'","capabilities":{},"clientInfo":{"name":"kind.sh","version":"1"}}}') || return 1
  case $out in *'"result"'*) ;; *) return 1 ;; esac
  SESSION=$(sed -n 's/^[Mm][Cc][Pp]-[Ss][Ee][Ss][Ss][Ii][Oo][Nn]-[Ii][Dd]: *//p' "$work/headers" | tr -d '\r')
  mcp_request '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
}

# Whether a freshly connected client lists the pet store's tools now:
# 0 listed, 1 answered without them, 2 no answer (connection refused, a
# 5xx, a timeout): "not listed" needs an answer that says so.
tools_listed() {
  local out
  mcp_connect 2>/dev/null || return 2
  out=$(mcp_request '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' 2>/dev/null) || return 2
  case $out in
    *'"pets__find_pets"'*) return 0 ;;
    *'"result"'*) return 1 ;;
    *) return 2 ;;
  esac
}

log "kind cluster $CLUSTER"
if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --config kind-config.yaml --wait 120s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  log "images $GATEWAY_IMAGE, $OPERATOR_IMAGE"
  docker build --provenance=false --sbom=false -f deploy/docker/Dockerfile --target gateway -t "$GATEWAY_IMAGE" .
  docker build --provenance=false --sbom=false -f deploy/docker/Dockerfile --target operator -t "$OPERATOR_IMAGE" .
  docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "^ghcr.io/toolgate/"
  kind load docker-image --name "$CLUSTER" "$GATEWAY_IMAGE" "$OPERATOR_IMAGE"
fi

if [ "$EXPOSE" = ingress ]; then
  log "ingress-nginx"
  kubectl apply -f "$INGRESS_NGINX_MANIFEST"
  kubectl -n ingress-nginx rollout status deploy/ingress-nginx-controller --timeout=300s
  # (Newer manifests delete the admission jobs once done.)
  kubectl -n ingress-nginx wait --for=condition=complete job --all --timeout=120s || true
  expose=(--set ingress.enabled=true --set ingress.host="$MCP_HOST")
else
  log "Envoy Gateway $ENVOY_GATEWAY_VERSION (Gateway API) and a Gateway"
  helm upgrade --install eg oci://docker.io/envoyproxy/gateway-helm --version "$ENVOY_GATEWAY_VERSION" \
    -n envoy-gateway-system --create-namespace --wait --timeout 300s
  kubectl apply -f - <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: eg
spec:
  controllerName: gateway.envoyproxy.io/gatewayclass-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: eg
  namespace: envoy-gateway-system
spec:
  gatewayClassName: eg
  listeners:
    - name: http
      protocol: HTTP
      port: 80
      allowedRoutes:
        namespaces:
          from: All
YAML
  kubectl -n envoy-gateway-system wait gateway/eg --for=condition=Programmed --timeout=300s
  expose=(--set gatewayApi.enabled=true --set "gatewayApi.hostnames={$MCP_HOST}"
    --set "gatewayApi.parentRefs[0].name=eg" --set "gatewayApi.parentRefs[0].namespace=envoy-gateway-system"
    --set "gatewayApi.parentRefs[0].sectionName=http")
fi

log "helm install toolgate"
# The ingress controller's admission webhook may refuse Ingresses for a few
# seconds after it is Ready; retry.
for attempt in 1 2 3 4 5 6; do
  if helm upgrade --install toolgate charts/toolgate -n "$NS" --create-namespace "${expose[@]}"; then
    break
  fi
  [ "$attempt" = 6 ] && exit 1
  sleep 5
done
kubectl -n "$NS" rollout status deploy/toolgate-operator --timeout=180s
if [ "$EXPOSE" = gateway-api ]; then
  kubectl -n "$NS" wait httproute/toolgate-gateway \
    --for=jsonpath='{.status.parents[0].conditions[?(@.type=="Accepted")].status}'=True --timeout=120s
  # kind maps host ports to the node only; reach the Gateway's Envoy
  # Service (named by Envoy Gateway) through a port-forward instead.
  envoy_svc=$(kubectl -n envoy-gateway-system get svc \
    -l gateway.envoyproxy.io/owning-gateway-name=eg,gateway.envoyproxy.io/owning-gateway-namespace=envoy-gateway-system \
    -o jsonpath='{.items[0].metadata.name}')
  kubectl -n envoy-gateway-system port-forward "svc/$envoy_svc" "$MCP_PORT:80" >"$work/port-forward.log" 2>&1 &
  port_forward=$!
fi

log "the demo pet store API (in-cluster upstream)"
kubectl apply -f deploy/examples/petstore-demo.yaml
kubectl -n default rollout status deploy/petstore --timeout=120s

log "apply -> listed through the $EXPOSE ($ROUNDS rounds)"
latencies=()
for round in $(seq 1 "$ROUNDS"); do
  if [ "$round" -gt 1 ]; then
    kubectl delete -f deploy/examples/petstore-upstream.yaml --wait=true >/dev/null
    deadline=$(($(now_ms) + 60000))
    while :; do
      status=0
      tools_listed || status=$?
      [ "$status" = 1 ] && break
      [ "$(now_ms)" -lt "$deadline" ] || { echo "tools still listed (or no answer: $status) 60 s after delete" >&2; exit 1; }
      sleep 0.2
    done
  fi
  start=$(now_ms)
  kubectl apply -f deploy/examples/ >/dev/null
  deadline=$((start + 180000))
  until tools_listed; do
    [ "$(now_ms)" -lt "$deadline" ] || { echo "pets__find_pets not listed 180 s after apply" >&2; exit 1; }
    sleep 0.1
  done
  ms=$(($(now_ms) - start))
  latencies+=("$ms")
  echo "round $round: listed ${ms} ms after kubectl apply"
done
sorted=$(printf '%s\n' "${latencies[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(((${#latencies[@]} + 1) / 2))p")
worst=$(echo "$sorted" | tail -n 1)
echo "apply -> listed: median ${median} ms, max ${worst} ms over ${#latencies[@]} rounds (the first includes gateway readiness)"

log "McpUpstream Ready"
kubectl -n default wait mcpu/petstore --for=condition=Ready --timeout=120s
kubectl get mcpu -A

log "tools/call through the $EXPOSE"
mcp_connect
result=$(mcp_request '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pets__find_pets","arguments":{"kind":"cat"}}}')
echo "$result"
case $result in
  *'"isError":true'*) echo "tools/call failed" >&2; exit 1 ;;
  *Tom*) ;;
  *) echo "tools/call: expected the cat Tom in the result" >&2; exit 1 ;;
esac

log "OK: apply -> listed median ${median} ms, max ${worst} ms; tools/call answered by the in-cluster pet store"
