#!/usr/bin/env bash
# Fuzzes the parsers of edgecount-core with cargo-fuzz (libFuzzer) on the nightly toolchain:
# every target in core/fuzz/fuzz_targets, one at a time with one job each, so a run leaves a
# core free on a shared machine. cargo-fuzz is installed pinned into the per-machine tools
# cache (EDGECOUNT_TOOLS_DIR, default ~/.cache/edgecount/tools) unless already there.
#
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]
#   seconds-per-target  fuzzing time of each target; by default 10 minutes shared among the
#                       targets, rounded up
#   target...           only these targets (default: all)
#
# Each target reads its committed seeds (core/fuzz/seeds/<target>) and grows its own
# git-ignored corpus (core/fuzz/corpus/<target>), so later runs start where earlier ones
# stopped. A crash leaves its input in core/fuzz/artifacts/<target>/ and the full libFuzzer
# output in core/fuzz/artifacts/<target>.log. Exits non-zero if any target failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/core/fuzz"
cd "$FUZZ"

CARGO_FUZZ_VERSION=0.13.2
TOOLS="${EDGECOUNT_TOOLS_DIR:-$HOME/.cache/edgecount/tools}"
TOTAL_SECONDS=600
export PATH="$TOOLS/bin:$PATH"

say() { printf '[fuzz] %s\n' "$*"; }

cargo_fuzz() {
  if [ "$(cargo-fuzz --version 2>/dev/null | awk '{print $2; exit}')" = "$CARGO_FUZZ_VERSION" ]; then
    return
  fi
  say "installing cargo-fuzz $CARGO_FUZZ_VERSION (about 2 minutes)"
  cargo install --quiet --root "$TOOLS" cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
}

nightly() {
  if ! rustup toolchain list | grep -q '^nightly'; then
    say "adding the nightly toolchain (libFuzzer's instrumentation needs it)"
    rustup toolchain install nightly --profile minimal
  fi
}

# Runs one target for $1 seconds; prints libFuzzer's progress lines as they come and one
# summary line at the end.
run_target() {
  local target="$1" seconds="$2"
  local log="$FUZZ/artifacts/$target.log"
  local dict=()
  [ -f "dict/$target.dict" ] && dict=("-dict=dict/$target.dict")
  mkdir -p "corpus/$target" "artifacts/$target"
  say "$target: fuzzing for ${seconds}s"
  local started status
  started="$(date +%s)"
  # `pulse` lines come at every power of two of runs: enough to show it is alive.
  set +e
  cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 "${dict[@]}" 2>&1 |
    tee "$log" | grep --line-buffered -E 'pulse|^Done|panicked|ERROR|SUMMARY' | sed -u "s/^/  $target: /"
  status="${PIPESTATUS[0]}"
  set -e
  local elapsed=$(($(date +%s) - started))
  local runs
  runs="$(awk '/stat::number_of_executed_units/ {print $NF}' "$log" | tail -1)"
  local result=ok
  [ "$status" = 0 ] || result="FAILED (exit $status; see core/fuzz/artifacts/$target.log and its input in core/fuzz/artifacts/$target/)"
  SUMMARY+=("$(printf '%-14s %12s runs %6ss  %s' "$target" "${runs:-?}" "$elapsed" "$result")")
  [ "$status" = 0 ]
}

all_targets=()
for file in fuzz_targets/*.rs; do
  all_targets+=("$(basename "$file" .rs)")
done
targets=("${@:2}")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
seconds="${1:-$(((TOTAL_SECONDS + ${#targets[@]} - 1) / ${#targets[@]}))}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [seconds-per-target] [target...]" >&2
  exit 2
fi

nightly
cargo_fuzz
say "building ${#targets[@]} targets"
for target in "${targets[@]}"; do
  cargo +nightly fuzz build "$target"
done

say "running ${targets[*]}: ${seconds}s each, $((seconds * ${#targets[@]}))s in all"
SUMMARY=()
failed=0
for target in "${targets[@]}"; do
  run_target "$target" "$seconds" || failed=1
done

say "summary (runs executed, wall time, result):"
printf '  %s\n' "${SUMMARY[@]}"
exit "$failed"
