#!/usr/bin/env bash
# Prepares the Python tools the toolgate-tests `deploy` tests use and prints
# the venv's python (export it as TOOLGATE_DEPLOY_PYTHON):
#   - helm-python-sdk: Helm's own Go SDK (v4) as a library in a wheel, to
#     lint and render charts/toolgate where no helm binary can be installed;
#   - kubernetes-validate: the Kubernetes OpenAPI schemas, to validate every
#     rendered object;
#   - beside the venv, in gateway-api/: @kubernetes-models/gateway-api (npm,
#     version pinned in tests/deploy/gateway-api), the Gateway API CRDs'
#     schemas, to validate the chart's HTTPRoute (needs Node.js and npm);
#     @kubernetes-models/prometheus-operator, for its ServiceMonitors and
#     PrometheusRule; @prometheus-io/lezer-promql, Prometheus's PromQL
#     grammar, to parse its alerts' and dashboard's queries.
# The first two come from PyPI. Without them those tests print a note and skip, or
# fail under CI=true (.ci/run sets it).
#
#   export TOOLGATE_DEPLOY_PYTHON=$(tests/deploy/venv.sh)
#   cargo test -p toolgate-tests --test apiserver deploy
#
# Env: DEPLOY_VENV (venv dir; default: <target dir>/deploy-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."

HELM_SDK_VERSION=0.2.2          # bundles Helm v4.2.3
KUBERNETES_VALIDATE_VERSION=1.32.0

if [ -z "${DEPLOY_VENV:-}" ]; then
  target_dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  DEPLOY_VENV="$target_dir/deploy-venv"
fi
stamp="$DEPLOY_VENV/.toolgate-$HELM_SDK_VERSION-$KUBERNETES_VALIDATE_VERSION"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$DEPLOY_VENV" >&2
  "$DEPLOY_VENV/bin/pip" install -q --disable-pip-version-check \
    "helm-python-sdk==$HELM_SDK_VERSION" \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
  touch "$stamp"
fi
gateway_api="$DEPLOY_VENV/gateway-api"
if ! cmp -s tests/deploy/gateway-api/package-lock.json "$gateway_api/package-lock.json" ||
  [ ! -d "$gateway_api/node_modules" ]; then
  command -v npm >/dev/null || { echo "venv.sh: npm (Node.js 20+) is required" >&2; exit 1; }
  mkdir -p "$gateway_api"
  cp tests/deploy/gateway-api/package.json tests/deploy/gateway-api/package-lock.json "$gateway_api/"
  (cd "$gateway_api" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
# Always the repository's copy: the script may change without the lock.
cp tests/deploy/gateway-api/validate.mjs tests/deploy/gateway-api/promql.mjs "$gateway_api/"
echo "$DEPLOY_VENV/bin/python"
