#!/usr/bin/env bash
# `make test`: every part of the suite, those that do not depend on each other at once, each
# output line prefixed with its part, and a summary of how each ended and how long it took.
#
#   lint, then the native tests  |  the Wasm build, then at once: vitest in workerd,
#   (both build natively, in     |  the OpenAPI check and the benchmark smoke run
#   target/debug)                |  (they only read build/)
#
# The Wasm build, then vitest and the benchmark smoke run (mostly waiting: k6 holds for fixed
# times) are the longest paths, so the other parts run at a lower CPU priority (`nice`) and
# take what those leave: on two cores the native builds fit beside the Wasm build's
# single-threaded link and wasm-opt, and the OpenAPI check beside the rest. Each part is a
# target of the Makefile, run with SUITE_READY=1 so that it neither installs tools nor builds
# the worker again: the Makefile's `test` has installed them, and the build runs once, here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/jobs.sh
source "$ROOT/scripts/jobs.sh"
export JOBS_LABEL=test SUITE_READY=1

part() { make --no-print-directory "$@"; }
# A part off the longest path.
beside() { nice -n 10 make --no-print-directory "$@"; }

rust_checks() {
  beside lint
  beside test-native
}

vitest() { part test-worker; }
api_spec() { beside test-api-spec; }
bench_smoke() { part test-bench-smoke; }

worker_suites() {
  part build
  run_jobs vitest api_spec bench_smoke
}

run_jobs rust_checks worker_suites
