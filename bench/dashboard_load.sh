#!/usr/bin/env bash
# The dashboard's release bundle: its size (raw, gzip, brotli) and the first-load time of
# the sign-in page in Chromium with a cold cache (end2end/bench/first-load.mjs).
#
#   bench/dashboard_load.sh [RUNS]      # default 15 measured runs
#
# Builds the release site (`cargo leptos build --release`: the WASM front end with the
# `wasm-release` profile — opt-level "z", LTO, one codegen unit — then wasm-opt), starts the
# release server on 127.0.0.1:3111 with a temporary data folder, measures, and stops it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
runs="${1:-15}"
addr="127.0.0.1:3111"

scripts/setup.sh >/dev/null
echo "==> cargo leptos build --release"
cargo leptos build --release 2>&1 | tail -n 3

site="target/site"
wasm="$(ls "$site"/pkg/*.wasm)"
js="$(ls "$site"/pkg/*.js)"
css="$(ls "$site"/pkg/*.css)"
echo "==> bundle sizes (bytes: raw, gzip -9, brotli q11)"
for f in "$wasm" "$js" "$css"; do
  node -e '
    const fs = require("fs"), zlib = require("zlib");
    const b = fs.readFileSync(process.argv[1]);
    const br = zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } });
    console.log(`${process.argv[1].padEnd(36)} ${String(b.length).padStart(9)} ${String(zlib.gzipSync(b, { level: 9 }).length).padStart(9)} ${String(br.length).padStart(9)}`);
  ' "$f"
done

data="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$data"
}
trap cleanup EXIT
DATA_DIR="$data" LEPTOS_SITE_ADDR="$addr" LEPTOS_SITE_ROOT="$site" RUST_LOG=warn \
  "$CARGO_TARGET_DIR/release/agentchat" serve &
server_pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://$addr/api/health" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
echo "==> first load in Chromium"
(cd end2end && node bench/first-load.mjs "http://$addr" "$runs")
