#!/usr/bin/env bash
# Makes sure the database servers the test suites run against are up: PostgreSQL on
# 127.0.0.1:5432 (user postgres, trust authentication) and Redis on 127.0.0.1:6379. Starts
# them when they are installed but not running, installs them (Debian packages) when they
# are missing, and fails loudly when either still cannot be reached: the PostgreSQL + Redis
# pass of the suites is never skipped.
set -euo pipefail

PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_HOST=127.0.0.1
REDIS_PORT=6379

pg_up() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -U postgres 2>/dev/null; }
redis_up() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v pg_isready >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "==> installing PostgreSQL and Redis (Debian packages)"
  as_root apt-get update -qq
  as_root apt-get install -y -qq postgresql redis-server >/dev/null
fi

if ! pg_up; then
  echo "==> starting PostgreSQL"
  if command -v pg_ctlcluster >/dev/null; then
    for cluster in $(pg_lsclusters -h 2>/dev/null | awk '{print $1 "/" $2}'); do
      as_root pg_ctlcluster "${cluster%/*}" "${cluster#*/}" start 2>/dev/null || true
    done
  fi
  pg_up || as_root service postgresql start >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi
if ! redis_up; then
  echo "==> starting Redis"
  redis-server --bind "$REDIS_HOST" --port "$REDIS_PORT" --daemonize yes \
    --save '' --appendonly no >/dev/null 2>&1 || as_root service redis-server start >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do redis_up && break; sleep 1; done
fi

pg_up || { echo "error: PostgreSQL is not reachable at $PG_HOST:$PG_PORT" >&2; exit 1; }
redis_up || { echo "error: Redis is not reachable at $REDIS_HOST:$REDIS_PORT" >&2; exit 1; }
# Trust authentication for the postgres user over TCP is what the suites expect.
if ! psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -Atc 'SELECT 1' >/dev/null 2>&1; then
  echo "error: PostgreSQL at $PG_HOST:$PG_PORT refuses user postgres without a password" >&2
  exit 1
fi
echo "==> PostgreSQL at $PG_HOST:$PG_PORT and Redis at $REDIS_HOST:$REDIS_PORT are up"
