#!/usr/bin/env bash
# Runs the service's benchmarks on two builds, alternately, so that both are measured on
# one machine within the same hour (bench/HISTORY.md § The redesign, before and after).
#
#   bench/compare.sh BEFORE_DIR AFTER_DIR [ROUNDS] [OUT_DIR]
#
# BEFORE_DIR and AFTER_DIR are `release` folders of two checkouts, each built with
#   cargo build --release -p server --bin agentchat && cargo build --release -p bench -p mock-provider --bins
# ROUNDS (default 2) is how many times each benchmark runs per build; the order alternates
# (before, after, after, before, ...) so that a drift of the machine does not favour one.
# OUT_DIR (default bench/compare-<date>) receives one log per run; the summary lines of
# every log are printed at the end. Everything runs on 127.0.0.1.
# ONLY (optional, space-separated names such as "auth_overhead chat_latency") limits the run
# to those benchmarks.
set -euo pipefail

before=${1:?usage: bench/compare.sh BEFORE_DIR AFTER_DIR [ROUNDS] [OUT_DIR]}
after=${2:?usage: bench/compare.sh BEFORE_DIR AFTER_DIR [ROUNDS] [OUT_DIR]}
rounds=${3:-2}
out=${4:-bench/compare-$(date -u +%Y%m%dT%H%MZ)}
mkdir -p "$out"
db_dir=$(mktemp -d)
trap 'rm -rf "$db_dir"' EXIT

# name | arguments ({bin} is the build's folder, {db} a database kept per build)
benchmarks=(
  "auth_overhead|--seconds 10 --connections 32 --warmup 2 --rounds 3 --in-process-seconds 0"
  "chat_latency|--delay-ms 20 --seconds 10 --rate 500 --scenarios json-rate,stream-rate --server-bin {bin}/agentchat"
  "chat_streams|--server-bin {bin}/agentchat --rounds 1"
  "kb_bm25|--db {db}/bm25.db --budget-seconds 0"
  "kb_crawl|--rounds 2"
  "kb_ingest|--docs 1000 --pages-per-doc 5 --rounds 3 --isolated"
)

run() { # label dir name args round
  local label=$1 dir=$2 name=$3 args=$4 round=$5
  mkdir -p "$db_dir/$label"
  args=${args//\{bin\}/$dir}
  args=${args//\{db\}/$db_dir/$label}
  local log="$out/$name.$label.$round.log"
  echo "== $name $label round $round (load $(cut -d' ' -f1 /proc/loadavg))"
  # shellcheck disable=SC2086
  "$dir/$name" $args >"$log" 2>&1 || echo "   failed: see $log"
  tail -n 12 "$log" | sed 's/^/   /'
}

for entry in "${benchmarks[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then
      run before "$before" "$name" "$args" "$r"
      run after "$after" "$name" "$args" "$r"
    else
      run after "$after" "$name" "$args" "$r"
      run before "$before" "$name" "$args" "$r"
    fi
  done
done
echo "logs in $out"
