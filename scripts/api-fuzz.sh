#!/usr/bin/env bash
# Property-based test of the HTTP API from its own OpenAPI document (schemathesis, installed
# by scripts/setup.sh): requests generated from `/api/openapi.json` must never get a 5xx,
# answers must match the document, requests the document declares valid must be accepted
# (no 400/422) and requests it declares invalid must be refused.
#
#   scripts/api-fuzz.sh BINARY MODEL_URL   # BINARY: an `agentchat` build; MODEL_URL: the
#                                          # mock model provider's base, e.g. http://127.0.0.1:3188/v1/
#
# Starts BINARY alone on FUZZ_ADDR (127.0.0.1:3102) with a temporary data folder and SQLite
# database, signs up an account (verified and put on the Pro plan with `agentchat admin`),
# whose plan budget is raised with RATE_LIMITS/AGENT_LIMITS so that the run is not mostly
# 429s, creates an API key with every scope and sends it on every request. Environment:
#   FUZZ_MAX_EXAMPLES  generated requests per operation and phase (default 5)
#   FUZZ_SEED          hypothesis seed (default 20261129; printed)
#   FUZZ_ADDR          where the server listens
# The figures of the run (operations, requests, failures) are printed at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$#" -ne 2 ]; then
  sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
binary="$(realpath "$1")"
model_url="$2"
addr="${FUZZ_ADDR:-127.0.0.1:3102}"
max_examples="${FUZZ_MAX_EXAMPLES:-5}"
seed="${FUZZ_SEED:-20261129}"
venv="${SCHEMATHESIS_DIR:-$HOME/.cache/agentchat/schemathesis}"
if [ ! -x "$venv/bin/st" ]; then
  echo "schemathesis is not installed in $venv: run scripts/setup.sh --test-only" >&2
  exit 1
fi

. scripts/stop.sh
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then stop_process "$server_pid"; fi
  rm -rf "$work" || true
}
trap cleanup EXIT

data="$work/data"
mkdir -p "$data"
# The Pro plan's budgets, raised for this account alone: a run sends thousands of requests
# a minute and creates hundreds of agents. The per-IP budget of unauthenticated endpoints
# stays as it is (their 429 is declared).
server_env=(
  PATH="/usr/bin:/bin"
  DATA_DIR="$data" DATABASE_URL="sqlite://$data/fuzz.db"
  LEPTOS_SITE_ADDR="$addr" PUBLIC_URL="http://$addr"
  OPENAI_API_KEY="fuzz-mock-key" OPENAI_BASE_URL="$model_url"
  RATE_LIMITS="pro=1000000" AGENT_LIMITS="pro=100000"
  TELEGRAM_API_URL="http://127.0.0.1:9" SLACK_API_URL="http://127.0.0.1:9/api"
  RUST_LOG="warn"
)
(cd "$work" && exec env -i "${server_env[@]}" "$binary" serve) >"$work/server.log" 2>&1 &
server_pid=$!

"$venv/bin/python" - "$addr" "$server_pid" <<'PY' || { tail -n 40 "$work/server.log" >&2; exit 1; }
import sys, time, urllib.request, os
addr, pid = sys.argv[1], int(sys.argv[2])
for _ in range(600):
    try:
        with urllib.request.urlopen(f"http://{addr}/api/health", timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("the server exited at start")
    time.sleep(0.1)
sys.exit("the server did not answer /api/health")
PY

email="fuzz@example.com"
password="fuzz-password-1"
post() {
  "$venv/bin/python" - "$addr" "$@" <<'PY'
import json, sys, urllib.request
addr, path, body = sys.argv[1], sys.argv[2], sys.argv[3]
headers = {"Content-Type": "application/json"}
if len(sys.argv) > 4:
    headers["Authorization"] = "Bearer " + sys.argv[4]
req = urllib.request.Request(f"http://{addr}{path}", data=body.encode(), headers=headers, method="POST")
with urllib.request.urlopen(req, timeout=30) as r:
    print(r.read().decode())
PY
}
field() { "$venv/bin/python" -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"; }

post /api/auth/signup "{\"name\":\"Fuzz\",\"email\":\"$email\",\"password\":\"$password\"}" >/dev/null
admin() { (cd "$work" && env -i "${server_env[@]}" "$binary" admin "$@") >/dev/null; }
admin verify-email "$email"
admin set-plan "$email" pro
access="$(post /api/auth/login "{\"email\":\"$email\",\"password\":\"$password\"}" | field tokens.accessToken)"
scopes="$("$venv/bin/python" -c 'import json,urllib.request,sys
doc=json.load(urllib.request.urlopen(f"http://{sys.argv[1]}/api/openapi.json"))
print(json.dumps(doc["components"]["schemas"]["CreateApiKeyRequest"]["properties"]["scopes"]["items"]["enum"]))' "$addr")"
key="$(post /api/api-keys "{\"name\":\"fuzz\",\"scopes\":$scopes}" "$access" | field key)"

printf 'schemathesis %s: %s requests per operation and phase, seed %s, against %s\n' \
  "$("$venv/bin/st" --version | awk '{print $NF}')" "$max_examples" "$seed" "$addr"
status=0
# From the temporary folder, where schemathesis keeps its cache.
config="$PWD/scripts/schemathesis.toml"
(cd "$work" && "$venv/bin/st" --config-file "$config" run "http://$addr/api/openapi.json" \
  --url "http://$addr" \
  -H "Authorization: Bearer $key" \
  --max-examples "$max_examples" --seed "$seed" \
  --report junit --report-dir "$work/report") || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- the server's log (last 40 lines)" >&2
  tail -n 40 "$work/server.log" >&2
fi
exit "$status"
