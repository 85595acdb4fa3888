#!/usr/bin/env bash
# Starts AgentChat on LEPTOS_SITE_ADDR (default 127.0.0.1:3000) with the embedded SQLite
# database under ./data: the dashboard at / and the REST API under /api. Installs the
# build tools first when they are missing. Extra arguments go to `cargo leptos serve`
# (e.g. --release for an optimised build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --build-only
exec cargo leptos serve "$@"
