#!/usr/bin/env bash
# Cargo's rustc wrapper (.cargo/config.toml): compiles through sccache when the bootstrap has
# installed it, so that every clone on a machine shares one cache of compiled dependencies
# (~/.cache/edgecount/sccache by default). sccache keys each result by the compiler, its
# arguments and its inputs' contents, so a new Cargo.lock or toolchain compiles anew and a
# cached result is never stale. Crates cargo builds incrementally (this workspace's own, in
# debug) are passed through to rustc uncached. Without sccache, or with EDGECOUNT_NO_SCCACHE
# set, rustc runs as is.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sccache="$root/.tools/sccache-venv/bin/sccache"
if [ -x "$sccache" ] && [ -z "${EDGECOUNT_NO_SCCACHE:-}" ]; then
  export SCCACHE_DIR="${SCCACHE_DIR:-$HOME/.cache/edgecount/sccache}"
  export SCCACHE_CACHE_SIZE="${SCCACHE_CACHE_SIZE:-4G}"
  exec "$sccache" "$@"
fi
exec "$@"
