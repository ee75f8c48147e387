// scripts/profile-process.py splits a path's CPU by part of the whole workerd process. What it
// reports is only worth reading if perf saw the process and V8's perf map named the Wasm's
// functions: a run that quietly lost either would put edgecount's own code at zero. So a short
// run is made here and its report read for both. It needs `perf`; without it the test is
// skipped, saying so.
import { execFileSync, spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..");
const hasPerf = spawnSync("perf", ["--version"]).status === 0;

/** The report's µs per request for one part, by its label. */
function part(report: string, label: string): number {
  const line = report.split("\n").find((l) => l.endsWith(`  ${label}`));
  return line ? Number(line.trim().split(/\s+/)[0]) : NaN;
}

describe.skipIf(!hasPerf)("the whole-process profiler (needs perf)", () => {
  it("names edgecount's Rust functions and gives them their share", () => {
    const report = execFileSync(
      "python3",
      [
        "scripts/profile-process.py",
        "/v1/counters/profiled/k{i}",
        "--rate",
        "200",
        "--seconds",
        "2",
        "--warm-up",
        "1",
        "--top",
        "200",
      ],
      { cwd: ROOT, encoding: "utf8", timeout: 50_000 },
    );
    // 200 a second for 2 s, or fewer where k6 or the server fell behind (a loaded machine):
    // the report is then per request sent, and says so.
    const recorded = /(\d+) requests in 2 s, [1-9]\d* samples/.exec(report);
    expect(recorded).not.toBeNull();
    expect(Number(recorded![1])).toBeGreaterThan(0);
    expect(Number(recorded![1])).toBeLessThanOrEqual(400);
    // Cold reads of new keys run the worker's Rust and a shard call's. Which of its functions
    // make the top list is down to sampling (a run of ~500 samples gives the entry point 0-3),
    // so the check is that the perf map named some of them, not any one.
    expect(report).toMatch(/JS:edgecount_worker::\w+/);
    expect(part(report, "edgecount Wasm (Rust)")).toBeGreaterThan(0);
    expect(
      part(report, "runtime HTTP and I/O (kj, hyper, tokio)"),
    ).toBeGreaterThan(0);
  });
});
