#!/usr/bin/env bash
# Runs every test of AgentChat: the unit and HTTP integration tests of the workspace, then
# the end-to-end suite in Chromium against a freshly built site on a temporary database.
# Installs what is missing first (see scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
# PostgreSQL and Redis: the backend-specific unit tests use them in the first pass, and the
# second pass runs the suites on them.
scripts/services.sh

echo "==> cargo test (unit and HTTP integration tests)"
# The WASM entry crate stays out of the host build: it would switch on the dashboard's
# `hydrate` feature next to `ssr` (Cargo unifies features), and the server would then run
# browser-only effects while rendering.
cargo test --workspace --exclude frontend --all-targets

echo "==> the store conformance and HTTP suites again, on PostgreSQL + Redis"
# A scratch database per test on this server (dropped afterwards) and a key prefix per
# test in Redis.
AGENTCHAT_TEST_DATABASE_URL="${AGENTCHAT_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}" \
AGENTCHAT_TEST_REDIS_URL="${AGENTCHAT_TEST_REDIS_URL:-redis://127.0.0.1:6379}" \
  cargo test -p server --test store --test api

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
# The same process runs a mock of GitHub's OAuth app endpoints and API (with a consent
# page), so that a browser test signs in through the dashboard's "Continue with GitHub".
mock_addr="${E2E_MOCK_ADDR:-127.0.0.1:3188}"
identity_addr="${E2E_IDENTITY_ADDR:-127.0.0.1:3189}"
"${CARGO_TARGET_DIR:-target}/debug/mock-provider" --addr "$mock_addr" --token-interval-ms 40 \
  --identity-addr "$identity_addr" --identity-client-id e2e-github-client \
  --identity-client-secret e2e-github-secret &
mock_pid=$!
export OPENAI_API_KEY="e2e-mock-key"
export OPENAI_BASE_URL="http://$mock_addr/v1/"
export GITHUB_CLIENT_ID="e2e-github-client"
export GITHUB_CLIENT_SECRET="e2e-github-secret"
export GITHUB_AUTH_URL="http://$identity_addr/login/oauth/authorize"
export GITHUB_TOKEN_URL="http://$identity_addr/login/oauth/access_token"
export GITHUB_API_URL="http://$identity_addr/api"
# end2end/tests/crawl.spec.ts serves a small site on 3190 for the crawler to read, and
# end2end/tests/webhooks.spec.ts a webhook receiver on 3191 (end2end/tests/widget.spec.ts serves
# its embedding page on 3192, and end2end/tests/security.spec.ts a host page with a strict
# Content Security Policy on 3193; the server never requests either).
export ALLOWED_PRIVATE_HOSTS="127.0.0.1:3190,127.0.0.1:3191"
# Nothing outside this machine is called: the Telegram and Slack APIs point at a closed
# local port (a Telegram integration made in the browser then shows why it is not working).
export TELEGRAM_API_URL="http://127.0.0.1:9"
export SLACK_API_URL="http://127.0.0.1:9/api"
export DATA_DIR="$data"
export DATABASE_URL="sqlite://$data/e2e.db"
export LEPTOS_SITE_ADDR="${E2E_ADDR:-127.0.0.1:3100}"
export BASE_URL="http://$LEPTOS_SITE_ADDR"
export PUBLIC_URL="$BASE_URL"
# `cargo leptos end-to-end` exits 0 even when the site fails to build or a test fails
# (cargo-leptos 0.3.10), so the site is built first (that step does fail properly) and the
# Playwright JSON report is checked afterwards.
cargo leptos build
rm -f end2end/results.json
cargo leptos end-to-end
node -e '
  const fs = require("fs");
  const file = "end2end/results.json";
  if (!fs.existsSync(file)) { console.error("end-to-end: no results (the suite did not run)"); process.exit(1); }
  const s = JSON.parse(fs.readFileSync(file, "utf8")).stats;
  console.log(`end-to-end: ${s.expected} passed, ${s.unexpected} failed, ${s.flaky} flaky, ${s.skipped} skipped`);
  if (s.unexpected > 0 || s.expected === 0) process.exit(1);
'
