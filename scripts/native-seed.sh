#!/usr/bin/env bash
# A per-machine seed of target/debug, so that a fresh clone's native checks (clippy and the
# tests, see scripts/test-suite.sh) do not compile again what a clone of the same sources
# compiled before.
#
#   scripts/native-seed.sh restore   before the native checks
#   scripts/native-seed.sh save      after they passed
#
# `restore` acts only where target/debug does not exist yet (a fresh clone). It copies a
# seed kept for this Cargo.lock and toolchain into target/debug (a real copy: cargo and rustc
# write into their outputs, and a link would write through into the seed), then gives every
# file whose contents are those the seed was built from the modification time it had then.
# Cargo decides freshness by comparing modification times (a fresh clone's files are all
# new), so without that step it would rebuild every crate of the workspace; with it, cargo
# rebuilds exactly the crates whose files differ, and its own fingerprints still rebuild
# whatever another compiler, flag, feature or dependency version would change. A file whose
# contents differ gets the current time, after every output of the seed (the clone may be
# older than the seed), so nothing built from other contents is ever taken.
#
# Of the seeds kept for the clone's Cargo.lock and toolchain, `restore` takes the one built from
# the most files with the clone's contents (two branches worked on by turns each find theirs).
#
# `save` keeps target/debug as a seed, but only when `restore` started it in this run (an
# existing target/debug may hold outputs of other commands, built from other contents) and no
# file changed during the checks. The KEEP_SEEDS most recently saved or taken seeds (about 1 GB
# each) are kept, in EDGECOUNT_NATIVE_SEEDS (default ~/.cache/edgecount/native-seeds).
set -euo pipefail
# One collation for sort, comm and cmp.
export LC_ALL=C

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SEEDS="${EDGECOUNT_NATIVE_SEEDS:-$HOME/.cache/edgecount/native-seeds}"
KEEP_SEEDS=3
# This run's record: the contents of the files when the checks began (files.sha256) and the
# time every output in target/debug is newer than (sources-time).
RUN="$ROOT/target/.native-seed"

say() { printf '[native-seed] %s\n' "$*"; }

# The contents of every file git does not ignore, one `sha256sum` line each, sorted by path.
contents() {
  git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' file; do [ -f "$file" ] && printf '%s\0' "$file"; done \
    | xargs -0 -r sha256sum | sort
}

# Seeds are named by their Cargo.lock and toolchain (a seed of another is of little use), then
# by the contents they were built from.
toolchain_key() { { sha256sum Cargo.lock; rustc -vV; cargo -V; } | sha256sum | cut -c1-16; }

# The seed of this Cargo.lock and toolchain built from the most files with the contents the
# clone has (listed in $1); none if there is no such seed.
closest_seed() {
  local best="" most=-1 seed count
  for seed in "$SEEDS/$(toolchain_key)"-*/; do
    [ -f "$seed/sources-time" ] || continue
    count="$(comm -12 "$seed/files.sha256" "$1" | wc -l)"
    if [ "$count" -gt "$most" ]; then
      best="${seed%/}"
      most="$count"
    fi
  done
  echo "$best"
}

restore() {
  if [ -e target/debug ]; then
    say "target/debug exists: no seed taken, and none saved from this run"
    rm -rf "$RUN"
    return
  fi
  mkdir -p "$RUN"
  contents > "$RUN/files.sha256"
  date +%s > "$RUN/sources-time"
  local seed
  seed="$(closest_seed "$RUN/files.sha256")"
  if [ -z "$seed" ]; then
    say "no seed for this Cargo.lock and toolchain yet: cargo builds everything"
    return
  fi
  local started=$SECONDS
  # A seed evicted while it is copied makes a failed copy: then there is no seed.
  if ! cp -a "$seed/debug" target/debug.partial 2> /dev/null; then
    rm -rf target/debug.partial
    say "the seed was evicted while it was copied: cargo builds everything"
    return
  fi
  touch "$seed"
  local seed_time same other
  seed_time="$(cat "$seed/sources-time")"
  # Files with the seed's contents get a time before any of its outputs; the others a time
  # after all of them (the clone may be older than the seed).
  same="$(comm -12 "$seed/files.sha256" "$RUN/files.sha256" | cut -c67-)"
  other="$(comm -13 "$seed/files.sha256" "$RUN/files.sha256" | cut -c67-)"
  if [ -n "$same" ]; then
    tr '\n' '\0' <<< "$same" | xargs -0 touch -m -d "@$((seed_time - 1))"
  fi
  if [ -n "$other" ]; then
    tr '\n' '\0' <<< "$other" | xargs -0 touch -m
  fi
  mv target/debug.partial target/debug
  # Every output now in target/debug is newer than that time too.
  echo "$seed_time" > "$RUN/sources-time"
  # The seed's outputs keep the times of the build that first made them (a seed saved from a
  # restored seed inherits them), so the seed is named by when it was saved.
  local saved_at="$seed_time"
  [ -f "$seed/saved-at" ] && saved_at="$(cat "$seed/saved-at")"
  say "target/debug from the seed saved $(date -u -d "@$saved_at" '+%F %T') UTC, in $((SECONDS - started)) s;" \
    "$(grep -c . <<< "$same") of $(wc -l < "$RUN/files.sha256") files as it was built from"
}

save() {
  if [ ! -f "$RUN/files.sha256" ]; then
    return
  fi
  if ! contents | cmp -s - "$RUN/files.sha256"; then
    say "files changed during the checks: no seed saved"
    return
  fi
  local seed
  seed="$SEEDS/$(toolchain_key)-$(sha256sum < "$RUN/files.sha256" | cut -c1-16)"
  if [ -f "$seed/sources-time" ]; then
    touch "$seed"
    say "a seed of these very files is kept already"
    return
  fi
  local started=$SECONDS
  mkdir -p "$SEEDS"
  # Global: the trap runs after this function has returned.
  staging="$(mktemp -d "$SEEDS/.saving.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  # Without incremental/: rustc's incremental state is for rebuilding a crate in place, it is a
  # third of the size, and a fresh clone's crates are either fresh or built anew.
  mkdir "$staging/debug"
  find target/debug -mindepth 1 -maxdepth 1 ! -name incremental -exec cp -a -t "$staging/debug/" {} +
  cp "$RUN/files.sha256" "$RUN/sources-time" "$staging/"
  date +%s > "$staging/saved-at"
  # Whole or not at all (another clone may have saved the same seed meanwhile).
  mv -T "$staging" "$seed" 2> /dev/null || true
  # The most recently saved or taken are kept.
  ls -1td "$SEEDS"/*/ | tail -n +$((KEEP_SEEDS + 1)) | xargs -r rm -rf
  say "target/debug saved as a seed in $((SECONDS - started)) s ($(du -sh "$seed" | cut -f1))"
}

case "${1:-}" in
  restore) restore ;;
  save) save ;;
  *)
    echo "usage: $0 restore|save" >&2
    exit 2
    ;;
esac
