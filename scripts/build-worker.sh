#!/usr/bin/env bash
# Builds the worker into build/: the release Wasm (build/index_bg.wasm), its JavaScript glue
# (build/index.js) and the entry module (build/entry.js, wrangler.toml's `main`, copied from
# worker/entry.js).
#
# The steps are those of workers-rs' worker-build 0.8.7, run with the pinned tools directly:
#   1. cargo builds the crate's library for wasm32-unknown-unknown, release profile;
#   2. wasm-bindgen (the CLI matching Cargo.lock) writes the glue, as an ES module, with the
#      function that starts a new Wasm instance after a trap (`__wbg_reset_state`, which
#      worker/entry.js calls) and the abort handler that marks the instance as trapped;
#   3. wasm-opt -O (binaryen, from node_modules) with the features workerd supports;
#   4. esbuild bundles the glue and its inline snippets into one module.
# worker-build also wraps the exports in Proxies; worker/entry.js does without them (see there).
# Steps 2-4 are skipped when cargo's output and worker/entry.js are what the last build used,
# and their result is shared by the clones on a machine (see below); a clone whose sources
# are those of a kept result skips step 1 as well.
#
# `EDGECOUNT_DRILLS=1` builds with the `drills` cargo feature: the test-only faults the specs ask
# for by environment variable (worker/src/shared/drills.rs). `make test` builds so; every other
# build leaves them out. build/.features says which build build/ holds.
#
# `--compile-only` runs step 1 alone, when it would run at all: `make test` starts it beside the
# installs (which steps 2-4 need), so that a change to the Rust sources compiles meanwhile.
set -euo pipefail
compile_only=false
[ "${1:-}" = --compile-only ] && compile_only=true

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"
WASM_BINDGEN="$ROOT/.tools/wasm-bindgen-$WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export PATH="$ROOT/node_modules/.bin:$PATH"
OUT="$ROOT/build"
WASM="$ROOT/target/wasm32-unknown-unknown/release/edgecount_worker.wasm"
STAMP="$OUT/.built-from"
# Where the results of steps 2-4 are kept for other clones (see below), and how many.
CACHE="${EDGECOUNT_BUILD_CACHE:-$HOME/.cache/edgecount/worker-builds}"
KEEP_BUILDS=8

# The worker compiles client/dist in (served at /v1/client.js): bring it up to date first. (A
# compile-only run goes without, before node_modules exist: the committed client/dist is what
# the build makes, and were it not, cargo would compile the worker again after it.)
if ! $compile_only; then
  echo "[build] browser client -> client/dist/"
  node client/build.mjs
fi

echo "[build] worker -> build/ (release Wasm${EDGECOUNT_DRILLS:+, with the test drills}$($compile_only && echo ", cargo only"))"
started=$SECONDS
cargo_features=""
if [ "${EDGECOUNT_DRILLS:-}" = 1 ]; then cargo_features=drills; fi
# Step 1. Tells wasm-bindgen's macros to use js_sys' futures, as worker-build does.
cargo_build() {
  WASM_BINDGEN_USE_JS_SYS=1 cargo build --locked --quiet --release --lib --target wasm32-unknown-unknown \
    -p edgecount-worker ${cargo_features:+--features "$cargo_features"}
}
# Steps 2-4 turn cargo's output into the same files every time, so their result is kept under a
# key made of everything they read: cargo's output, this script and the three tools' versions.
# Another clone building the same sources takes it from there instead of running wasm-opt (tens
# of seconds) again; any other input makes another key.
wasm_key() {
  (sha256sum "$WASM" "${BASH_SOURCE[0]}" | cut -d' ' -f1
    scripts/worker-source-key.sh --tools) | sha256sum | cut -c1-32
}
# A kept result is whole: written to a staging folder and moved into place in one step.
kept_whole() { [ -f "$1/index.js" ] && [ -f "$1/index_bg.wasm" ]; }

# A key of everything cargo reads (scripts/worker-source-key.sh); empty outside git.
sources="$(scripts/worker-source-key.sh || true)"
kept_for_sources=""
if [ -n "$sources" ] && [ -d "$CACHE" ]; then
  kept_for_sources="$(grep -lx "$sources" "$CACHE"/*/source-keys 2>/dev/null | head -n 1 || true)"
fi
sources_kept=false
if [ -n "$kept_for_sources" ] && kept_whole "$(dirname "$kept_for_sources")"; then
  sources_kept=true
fi

if $compile_only; then
  if $sources_kept; then
    echo "[build] these sources were built before on this machine: nothing to compile"
  else
    cargo_build
    echo "[build] cargo done in $((SECONDS - started)) s"
  fi
  exit 0
fi
if $sources_kept; then
  # A build of these very sources was kept: cargo would make the same Wasm.
  key="$(basename "$(dirname "$kept_for_sources")")"
  cargo_ran=false
  echo "[build] these sources were built before on this machine; cargo skipped"
else
  cargo_build
  cargo_ran=true
  key="$(wasm_key)"
fi
# What build/ was made from: the kept result's key and the entry module.
inputs() { echo "$key $(sha256sum worker/entry.js | cut -d' ' -f1)"; }
kept="$CACHE/$key"
# Notes that these sources made the kept result, so that the next clone of them skips cargo.
remember_sources() {
  if [ -n "$sources" ] && [ -d "$kept" ] && ! grep -qx "$sources" "$kept/source-keys" 2>/dev/null; then
    echo "$sources" >> "$kept/source-keys"
  fi
}
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(inputs)" ] && [ -f "$OUT/index.js" ] \
  && [ -f "$OUT/index_bg.wasm" ] && [ -f "$OUT/entry.js" ]; then
  remember_sources
  echo "$cargo_features" > "$OUT/.features"
  echo "[build] up to date ($((SECONDS - started)) s)"
  exit 0
fi

mkdir -p "$OUT" "$CACHE"
if kept_whole "$kept"; then
  echo "[build] glue and optimized Wasm for these sources kept from an earlier build"
  touch "$kept"
else
  if ! $cargo_ran; then
    # The kept result these sources matched was evicted meanwhile: target/ may hold an older
    # build, so cargo runs after all (it makes the same Wasm, hence the same key).
    cargo_build
    key="$(wasm_key)"
    kept="$CACHE/$key"
  fi
  staging="$(mktemp -d "$CACHE/.building.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  "$WASM_BINDGEN" "$WASM" --out-dir "$staging" --out-name index --target module --no-typescript \
    --experimental-reset-state-function --force-enable-abort-handler
  echo "[build] wasm-opt -O"
  features=(mutable-globals sign-ext nontrapping-float-to-int bulk-memory multivalue reference-types
    exception-handling)
  wasm-opt "$staging/index_bg.wasm" -o "$staging/index_bg.opt.wasm" -O "${features[@]/#/--enable-}" --debuginfo
  mv "$staging/index_bg.opt.wasm" "$staging/index_bg.wasm"
  esbuild "$staging/index.js" --bundle --format=esm --minify --log-level=warning \
    --external:./index_bg.wasm --external:'cloudflare:*' --outfile="$staging/bundle.js"
  # The glue imports the Wasm module in the source phase (`import source`); workerd and
  # wrangler take a plain import of a .wasm file as the compiled module.
  sed 's/import source /import /' "$staging/bundle.js" > "$staging/index.js"
  rm -rf "$staging/bundle.js" "$staging/snippets"
  # Whole or not at all: another build may be reading the cache meanwhile.
  mv -T "$staging" "$kept" 2>/dev/null || rm -rf "$staging"
  # The cache keeps the KEEP_BUILDS most recently used results.
  ls -1td "$CACHE"/*/ | tail -n +$((KEEP_BUILDS + 1)) | xargs -r rm -rf
fi
remember_sources
cp "$kept/index.js" "$OUT/index.js"
cp "$kept/index_bg.wasm" "$OUT/index_bg.wasm"
cp worker/entry.js "$OUT/entry.js"
inputs > "$STAMP"
echo "$cargo_features" > "$OUT/.features"
echo "[build] done in $((SECONDS - started)) s: $(wc -c < "$OUT/index_bg.wasm") bytes of Wasm"
