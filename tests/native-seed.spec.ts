// scripts/native-seed.sh gives a fresh clone the target/debug of an earlier clone and sets the
// times of the files that still have the seed's contents back, so that cargo takes their
// outputs as fresh. Taking an output built from other contents would be a stale build, so each
// way that could happen is tried here, on a one-file crate in throwaway clones (it builds in a
// fraction of a second): an edited file, a clone made before the seed was saved, a run that
// began with a target/debug of its own, and files that change during the checks.
import { execFileSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..");
const scratch = mkdtempSync(join(tmpdir(), "edgecount-native-seed-"));
const origin = join(scratch, "origin");
const seeds = join(scratch, "seeds");
const env = { ...process.env, EDGECOUNT_NATIVE_SEEDS: seeds };

function run(cwd: string, command: string, args: string[]): string {
  return execFileSync(command, args, {
    cwd,
    env,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** cargo's own account of the build: which crates it compiled and which it found fresh. */
const build = (dir: string) =>
  run(dir, "bash", ["-c", "cargo build --offline --verbose 2>&1"]);

/** The seeds kept, by name: a seed's name says what it was built from. */
const seedsKept = () =>
  readdirSync(seeds)
    .filter((name) => !name.startsWith("."))
    .sort();

const answerOf = (dir: string) =>
  run(dir, "target/debug/seed-probe", []).trim();
const seed = (dir: string, step: "restore" | "save") =>
  run(dir, "scripts/native-seed.sh", [step]);

let clones = 0;
function clone(): string {
  const dir = join(scratch, `clone-${++clones}`);
  run(scratch, "git", ["clone", "--quiet", origin, dir]);
  return dir;
}
const setAnswer = (dir: string, answer: number) =>
  writeFileSync(
    join(dir, "src/answer.rs"),
    `pub const ANSWER: u32 = ${answer};\n`,
  );

let builtBeforeTheSeed: string;

beforeAll(() => {
  mkdirSync(join(origin, "src"), { recursive: true });
  mkdirSync(join(origin, "scripts"));
  cpSync(
    join(ROOT, "scripts/native-seed.sh"),
    join(origin, "scripts/native-seed.sh"),
  );
  writeFileSync(
    join(origin, "Cargo.toml"),
    '[package]\nname = "seed-probe"\nversion = "0.1.0"\nedition = "2021"\n',
  );
  writeFileSync(
    join(origin, "src/main.rs"),
    'mod answer;\nfn main() { println!("{}", answer::ANSWER); }\n',
  );
  setAnswer(origin, 1);
  writeFileSync(join(origin, ".gitignore"), "/target/\n");
  run(origin, "cargo", ["generate-lockfile", "--offline"]);
  run(origin, "git", ["init", "--quiet"]);
  run(origin, "git", ["add", "."]);
  run(origin, "git", [
    "-c",
    "user.name=seed",
    "-c",
    "user.email=seed@example.invalid",
    "commit",
    "--quiet",
    "-m",
    "probe",
  ]);
  // Made, and edited, before any seed exists: its files are older than the seed's outputs.
  builtBeforeTheSeed = clone();
  setAnswer(builtBeforeTheSeed, 4);

  const first = clone();
  expect(seed(first, "restore")).toContain("no seed");
  build(first);
  expect(seed(first, "save")).toContain("saved as a seed");
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the native seed", () => {
  it("makes a clone of the same files build nothing", () => {
    const dir = clone();
    const [only] = seedsKept();
    const savedAt = Number(readFileSync(join(seeds, only, "saved-at"), "utf8"));
    const when = new Date(savedAt * 1000).toISOString().slice(0, 19);
    const restored = seed(dir, "restore");
    expect(restored).toContain(
      `from the seed saved ${when.replace("T", " ")} UTC`,
    );
    expect(restored).toMatch(/; 6 of 6 files/);
    const log = build(dir);
    expect(log).toMatch(/Fresh seed-probe/);
    expect(log).not.toMatch(/Compiling/);
    expect(answerOf(dir)).toBe("1");
  });

  it("rebuilds a crate whose file differs from the seed's", () => {
    const dir = clone();
    setAnswer(dir, 2);
    seed(dir, "restore");
    expect(build(dir)).toMatch(/Compiling seed-probe/);
    expect(answerOf(dir)).toBe("2");
  });

  it("rebuilds a changed file older than the seed's outputs", () => {
    seed(builtBeforeTheSeed, "restore");
    expect(build(builtBeforeTheSeed)).toMatch(/Compiling seed-probe/);
    expect(answerOf(builtBeforeTheSeed)).toBe("4");
  });

  it("takes, of several seeds, the one built from the clone's files", () => {
    const other = clone();
    setAnswer(other, 7);
    seed(other, "restore");
    build(other);
    expect(seed(other, "save")).toContain("saved as a seed");
    expect(seedsKept()).toHaveLength(2);
    for (const answer of [7, 1]) {
      const dir = clone();
      setAnswer(dir, answer);
      expect(seed(dir, "restore")).toMatch(/; 6 of 6 files/);
      expect(build(dir)).not.toMatch(/Compiling/);
      expect(answerOf(dir)).toBe(String(answer));
    }
  });

  it("neither takes nor saves a seed where target/debug was there first", () => {
    const before = seedsKept();
    const dir = clone();
    setAnswer(dir, 3);
    build(dir);
    expect(seed(dir, "restore")).toContain("target/debug exists");
    expect(seed(dir, "save")).toBe("");
    expect(seedsKept()).toEqual(before);
  });

  it("saves nothing when a file changed during the checks", () => {
    const before = seedsKept();
    const dir = clone();
    setAnswer(dir, 5);
    seed(dir, "restore");
    build(dir);
    setAnswer(dir, 6);
    expect(seed(dir, "save")).toContain("no seed saved");
    expect(seedsKept()).toEqual(before);
  });
});
