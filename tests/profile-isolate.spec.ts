// scripts/profile.mjs samples a path inside the isolate through workerd's inspector. A run that
// lost the inspector, the profile or the Wasm's names would print tables of nothing, or of
// anonymous frames, that read like a result; so a short run is made here and read for both
// tables and for edgecount's Rust entry, by name.
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..");

describe("the isolate profiler", () => {
  it("prints both tables, with edgecount's Rust entry named", () => {
    const run = spawnSync(
      process.execPath,
      [
        "scripts/profile.mjs",
        "/v1/counters/profiled/k{i}",
        "GET",
        "300",
        "4",
        "40",
      ],
      { cwd: ROOT, encoding: "utf8", timeout: 50_000 },
    );
    // On a failure, what the run said is the first thing to read.
    expect(run.status, `${run.error?.message ?? ""}\n${run.stderr}`).toBe(0);
    const report = run.stdout;
    expect(report).toContain("self (µs per request)");
    expect(report).toContain("inclusive (µs per request)");
    const inclusive = report.split("inclusive (µs per request)")[1];
    const fetchLine = inclusive
      .split("\n")
      .find(
        (line) =>
          line.includes("edgecount_worker.wasm") && line.includes("fetch"),
      );
    expect(fetchLine).toBeDefined();
    expect(Number(fetchLine!.trim().split(/\s+/)[0])).toBeGreaterThan(0);
  });
});
