#!/usr/bin/env bash
# Prints one key for everything `cargo build` reads when scripts/build-worker.sh builds the
# worker's Wasm, so that a clone whose key matches a kept build can skip cargo (see there).
#
# The key covers the contents of every file of the workspace that git does not ignore
# (tracked or not; over-inclusive, so a change to a test also makes a new key), the toolchain,
# the environment variables that change what cargo builds, the build scripts and the versions
# of the tools that turn cargo's output into build/. Registry crates are fixed by Cargo.lock's
# checksums. Exits 1, printing nothing, outside a git work tree (a source tarball): there is no
# such key there, and the build always runs cargo.
#
# `--tools` prints only the tools' versions, as one line: scripts/build-worker.sh keys its
# later steps by them too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# From the lockfile that node_modules is installed from, so that the key can be made before the
# install (make test compiles the Wasm beside it).
package_version() {
  python3 -c 'import json, sys; print(json.load(open("package-lock.json"))["packages"]["node_modules/" + sys.argv[1]]["version"])' "$1"
}
tools="wasm-bindgen $(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/[^0-9.]/, "", $0); print; exit}' Cargo.lock)"
tools+=" binaryen $(package_version binaryen) esbuild $(package_version esbuild)"
if [ "${1:-}" = --tools ]; then
  echo "$tools"
  exit 0
fi

files="$(git ls-files -z --cached --others --exclude-standard -- \
  Cargo.toml Cargo.lock .cargo core worker client/dist 2>/dev/null | tr '\0' '\n')" || exit 1
[ -n "$files" ] || exit 1

{
  # A listed file that was deleted is left out; the list itself then differs.
  existing=()
  while IFS= read -r file; do
    if [ -f "$file" ]; then existing+=("$file"); fi
  done <<< "$files"
  sha256sum "${existing[@]}"
  rustc -vV
  cargo -V
  env | grep -E '^(EDGECOUNT_DRILLS|RUSTFLAGS|RUSTC|CARGO_ENCODED_RUSTFLAGS|CARGO_BUILD_|CARGO_PROFILE_|CARGO_TARGET_|WASM_BINDGEN_)' \
    | sort || true
  sha256sum scripts/build-worker.sh scripts/worker-source-key.sh
  echo "$tools"
} | sha256sum | cut -c1-32
