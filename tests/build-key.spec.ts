// scripts/build-worker.sh skips cargo when scripts/worker-source-key.sh gives the key of a
// build kept on this machine. A key that stayed the same across a change cargo reads would
// ship a stale worker, so each kind of such change is made here, in a throwaway clone, and
// must change the key; two clones of the same sources must share it, or clones gain nothing.
import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..");
const scratch = mkdtempSync(join(tmpdir(), "edgecount-build-key-"));

/** A clone of the committed sources under `name`, with the project's node_modules (the tools'
 * versions); made once, then put back as committed on each later call. */
function cloneAt(name: string): string {
  const dir = join(scratch, name);
  if (existsSync(dir)) {
    execFileSync("git", ["checkout", "--quiet", "--", "."], { cwd: dir });
    execFileSync("git", ["clean", "-fdq", "--exclude=node_modules"], {
      cwd: dir,
    });
    return dir;
  }
  execFileSync("git", ["clone", "--quiet", "--shared", ROOT, dir]);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

function keyOf(dir: string, env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync(join(dir, "scripts/worker-source-key.sh"), {
    cwd: dir,
    env,
    encoding: "utf8",
  }).trim();
}

let original: string;
let originalKey: string;

beforeAll(() => {
  original = cloneAt("original");
  originalKey = keyOf(original);
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the worker's source key", () => {
  it("is one 32-digit key, the same for every clone of the same sources", () => {
    expect(originalKey).toMatch(/^[0-9a-f]{32}$/);
    expect(keyOf(cloneAt("elsewhere"))).toBe(originalKey);
  });

  it("is made before node_modules is installed, and the same as after", () => {
    // make test compiles the Wasm beside the installs, keyed before node_modules exists.
    const dir = join(scratch, "before-install");
    execFileSync("git", ["clone", "--quiet", "--shared", ROOT, dir]);
    expect(existsSync(join(dir, "node_modules"))).toBe(false);
    expect(keyOf(dir)).toBe(originalKey);
  });

  it("is the same when only files cargo does not read change", () => {
    const dir = cloneAt("changed");
    appendFileSync(join(dir, "README.md"), "\nanother line\n");
    writeFileSync(
      join(dir, "tests/untracked.spec.ts"),
      "// not the worker's\n",
    );
    expect(keyOf(dir)).toBe(originalKey);
  });

  const changes: [string, (dir: string) => void][] = [
    [
      "an edited source file",
      (dir) => appendFileSync(join(dir, "core/src/lib.rs"), "\n// edited\n"),
    ],
    [
      "a new, untracked source file",
      (dir) => writeFileSync(join(dir, "worker/src/new_module.rs"), "\n"),
    ],
    [
      "a deleted source file",
      (dir) => rmSync(join(dir, "worker/static/demo.js")),
    ],
    [
      "another Cargo.lock",
      (dir) => appendFileSync(join(dir, "Cargo.lock"), "\n"),
    ],
    [
      "another workspace manifest",
      (dir) => appendFileSync(join(dir, "Cargo.toml"), "\n"),
    ],
    [
      "another cargo config",
      (dir) => appendFileSync(join(dir, ".cargo/config.toml"), "\n"),
    ],
    [
      "another browser client (compiled in)",
      (dir) => appendFileSync(join(dir, "client/dist/edgecount.js"), "\n"),
    ],
    [
      "another build script",
      (dir) => appendFileSync(join(dir, "scripts/build-worker.sh"), "\n"),
    ],
  ];
  for (const [what, change] of changes) {
    it(`changes with ${what}`, () => {
      const dir = cloneAt("changed");
      change(dir);
      expect(keyOf(dir)).not.toBe(originalKey);
    });
  }

  it("changes with the flags cargo passes to rustc", () => {
    expect(
      keyOf(original, {
        ...process.env,
        RUSTFLAGS: "-C target-feature=+simd128",
      }),
    ).not.toBe(originalKey);
    expect(
      keyOf(original, { ...process.env, CARGO_PROFILE_RELEASE_LTO: "thin" }),
    ).not.toBe(originalKey);
  });

  it("changes with the toolchain", () => {
    // A stand-in rustc first on PATH reports another version; cargo is left as it is.
    const bin = join(scratch, "other-toolchain");
    mkdirSync(bin);
    writeFileSync(
      join(bin, "rustc"),
      '#!/bin/sh\necho "rustc 1.0.0 (another toolchain)"\n',
      { mode: 0o755 },
    );
    expect(
      keyOf(original, { ...process.env, PATH: `${bin}:${process.env.PATH}` }),
    ).not.toBe(originalKey);
  });

  it("is refused outside a git work tree, so that cargo runs", () => {
    const dir = join(scratch, "tarball");
    cpSync(original, dir, {
      recursive: true,
      filter: (path) =>
        !path.endsWith("/.git") && !path.endsWith("/node_modules"),
    });
    expect(() =>
      execFileSync(join(dir, "scripts/worker-source-key.sh"), {
        cwd: dir,
        stdio: "pipe",
      }),
    ).toThrow();
  });
});
