#!/usr/bin/env bash
# Runs every test of AgentChat: the unit and HTTP integration tests of the workspace, then
# the end-to-end suite in Chromium against a freshly built site on a temporary database.
# Installs what is missing first (see scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh

echo "==> cargo test (unit and HTTP integration tests)"
# The WASM entry crate stays out of the host build: it would switch on the dashboard's
# `hydrate` feature next to `ssr` (Cargo unifies features), and the server would then run
# browser-only effects while rendering.
cargo test --workspace --exclude frontend --all-targets

echo "==> end-to-end tests (Playwright in Chromium)"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
export DATA_DIR="$data"
export DATABASE_URL="sqlite://$data/e2e.db"
export LEPTOS_SITE_ADDR="${E2E_ADDR:-127.0.0.1:3100}"
export BASE_URL="http://$LEPTOS_SITE_ADDR"
export PUBLIC_URL="$BASE_URL"
cargo leptos end-to-end
