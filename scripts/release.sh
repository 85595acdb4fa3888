#!/usr/bin/env bash
# Builds the release binary of AgentChat: one file, `agentchat`, that carries the dashboard
# inside it (README § Building and deploying).
#
#   scripts/release.sh     # then: ${CARGO_TARGET_DIR:-target}/release/agentchat
#
# 1. `cargo leptos build --release --frontend-only` builds the dashboard's WASM (the
#    `wasm-release` profile, optimised by wasm-opt), its JS loader and the CSS into
#    target/site.
# 2. `cargo build --release -p server --bin agentchat --features embedded-site` builds the
#    server with those files compiled in (brotli-compressed at build time; see
#    server/build.rs), and the commit in `agentchat --version`.
# Installs the build tools that are missing first (scripts/setup.sh --build-only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --build-only

commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit="$commit with changes"
fi

echo "==> the dashboard (release WASM, JS and CSS)"
cargo leptos build --release --frontend-only
echo "==> the server, with the dashboard inside"
MEMORY_SERVE_QUIET=1 AGENTCHAT_BUILD_COMMIT="commit $commit" \
  cargo build --release -p server --bin agentchat --features embedded-site

binary="${CARGO_TARGET_DIR:-target}/release/agentchat"
echo "==> $binary ($(du -h "$binary" | cut -f1)): $("$binary" --version)"
