#!/usr/bin/env bash
# Installs what edgecount's build, tests and benchmark need, pinned, and skips whatever is
# already installed. Tools go to a per-machine cache (EDGECOUNT_TOOLS_DIR, default
# ~/.cache/edgecount/tools) linked into the repo as the git-ignored `.tools`, so every clone
# on a machine shares one install: a second run takes seconds.
#
# Usage: scripts/bootstrap.sh [build|bench]   (build is the default; bench adds k6)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

WORKER_BUILD_VERSION=0.8.7
K6_VERSION=v1.8.1
TOOLS="${EDGECOUNT_TOOLS_DIR:-$HOME/.cache/edgecount/tools}"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"

say() { printf '[bootstrap] %s\n' "$*"; }

link_tools_dir() {
  mkdir -p "$TOOLS"
  if [ "$(readlink .tools 2>/dev/null)" != "$TOOLS" ]; then
    rm -rf .tools
    ln -s "$TOOLS" .tools
  fi
}

rust_targets() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  for component in rustfmt clippy; do
    if ! rustup component list --installed | grep -q "^$component"; then
      say "adding rustup component $component"
      rustup component add "$component"
    fi
  done
}

worker_build() {
  if [ "$("$TOOLS/bin/worker-build" --version 2>/dev/null)" = "$WORKER_BUILD_VERSION" ]; then
    return
  fi
  say "installing worker-build $WORKER_BUILD_VERSION (about 8 minutes on 2 cores)"
  cargo install --quiet --root "$TOOLS" worker-build --version "$WORKER_BUILD_VERSION" --locked
}

wasm_bindgen() {
  local root="$TOOLS/wasm-bindgen-$WASM_BINDGEN_VERSION"
  if "$root/bin/wasm-bindgen" --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION\$"; then
    return
  fi
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION, matching Cargo.lock (about 3 minutes)"
  # Without --locked: a dependency version in its lockfile is not served by the registry here.
  cargo install --quiet --root "$root" wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
}

node_packages() {
  local stamp=node_modules/.edgecount-lock-hash
  local want
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return
  fi
  say "installing npm packages from package-lock.json (Node 22, wrangler, vitest, esbuild, wasm-opt)"
  # `npm install` rather than `npm ci`: the registry here lacks workerd's macOS and Windows
  # builds, so the lockfile cannot list them and `npm ci` refuses it. --no-save keeps the
  # committed lockfile as it is; versions still come from it.
  npm install --no-save --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
}

k6() {
  if [ "$("$TOOLS/bin/k6" version 2>/dev/null | awk '{print $2; exit}')" = "$K6_VERSION" ]; then
    return
  fi
  say "installing k6 $K6_VERSION from the Go module proxy (about 4 minutes)"
  GOBIN="$TOOLS/bin" go install "go.k6.io/k6@$K6_VERSION"
}

link_tools_dir
rust_targets
worker_build
wasm_bindgen
node_packages
if [ "${1:-build}" = bench ]; then
  k6
fi
say "tools ready"
