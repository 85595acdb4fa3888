#!/usr/bin/env bash
# Runs every test of AgentChat: the unit and HTTP integration tests of the workspace (on
# SQLite, then the store and HTTP suites again on PostgreSQL + Redis), then the end-to-end
# suite in Chromium against the release binary (scripts/release.sh) started alone in an
# empty folder on a temporary database, then requests generated from the OpenAPI document
# against that binary (scripts/api-fuzz.sh).
#
#   scripts/test.sh          # every test
#   scripts/test.sh --lint   # first `cargo clippy` (host and WASM) with warnings as errors
#
# Installs what is missing first (see scripts/setup.sh). The release build, with the build
# tools it installs, runs in the background at a lower priority beside the lints and the
# workspace tests: on a two-core machine it takes the time they leave a core idle
# (linking, the single-threaded front end of a large crate, tests waiting on I/O), and the
# end-to-end suite waits for it. Its output goes to `release-build.log` in the target
# folder and is shown when it fails. Each step prints the time since the start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

lint=false
for arg in "$@"; do
  case "$arg" in
    --lint) lint=true ;;
    -h | --help)
      sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      printf 'unknown argument: %s (try --help)\n' "$arg" >&2
      exit 2
      ;;
  esac
done

. scripts/stop.sh
started=$SECONDS
step() { printf '==> [%d:%02d] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

target_dir="${CARGO_TARGET_DIR:-target}"
build_pid=""
mock_pid=""
release_pid=""
release_dir=""
cleanup() {
  # The background build runs in a session of its own: end all of it (cargo, rustc).
  if [ -n "$build_pid" ]; then kill -- "-$build_pid" 2>/dev/null || true; fi
  if [ -n "$mock_pid" ]; then stop_process "$mock_pid"; fi
  if [ -n "$release_pid" ]; then stop_process "$release_pid"; fi
  # A leftover temporary folder is not a failed run.
  if [ -n "$release_dir" ]; then rm -rf "$release_dir" || true; fi
}
trap cleanup EXIT

scripts/setup.sh --test-only
# PostgreSQL and Redis: the backend-specific unit tests use them in the first pass, and the
# second pass runs the suites on them.
scripts/services.sh

step "the release binary (scripts/release.sh), in the background"
# The end-to-end suite runs against the file that ships (README § Building and deploying).
# Its profiles (release, wasm-release) have build folders of their own, so this build and
# the debug builds below do not wait for each other's lock.
# Built here without link-time optimisation and in 16 code units (the profile's code
# generation only: the same sources, features and embedded dashboard as the shipped file),
# as the release profile's fat LTO is a single-threaded step at the end of the build.
mkdir -p "$target_dir"
release_log="$target_dir/release-build.log"
CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  setsid nice -n 10 scripts/release.sh >"$release_log" 2>&1 &
build_pid=$!

if [ "$lint" = true ]; then
  step "cargo clippy (host, then the dashboard's WASM)"
  cargo clippy --workspace --all-targets -- -D warnings
  cargo clippy -p frontend -p app --target wasm32-unknown-unknown --features app/hydrate -- -D warnings
fi

step "cargo test (unit and HTTP integration tests)"
# The WASM entry crate stays out of the host build: it would switch on the dashboard's
# `hydrate` feature next to `ssr` (Cargo unifies features), and the server would then run
# browser-only effects while rendering.
cargo test --workspace --exclude frontend --all-targets

step "the store conformance and HTTP suites again, on PostgreSQL + Redis"
# A scratch database per test on this server (dropped afterwards) and a key prefix per
# test in Redis. The same package selection as above, so that Cargo unifies the same
# features and reuses every compiled crate.
AGENTCHAT_TEST_DATABASE_URL="${AGENTCHAT_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}" \
AGENTCHAT_TEST_REDIS_URL="${AGENTCHAT_TEST_REDIS_URL:-redis://127.0.0.1:6379}" \
  cargo test --workspace --exclude frontend --test store --test api

# The mock model provider of the end-to-end suite, again with the same selection (and so
# the same features) as the tests, whose build it reuses.
cargo build --workspace --exclude frontend --all-targets

step "waiting for the release build"
if ! wait "$build_pid"; then
  build_pid=""
  tail -n 60 "$release_log" >&2
  echo "the release build failed (the whole log: $release_log)" >&2
  exit 1
fi
build_pid=""
tail -n 1 "$release_log"
release_dir="$(mktemp -d)"
cp "$target_dir/release/agentchat" "$release_dir/"
"$release_dir/agentchat" --version | grep -q '(commit ' || {
  echo "agentchat --version does not name the commit" >&2
  exit 1
}

step "end-to-end tests (Playwright in Chromium, against the release binary)"
# The dashboard's chat is tested against the mock model provider (OpenAI wire format),
# which streams one word every 40 ms: slow enough to watch a reply grow and to stop it.
# The same process runs a mock of GitHub's OAuth app endpoints and API (with a consent
# page), so that a browser test signs in through the dashboard's "Continue with GitHub".
mock_addr="${E2E_MOCK_ADDR:-127.0.0.1:3188}"
identity_addr="${E2E_IDENTITY_ADDR:-127.0.0.1:3189}"
"$target_dir/debug/mock-provider" --addr "$mock_addr" --token-interval-ms 40 \
  --identity-addr "$identity_addr" --identity-client-id e2e-github-client \
  --identity-client-secret e2e-github-secret &
mock_pid=$!
addr="${E2E_ADDR:-127.0.0.1:3100}"
data="$release_dir/data"
# end2end/tests/crawl.spec.ts serves a small site on 3190 for the crawler to read,
# end2end/tests/webhooks.spec.ts a webhook receiver on 3191, and end2end/tests/tools.spec.ts
# the API an agent's HTTP action calls on 3194, end2end/tests/mcp.spec.ts the MCP reference
# server on 3195 (end2end/tests/widget.spec.ts serves
# its embedding page on 3192, and end2end/tests/security.spec.ts a host page with a strict
# Content Security Policy on 3193; the server never requests either). Nothing outside this
# machine is called: the Telegram and Slack APIs point at a closed local port (a Telegram
# integration made in the browser then shows why it is not working).
(
  cd "$release_dir"
  exec env -i PATH="/usr/bin:/bin" \
    DATA_DIR="$data" DATABASE_URL="sqlite://$data/e2e.db" \
    LEPTOS_SITE_ADDR="$addr" PUBLIC_URL="http://$addr" \
    OPENAI_API_KEY="e2e-mock-key" OPENAI_BASE_URL="http://$mock_addr/v1/" \
    GITHUB_CLIENT_ID="e2e-github-client" GITHUB_CLIENT_SECRET="e2e-github-secret" \
    GITHUB_AUTH_URL="http://$identity_addr/login/oauth/authorize" \
    GITHUB_TOKEN_URL="http://$identity_addr/login/oauth/access_token" \
    GITHUB_API_URL="http://$identity_addr/api" \
    ALLOWED_PRIVATE_HOSTS="127.0.0.1:3190,127.0.0.1:3191,127.0.0.1:3194,127.0.0.1:3195" \
    TELEGRAM_API_URL="http://127.0.0.1:9" SLACK_API_URL="http://127.0.0.1:9/api" \
    ./agentchat serve
) > "$release_dir/server.log" 2>&1 &
release_pid=$!
for _ in $(seq 1 300); do
  # Node's fetch: the suite needs Node anyway, and curl need not be installed.
  if node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' \
    "http://$addr/api/health" 2>/dev/null; then break; fi
  if ! kill -0 "$release_pid" 2>/dev/null; then
    cat "$release_dir/server.log" >&2
    echo "the release binary exited at start" >&2
    exit 1
  fi
  sleep 0.1
done
rm -f end2end/results.json
# AGENTCHAT_RELEASE_URL brings in end2end/tests/release.spec.ts (the files inside the binary).
(
  cd end2end
  AGENTCHAT_RELEASE_URL="http://$addr" BASE_URL="http://$addr" DATA_DIR="$data" npx playwright test
) || true
node -e '
  const fs = require("fs");
  const file = "end2end/results.json";
  if (!fs.existsSync(file)) { console.error("end-to-end: no results (the suite did not run)"); process.exit(1); }
  const s = JSON.parse(fs.readFileSync(file, "utf8")).stats;
  console.log(`end-to-end: ${s.expected} passed, ${s.unexpected} failed, ${s.flaky} flaky, ${s.skipped} skipped`);
  if (s.unexpected > 0 || s.expected === 0) process.exit(1);
' || {
  echo "--- the server's log (last 50 lines)" >&2
  tail -n 50 "$release_dir/server.log" >&2
  exit 1
}
step "the API from its OpenAPI document (schemathesis, scripts/api-fuzz.sh)"
# Generated requests against the same release binary, started again alone on its own port
# and database, with the same mock model provider: no 5xx, answers as documented, and
# requests the document declares valid accepted (those it declares invalid refused).
FUZZ_ADDR="${FUZZ_ADDR:-127.0.0.1:3102}" scripts/api-fuzz.sh "$release_dir/agentchat" "http://$mock_addr/v1/"
step "all tests passed"
