#!/usr/bin/env bash
# Runs the benchmarks that depend on the backend on SQLite and on PostgreSQL + Redis,
# alternately, so that both are measured on one machine within the same hour
# (bench/HISTORY.md § PostgreSQL + Redis beside SQLite); then the chat benchmark with two
# instances against one on PostgreSQL + Redis.
#
#   bench/backends.sh [RELEASE_DIR] [ROUNDS] [OUT_DIR]
#
# RELEASE_DIR (default $CARGO_TARGET_DIR/release, else target/release) holds the build of
#   cargo build --release -p server --bin agentchat && cargo build --release -p bench -p mock-provider --bins
# ROUNDS (default 2): runs of each benchmark per backend, in the order SQLite, PostgreSQL,
# PostgreSQL, SQLite, ... so that a drift of the machine favours neither.
# OUT_DIR (default bench/backends-<date>) receives one log per run; the end of every log is
# printed as it finishes.
#
# PostgreSQL and Redis: DATABASE_SERVER (default postgres://postgres@127.0.0.1:5432/postgres,
# a user that may create databases; each run gets a scratch database, dropped afterwards)
# and REDIS_SERVER (default redis://127.0.0.1:6379; each run gets its own key prefix).
# scripts/services.sh starts both on a development machine. Everything runs on 127.0.0.1.
set -euo pipefail

release=${1:-${CARGO_TARGET_DIR:-target}/release}
rounds=${2:-2}
out=${3:-bench/backends-$(date -u +%Y%m%dT%H%MZ)}
database=${DATABASE_SERVER:-postgres://postgres@127.0.0.1:5432/postgres}
redis=${REDIS_SERVER:-redis://127.0.0.1:6379}
mkdir -p "$out"
for bin in agentchat auth_overhead chat_latency kb_bm25 mock-provider; do
  [ -x "$release/$bin" ] || {
    echo "missing $release/$bin: build it first (see the top of this script)" >&2
    exit 1
  }
done

# name | arguments ({bin} is the release folder)
benchmarks=(
  "auth_overhead|--seconds 10 --connections 32 --warmup 2 --rounds 3 --in-process-seconds 0"
  "chat_latency|--delay-ms 20 --seconds 10 --rate 500 --scenarios json-rate,stream-rate --server-bin {bin}/agentchat"
  "kb_bm25|--budget-seconds 0 --no-diagnosis"
)

run() { # label name args round [extra args...]
  local label=$1 name=$2 args=$3 round=$4
  shift 4
  args=${args//\{bin\}/$release}
  local log="$out/$name.$label.$round.log"
  echo "== $name $label round $round (load $(cut -d' ' -f1 /proc/loadavg))"
  # shellcheck disable=SC2086
  "$release/$name" $args "$@" >"$log" 2>&1 || echo "   failed: see $log"
  tail -n 14 "$log" | sed 's/^/   /'
}

shared=(--database-url "$database" --redis-url "$redis")
for entry in "${benchmarks[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  # kb_bm25 reads no rate limit: its PostgreSQL run takes only the database.
  if [ "$name" = kb_bm25 ]; then pg=(--database-url "$database"); else pg=("${shared[@]}"); fi
  for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then
      run sqlite "$name" "$args" "$r"
      run postgres-redis "$name" "$args" "$r" "${pg[@]}"
    else
      run postgres-redis "$name" "$args" "$r" "${pg[@]}"
      run sqlite "$name" "$args" "$r"
    fi
  done
done

# Two instances against one, both on PostgreSQL + Redis, alternately.
instances_args="--delay-ms 20 --seconds 10 --rate 500 --concurrency 200 --scenarios json-cn,json-rate,stream-rate --server-bin $release/agentchat"
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=(1 2); else order=(2 1); fi
  for n in "${order[@]}"; do
    run "instances-$n" chat_latency "$instances_args" "$r" --instances "$n" "${shared[@]}"
  done
done
echo "logs in $out"
