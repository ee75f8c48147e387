#!/usr/bin/env bash
# Runs the worker specs (vitest in workerd, as `make test-worker` does) N times in a row, to
# find the specs that fail only now and then: one progress line per round, then every spec that
# failed in at least one round, with its test name, the rounds and the error messages. Exits
# non-zero if anything failed. Each round's vitest output and JSON report are kept in
# build/repeat-suite/ (round-K.log, round-K.json).
#
#   scripts/repeat-suite.sh [N]    N rounds, default 10
#
# It runs the worker built in build/ with the tools installed: `make repeat-suite N=10` builds
# and installs first, as `make test-worker` does.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$ROOT/node_modules/.bin:$PATH"
# As the Makefile exports them: no fetch of Cloudflare's Request.cf data, no metrics sent.
export CLOUDFLARE_CF_FETCH_ENABLED=false WRANGLER_SEND_METRICS=false

ROUNDS="${1:-10}"
if ! [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/repeat-suite.sh [N]  (N rounds, a positive whole number; default 10)" >&2
  exit 2
fi
if [ ! -f build/entry.js ]; then
  echo "repeat-suite: no worker in build/; run \`make build\` first (or \`make repeat-suite\`)" >&2
  exit 2
fi

OUT=build/repeat-suite
rm -rf "$OUT"
mkdir -p "$OUT"

# What a round's report says: "<passed> <failed>" for the progress line.
counts() {
  node - "$1" << 'JS'
const { existsSync, readFileSync } = require("node:fs");
const file = process.argv[2];
if (!existsSync(file)) {
  console.log("0 0");
} else {
  const report = JSON.parse(readFileSync(file, "utf8"));
  // A spec file that fails outside its tests (a beforeAll, an import) counts as one failure.
  const fileErrors = report.testResults.filter(
    (f) => f.status === "failed" && !f.assertionResults.some((t) => t.status === "failed"),
  ).length;
  console.log(`${report.numPassedTests} ${report.numFailedTests + fileErrors}`);
}
JS
}

failed_rounds=0
for ((round = 1; round <= ROUNDS; round++)); do
  started=$SECONDS
  status=0
  vitest run --reporter=default --reporter=json --outputFile.json="$OUT/round-$round.json" \
    > "$OUT/round-$round.log" 2>&1 || status=$?
  read -r passed failed < <(counts "$OUT/round-$round.json")
  note=""
  if [ ! -f "$OUT/round-$round.json" ]; then
    note=" (vitest wrote no report and exited with $status: see $OUT/round-$round.log)"
    failed=$((failed + 1))
  elif [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    note=" (vitest exited with $status: see $OUT/round-$round.log)"
    failed=1
  fi
  [ "$failed" -eq 0 ] || failed_rounds=$((failed_rounds + 1))
  echo "round $round/$ROUNDS: $passed passed, $failed failed in $((SECONDS - started)) s$note"
done

# Every spec that failed in some round: its file and test name, the rounds, and each distinct
# error message (its first lines).
node - "$OUT" "$ROUNDS" << 'JS'
const { existsSync, readFileSync } = require("node:fs");
const { relative } = require("node:path");
const [out, rounds] = [process.argv[2], Number(process.argv[3])];
const failures = new Map();
const note = (name, round, message) => {
  const entry = failures.get(name) ?? { rounds: [], messages: new Map() };
  if (!entry.rounds.includes(round)) entry.rounds.push(round);
  // The message without its stack, but for the first frame outside node_modules: where.
  const lines = String(message ?? "(no message)").trim().split("\n");
  const stack = lines.findIndex((line) => /^\s+at /.test(line));
  const head = lines.slice(0, stack === -1 ? 6 : Math.min(stack, 6));
  const where =
    stack === -1
      ? undefined
      : lines.slice(stack).find((line) => /^\s+at /.test(line) && !/node_modules|node:/.test(line));
  // Ports differ from round to round; the same failure should read the same.
  const text = [...head, ...(where ? [where.trim()] : [])]
    .join("\n")
    .replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:<port>");
  entry.messages.set(text, (entry.messages.get(text) ?? 0) + 1);
  failures.set(name, entry);
};
for (let round = 1; round <= rounds; round++) {
  const file = `${out}/round-${round}.json`;
  if (!existsSync(file)) {
    note("(the whole round: vitest wrote no report)", round, `see ${out}/round-${round}.log`);
    continue;
  }
  for (const spec of JSON.parse(readFileSync(file, "utf8")).testResults) {
    const path = relative(process.cwd(), spec.name);
    const failed = spec.assertionResults.filter((t) => t.status === "failed");
    for (const test of failed) {
      for (const message of test.failureMessages.length ? test.failureMessages : [null])
        note(`${path} > ${test.fullName}`, round, message);
    }
    if (spec.status === "failed" && failed.length === 0)
      note(`${path} (the file itself, outside its tests)`, round, spec.message);
  }
}
if (failures.size === 0) {
  console.log(`\nno spec failed in ${rounds} round${rounds === 1 ? "" : "s"}`);
} else {
  console.log(`\nfailed at least once (${failures.size}):`);
  for (const [name, { rounds: seen, messages }] of failures) {
    console.log(`\n${name}\n  failed in ${seen.length} of ${rounds} rounds (${seen.join(", ")})`);
    for (const [message, times] of messages) {
      const shown = message.split("\n").map((line) => `    ${line}`).join("\n");
      console.log(`  ${times}x:\n${shown}`);
    }
  }
}
JS

if [ "$failed_rounds" -ne 0 ]; then
  echo "repeat-suite: $failed_rounds of $ROUNDS rounds had failures (logs and reports in $OUT/)"
  exit 1
fi
