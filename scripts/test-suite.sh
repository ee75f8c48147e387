#!/usr/bin/env bash
# `make test`: every part of the suite, and the installs it needs, those that do not depend on
# each other at once, each output line prefixed with its part, and a summary of how each ended
# and how long it took.
#
#   the toolchain's parts and sccache (scripts/bootstrap.sh rust), then at once:
#   rustfmt and clippy, then the      |  the other installs (k6, npm, ...) and prettier, beside
#   native tests (natively, in        |  cargo's Wasm compile; the rest of the Wasm build, then
#   target/debug, which a fresh clone |  at once: vitest in workerd, the OpenAPI check and the
#   takes from the machine's seed:    |  benchmark smoke run (they only read build/)
#   scripts/native-seed.sh)           |
#
# The right-hand side, mostly waiting (installs, timers, k6 holding for fixed times), is the
# longer, so the Rust checks and the OpenAPI check run at a lower CPU priority (`nice`) and take
# what it leaves. Each part is a target of the Makefile, run with SUITE_READY=1 so that it
# neither installs tools nor builds the worker again: this script installs them, and the
# build runs once, here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/jobs.sh
source "$ROOT/scripts/jobs.sh"
export JOBS_LABEL=test SUITE_READY=1
# The worker is built once, with the test-only drills the specs ask for (`make build-drills`).
export EDGECOUNT_DRILLS=1

part() { make --no-print-directory "$@"; }
# A part off the longest path.
beside() { nice -n 10 make --no-print-directory "$@"; }

rust_checks() {
  scripts/native-seed.sh restore
  beside lint-rust
  beside test-native
  # A seed is a cache: one that cannot be saved (a full disk, say) fails nothing that was checked.
  nice -n 10 scripts/native-seed.sh save || echo "[native-seed] no seed saved (the checks passed)"
}

vitest() { part test-worker; }
api_spec() { beside test-api-spec; }
bench_smoke() { part test-bench-smoke; }

installs_and_lint() {
  scripts/bootstrap.sh test
  part lint-js
}
# cargo's part of the build needs none of those installs: a Rust change compiles meanwhile.
wasm_compile() { scripts/build-worker.sh --compile-only; }

worker_suites() {
  run_jobs installs_and_lint wasm_compile
  part build
  run_jobs vitest api_spec bench_smoke
}

scripts/bootstrap.sh rust
run_jobs rust_checks worker_suites
