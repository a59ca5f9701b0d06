#!/usr/bin/env bash
# Runs third-party MCP clients against the real `toolgate demo` binary:
#   1. the official Python MCP SDK (tests/clients/python_client.py), in a venv;
#   2. the MCP conformance suite (@modelcontextprotocol/conformance), generic
#      server scenarios only (the others need the suite's own fixture tools).
# Each client gets a fresh server on a free loopback port; the server is
# always killed on exit. Exits non-zero if any client or scenario fails.
#
# Env: TOOLGATE_BIN (a built toolgate; default: cargo builds it),
#      CLIENTS_VENV (venv dir; default: <target dir>/clients-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."

MCP_PY_VERSION=2.3.0         # newest `mcp` on PyPI that installs on Python 3.11
CONFORMANCE_VERSION=0.1.13   # later versions need Node 22
SCENARIOS=(
  server-initialize
  ping
  tools-list
  server-sse-polling
  server-sse-multiple-streams
  dns-rebinding-protection
)
# logging-set-level applies only when logging is advertised; toolgate does
# not advertise it (see gateway/src/README.md).

command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }
command -v npx >/dev/null || { echo "Node.js 20+ (npx) is required" >&2; exit 1; }

target_dir=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
if [ -z "${TOOLGATE_BIN:-}" ]; then
  cargo build -q -p gateway --bin toolgate
  TOOLGATE_BIN="$target_dir/debug/toolgate"
fi
work=$(mktemp -d)
server_pid=""

stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts `toolgate demo` on a free port; sets MCP_URL once /readyz answers.
start_server() {
  local port
  port=$(free_port)
  "$TOOLGATE_BIN" demo --listen "127.0.0.1:$port" --upstream-listen 127.0.0.1:0 \
    >"$work/server.out" 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 1 100); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
      "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
      MCP_URL="http://127.0.0.1:$port/mcp"
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
  echo "toolgate demo did not become ready; its log:" >&2
  cat "$work/server.err" >&2
  return 1
}

failed=0

echo "== python MCP SDK client (mcp==$MCP_PY_VERSION)"
venv="${CLIENTS_VENV:-$target_dir/clients-venv}"
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv"; then
    # Debian/Ubuntu ship venv separately.
    rm -rf "$venv"
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get install -y -q python3-venv >/dev/null
      python3 -m venv "$venv"
    else
      echo "python3 -m venv failed: install python3-venv" >&2
      exit 1
    fi
  fi
fi
"$venv/bin/pip" install -q --disable-pip-version-check "mcp==$MCP_PY_VERSION"
start_server
if ! "$venv/bin/python" tests/clients/python_client.py "$MCP_URL"; then
  failed=1
  cat "$work/server.err" >&2
fi
stop_server

echo "== MCP conformance suite (@modelcontextprotocol/conformance@$CONFORMANCE_VERSION)"
declare -A results
for scenario in "${SCENARIOS[@]}"; do
  start_server
  if npx -y "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" server \
    --url "$MCP_URL" --scenario "$scenario" -o "$work/conformance" >"$work/$scenario.log" 2>&1 &&
    grep -q ' 0 failed' "$work/$scenario.log"; then
    # "Passed: 2/2, 0 failed, 1 warnings", without the colour codes.
    results[$scenario]="pass ($(grep -o 'Passed: .*' "$work/$scenario.log" | sed 's/\x1b\[[0-9;]*m//g' | tail -1))"
  else
    results[$scenario]=FAIL
    failed=1
    echo "-- $scenario failed:" >&2
    cat "$work/$scenario.log" >&2
  fi
  stop_server
done
printf '| scenario | result |\n|---|---|\n'
for scenario in "${SCENARIOS[@]}"; do
  printf '| %s | %s |\n' "$scenario" "${results[$scenario]}"
done

exit "$failed"
