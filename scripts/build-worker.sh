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
# Steps 2-4 are skipped when cargo's output and worker/entry.js are what the last build used.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"
WASM_BINDGEN="$ROOT/.tools/wasm-bindgen-$WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export PATH="$ROOT/node_modules/.bin:$PATH"
OUT="$ROOT/build"
WASM="$ROOT/target/wasm32-unknown-unknown/release/edgecount_worker.wasm"
STAMP="$OUT/.built-from"

# The worker compiles client/dist in (served at /v1/client.js): bring it up to date first.
echo "[build] browser client -> client/dist/"
node client/build.mjs

echo "[build] worker -> build/ (release Wasm)"
started=$SECONDS
# Tells wasm-bindgen's macros to use js_sys' futures, as worker-build does.
WASM_BINDGEN_USE_JS_SYS=1 cargo build --locked --quiet --release --lib --target wasm32-unknown-unknown \
  -p edgecount-worker

inputs="$(sha256sum "$WASM" worker/entry.js "${BASH_SOURCE[0]}" | cut -d' ' -f1 | tr '\n' ' ')"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$inputs" ] && [ -f "$OUT/index.js" ] \
  && [ -f "$OUT/index_bg.wasm" ] && [ -f "$OUT/entry.js" ]; then
  echo "[build] up to date ($((SECONDS - started)) s)"
  exit 0
fi

staging="$(mktemp -d "$OUT.XXXXXX")"
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
# The glue imports the Wasm module in the source phase (`import source`); workerd and wrangler
# take a plain import of a .wasm file as the compiled module.
sed 's/import source /import /' "$staging/bundle.js" > "$staging/index.bundled.js"

mkdir -p "$OUT"
mv "$staging/index.bundled.js" "$OUT/index.js"
mv "$staging/index_bg.wasm" "$OUT/index_bg.wasm"
cp worker/entry.js "$OUT/entry.js"
echo "$inputs" > "$STAMP"
echo "[build] done in $((SECONDS - started)) s: $(wc -c < "$OUT/index_bg.wasm") bytes of Wasm"
