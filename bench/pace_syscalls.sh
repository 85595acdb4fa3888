#!/usr/bin/env bash
# System calls, context switches and CPU per streamed conversation: runs `chat_pace` at one
# concurrency against BIN and, while the service's measured window runs, counts what the
# service's process does for 5 s with `perf stat` (Debian's linux-perf; tracepoints and
# software events, which need no hardware counters). Prints the counts per conversation
# beside chat_pace's row.
#
#   bench/pace_syscalls.sh BIN [CONCURRENCY] [-- chat_pace arguments...]
#
# e.g. bench/pace_syscalls.sh $R/agentchat 500
#      bench/pace_syscalls.sh $R/agentchat 500 -- --database-url postgres://… --redis-url redis://…
#
# The release tools come from `${CARGO_TARGET_DIR:-target}/release` (BENCHMARKS.md). The
# service's window starts after chat_pace's direct phase (3 s warm-up and 10 s measured)
# and the service's own 3 s warm-up: the counts start 21 s after the service process does.
set -euo pipefail
bin=${1:?usage: bench/pace_syscalls.sh BIN [CONCURRENCY] [-- chat_pace arguments...]}
shift
concurrency=500
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  concurrency=$1
  shift
fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
release="${CARGO_TARGET_DIR:-target}/release"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$release/chat_pace" --concurrency "$concurrency" --rounds 1 --server-bin "$bin" "$@" >"$out/pace" 2>&1 &
pace=$!
pid=""
for _ in $(seq 1 600); do
  pid=$(pgrep -f "^$bin( |$)" | head -1 || true)
  [ -n "$pid" ] && break
  sleep 0.1
done
[ -n "$pid" ] || { echo "the service did not start" >&2; cat "$out/pace" >&2; exit 1; }
sleep 21
events=syscalls:sys_enter_pwrite64,syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom
events=$events,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,context-switches,task-clock
perf stat -x, -e "$events" -p "$pid" -- sleep 5 2>"$out/perf"
wait "$pace"

row=$(grep "^| $concurrency |" "$out/pace")
echo "$row"
rate=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $4); print $4}')
awk -F, -v rate="$rate" '
  { gsub(/^syscalls:sys_enter_/, "", $3); count[$3] = $1 }
  END {
    n = rate * 5
    printf "per conversation (%d in 5 s): pwrite64 %.1f, writev %.1f, recvfrom %.1f, epoll_wait %.1f, futex %.1f, context switches %.1f, CPU %.0f µs\n",
      n, count["pwrite64"] / n, count["writev"] / n, count["recvfrom"] / n,
      count["epoll_wait"] / n, count["futex"] / n, count["context-switches"] / n,
      count["task-clock"] * 1000 / n
  }' "$out/perf"
