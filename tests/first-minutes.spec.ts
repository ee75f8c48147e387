// A newcomer's first command on a machine that lacks a prerequisite: it stops at once with one
// line saying what to install (scripts/bootstrap.sh), not with a tool's output minutes later.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";

let bin: string;
afterEach(() => rmSync(bin, { recursive: true, force: true }));

/** Runs the bootstrap with a PATH holding only the shell tools it needs and `extra`. */
function bootstrapWith(extra: Record<string, string>, mode = "dev") {
  bin = mkdtempSync(join(tmpdir(), "edgecount-path-"));
  for (const tool of ["bash", "awk", "dirname"]) {
    const found = spawnSync("bash", ["-c", `command -v ${tool}`])
      .stdout.toString()
      .trim();
    symlinkSync(found, join(bin, tool));
  }
  for (const [name, script] of Object.entries(extra))
    writeFileSync(join(bin, name), `#!${join(bin, "bash")}\n${script}\n`, {
      mode: 0o755,
    });
  const run = spawnSync(join(bin, "bash"), ["scripts/bootstrap.sh", mode], {
    env: { PATH: bin, HOME: process.env.HOME },
    encoding: "utf8",
  });
  return {
    status: run.status,
    lines: run.stderr.trim().split("\n"),
    stdout: run.stdout,
  };
}

it("stops with one line when Rust is missing", () => {
  const run = bootstrapWith({});
  expect(run.status).toBe(1);
  expect(run.lines).toEqual([
    "edgecount: Rust is missing: install it with rustup (https://rustup.rs), then run this again.",
  ]);
  expect(run.stdout).toBe("");
});

it("stops with one line when Node.js is missing", () => {
  const run = bootstrapWith({ rustup: "exit 0", cargo: "echo cargo 1.95.0" });
  expect(run.status).toBe(1);
  expect(run.lines).toHaveLength(1);
  expect(run.lines[0]).toMatch(
    /^edgecount: Node\.js with npm is missing: install/,
  );
});

it("stops with one line when the tests need Go and it is missing", () => {
  const run = bootstrapWith(
    {
      rustup: "exit 0",
      cargo: "echo cargo 1.95.0",
      node: "exit 0",
      npm: "exit 0",
      python3: "exit 0",
    },
    "test",
  );
  expect(run.status).toBe(1);
  expect(run.lines).toHaveLength(1);
  expect(run.lines[0]).toMatch(/^edgecount: Go is missing/);
});
