#!/usr/bin/env bash
# Installs the official MCP SDK clients that cargo tests drive, and prints
# the directory they live in (export it as TOOLGATE_SDK_CLIENTS):
#   <dir>/venv/bin/python        Python with `mcp` (PyPI, pinned below)
#   <dir>/node/node_modules/...  @modelcontextprotocol/sdk (npm, pinned in
#                                tests/clients/sdk/package-lock.json)
# Tests find them with toolgate_tests::tools::sdk_clients(); without them
# those tests print a note and skip, or fail under CI=true (.ci/run).
#
#   export TOOLGATE_SDK_CLIENTS=$(tests/clients/sdk/setup.sh)
#
# Env: SDK_CLIENTS_DIR (default: <target dir>/sdk-clients).
set -euo pipefail
cd "$(dirname "$0")/../../.."

MCP_PY_VERSION=2.3.0 # newest `mcp` on PyPI that installs on Python 3.11

if [ -z "${SDK_CLIENTS_DIR:-}" ]; then
  target_dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  SDK_CLIENTS_DIR="$target_dir/sdk-clients"
fi
mkdir -p "$SDK_CLIENTS_DIR"
venv="$SDK_CLIENTS_DIR/venv"
stamp="$venv/.toolgate-mcp-$MCP_PY_VERSION"
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "mcp==$MCP_PY_VERSION" >&2
  touch "$stamp"
fi
node_dir="$SDK_CLIENTS_DIR/node"
if ! cmp -s tests/clients/sdk/package-lock.json "$node_dir/package-lock.json" ||
  [ ! -d "$node_dir/node_modules" ]; then
  command -v npm >/dev/null || { echo "setup.sh: npm (Node.js 20+) is required" >&2; exit 1; }
  mkdir -p "$node_dir"
  cp tests/clients/sdk/package.json tests/clients/sdk/package-lock.json "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
echo "$SDK_CLIENTS_DIR"
