#!/usr/bin/env bash
# Builds the worker to Wasm with worker-build, into build/, and adds the entry module
# (build/entry.js, wrangler.toml's `main`) that wraps worker-build's index.js.
# worker-build would download wasm-bindgen, esbuild and wasm-opt from the internet; the three
# overrides point it at the pinned copies the bootstrap installed instead.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"

export WASM_BINDGEN_BIN="$ROOT/.tools/wasm-bindgen-$WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export PATH="$ROOT/node_modules/.bin:$PATH"

# The worker compiles client/dist in (served at /v1/client.js): bring it up to date first.
echo "[build] browser client -> client/dist/"
node client/build.mjs
echo "[build] worker -> build/ (release Wasm)"
"$ROOT/.tools/bin/worker-build" --release --out-dir "$ROOT/build" "$ROOT/worker"
cp "$ROOT/worker/entry.js" "$ROOT/build/entry.js"
