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
mock_pid=""
cleanup() {
  if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$data"
}
trap cleanup EXIT
# The dashboard's chat is tested against the mock model provider (OpenAI wire format),
# which streams one word every 40 ms: slow enough to watch a reply grow and to stop it.
cargo build -p mock-provider --bin mock-provider
mock_addr="${E2E_MOCK_ADDR:-127.0.0.1:3188}"
"${CARGO_TARGET_DIR:-target}/debug/mock-provider" --addr "$mock_addr" --token-interval-ms 40 &
mock_pid=$!
export OPENAI_API_KEY="e2e-mock-key"
export OPENAI_BASE_URL="http://$mock_addr/v1/"
export DATA_DIR="$data"
export DATABASE_URL="sqlite://$data/e2e.db"
export LEPTOS_SITE_ADDR="${E2E_ADDR:-127.0.0.1:3100}"
export BASE_URL="http://$LEPTOS_SITE_ADDR"
export PUBLIC_URL="$BASE_URL"
cargo leptos end-to-end
