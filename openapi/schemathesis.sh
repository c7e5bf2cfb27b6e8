#!/usr/bin/env bash
# Runs schemathesis (pip install schemathesis) with every check against a real `rtm serve` with
# its admin listener, both on free loopback ports, with a fresh data directory:
#
#     openapi/schemathesis.sh [RTM_BINARY] [extra st run options]
#
# RTM_BINARY defaults to .build/debug/rtm (build it first). Exits with schemathesis's status:
# 0 when no check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
rtm=${1:-.build/debug/rtm}
shift || true
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
admin_port=$(free_port)
key=schemathesis-admin-key
data=$(mktemp -d)
"$rtm" serve --port "$port" --data-dir "$data" --admin-key "$key" --admin-listen "127.0.0.1:$admin_port" \
    --log-level error >"$data/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $admin_port), 1)" 2>/dev/null; then break; fi
    sleep 0.1
done
st=$(command -v st || true)
if [ -z "$st" ]; then st="python3 -m schemathesis.cli"; fi
$st run openapi/admin.yaml --url "http://127.0.0.1:$admin_port" -H "Authorization: Bearer $key" \
    --checks all -n 30 --seed 1 "$@"
