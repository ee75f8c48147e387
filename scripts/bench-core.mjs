// Measures edgecount-core natively and as Wasm in V8, the engine the worker runs in:
// - the Criterion micro-benchmarks of core/benches/core_ops.rs, as one table of ns per op on
//   both sides and their ratio;
// - memory per counter, from core/examples/counter_memory.rs (1,000,000 counters in a shard),
//   with short names and with the longest the API allows.
// Prints as it goes and writes the results as Markdown to build/bench-core.md.
//
// Usage: node scripts/bench-core.mjs [--rounds N] [FILTER]
//   --rounds N runs both sides N times, alternating, and keeps each benchmark's lowest estimate:
//     on a shared machine other work only ever adds time, so the lowest is the least disturbed.
//   FILTER runs only the benchmarks whose names contain it (and skips the memory run).
// Wasm runs under Node's WASI; the same file is the runner:
//   node --no-turbo-fast-api-calls scripts/bench-core.mjs --wasi <module.wasm> [GUEST=HOST ...] -- ARGS
import { spawn } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TARGET_DIR = process.env.CARGO_TARGET_DIR
  ? resolve(process.env.CARGO_TARGET_DIR)
  : join(ROOT, "target");
// Short runs keep the whole comparison within a few minutes on two cores; the figures are
// Criterion's estimates, so they stay comparable run to run.
const CRITERION_ARGS = [
  "--bench",
  "--noplot",
  "--warm-up-time",
  "1",
  "--measurement-time",
  "2",
];
// Node's WASI calls use V8's fast API calls, and one that triggers a garbage collection
// crashes the process (nodejs/node#46777); with a large Wasm memory that happens within
// seconds. Turning fast calls off only slows the WASI calls, which the timed loops never make.
const NODE_WASI_FLAGS = ["--no-warnings", "--no-turbo-fast-api-calls"];

/** Runs a WASI command module: `<module.wasm> [GUEST=HOST ...] -- ARGS`. */
async function runWasi(argv) {
  const { WASI } = await import("node:wasi");
  const split = argv.indexOf("--");
  const [wasmPath, ...dirs] = split < 0 ? argv : argv.slice(0, split);
  const args = split < 0 ? [] : argv.slice(split + 1);
  const preopens = Object.fromEntries(dirs.map((d) => d.split("=", 2)));
  const wasi = new WASI({
    version: "preview1",
    args: [wasmPath, ...args],
    // Criterion writes its estimates under CRITERION_HOME, here the first preopened directory.
    env: dirs.length ? { CRITERION_HOME: Object.keys(preopens)[0] } : {},
    preopens,
    returnOnExit: true,
  });
  const module = await WebAssembly.compile(readFileSync(wasmPath));
  const instance = await WebAssembly.instantiate(
    module,
    wasi.getImportObject(),
  );
  return wasi.start(instance);
}

async function main(argv) {
  const roundsAt = argv.indexOf("--rounds");
  const rounds = roundsAt < 0 ? 1 : Number(argv[roundsAt + 1]);
  if (!Number.isInteger(rounds) || rounds < 1)
    fail("--rounds takes a whole number from 1");
  const filter = argv.filter(
    (_, i) => roundsAt < 0 || (i !== roundsAt && i !== roundsAt + 1),
  )[0];
  const started = Date.now();
  const load = loadavg()[0].toFixed(2);
  log(`${cpus().length} cores, load average ${load}`);

  log("building the benchmark natively (cargo bench --no-run)");
  const native = await cargoExecutables(
    ["bench", "-p", "edgecount-core", "--bench", "core_ops", "--no-run"],
    ["core_ops"],
  );
  const wasm = await buildWasm();

  const criterionArgs = filter ? [...CRITERION_ARGS, filter] : CRITERION_ARGS;
  const names = (
    await run(native.core_ops, ["--list", ...(filter ? [filter] : [])], {
      quiet: true,
    })
  ).stdout
    .split("\n")
    .filter((line) => line.endsWith(": benchmark"))
    .map((line) => line.slice(0, -": benchmark".length));
  if (names.length === 0)
    fail(`no benchmark matches ${JSON.stringify(filter)}`);

  const work = mkdtempSync(join(tmpdir(), "bench-core-"));
  try {
    const nativeNs = new Map();
    const wasmNs = new Map();
    for (let round = 1; round <= rounds; round++) {
      const of = rounds > 1 ? ` (round ${round} of ${rounds})` : "";
      log(`native: ${names.length} benchmarks${of}`);
      const nativeHome = join(work, `native-${round}`);
      await run(native.core_ops, criterionArgs, {
        env: { CRITERION_HOME: nativeHome },
      });
      keepLowest(nativeNs, estimates(nativeHome));
      log(
        `wasm32-wasip1 in Node ${process.version}: ${names.length} benchmarks${of}`,
      );
      const wasmHome = join(work, `wasm-${round}`);
      mkdirSync(wasmHome);
      await runWasm(wasm.core_ops, [`/criterion=${wasmHome}`], criterionArgs);
      keepLowest(wasmNs, estimates(wasmHome));
    }
    const rows = names.map((name) => [
      name,
      nativeNs.get(name),
      wasmNs.get(name),
    ]);
    const memory = filter ? null : await measureMemory(wasm.counter_memory);
    const seconds = Math.round((Date.now() - started) / 1000);

    console.log(`\n${textTable(rows)}`);
    if (anyNoisy(rows)) console.log(NOISY_NOTE);
    if (memory) console.log(`\n${memory.text}`);
    const rustc = (
      await run("rustc", ["--version"], { quiet: true })
    ).stdout.trim();
    const markdown = report(rows, memory, { load, seconds, rustc, rounds });
    mkdirSync(join(ROOT, "build"), { recursive: true });
    writeFileSync(join(ROOT, "build", "bench-core.md"), markdown);
    log(`written to build/bench-core.md (${seconds} s in all)`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Builds the benchmark and the memory example for wasm32-wasip1. */
async function buildWasm() {
  // core's dev-dependencies include proptest, whose default `fork` feature needs
  // wait-timeout, which has no WASI implementation: no bench or example of core builds for
  // wasm32-wasip1 with `cargo bench --target`. So the same two source files are built as the
  // binaries of a small generated package that has only their own dependencies, at the
  // versions of the workspace's lock file and with its release profile.
  const dir = join(TARGET_DIR, "bench-core-wasm");
  mkdirSync(dir, { recursive: true });
  const core = readFileSync(join(ROOT, "core", "Cargo.toml"), "utf8");
  const workspace = readFileSync(join(ROOT, "Cargo.toml"), "utf8");
  const criterion = core.match(/^criterion\s*=.*$/m)?.[0];
  const serdeJson = workspace.match(/^serde_json\s*=.*$/m)?.[0];
  const profile = workspace.match(/^\[profile\.release\][^[]*/m)?.[0];
  if (!criterion || !serdeJson || !profile)
    fail("cannot read the versions and profile from Cargo.toml");
  const src = (path) => JSON.stringify(join(ROOT, path));
  writeFileSync(
    join(dir, "Cargo.toml"),
    `# Generated by scripts/bench-core.mjs: core's benchmark and memory example for wasm32-wasip1.
[package]
name = "edgecount-core-wasm-bench"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
edgecount-core = { path = ${src("core")} }
${criterion}
${serdeJson}

[[bin]]
name = "core_ops"
path = ${src("core/benches/core_ops.rs")}

[[bin]]
name = "counter_memory"
path = ${src("core/examples/counter_memory.rs")}

${profile.trim()}
`,
  );
  writeFileSync(
    join(dir, "Cargo.lock"),
    readFileSync(join(ROOT, "Cargo.lock")),
  );
  log("building the benchmark and the memory example for wasm32-wasip1");
  return cargoExecutables(
    [
      "build",
      "--manifest-path",
      join(dir, "Cargo.toml"),
      "--release",
      "--target",
      "wasm32-wasip1",
      "--bins",
    ],
    ["core_ops", "counter_memory"],
  );
}

/** Runs cargo with JSON messages and returns the paths of the executables named `wanted`. */
async function cargoExecutables(args, wanted) {
  const { stdout } = await run(
    "cargo",
    [...args, "--message-format=json-render-diagnostics"],
    {
      quiet: true,
      env: { CARGO_TARGET_DIR: TARGET_DIR },
    },
  );
  const found = {};
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line);
    if (
      message.reason === "compiler-artifact" &&
      message.executable &&
      wanted.includes(message.target.name)
    ) {
      found[message.target.name] = message.executable;
    }
  }
  for (const name of wanted)
    if (!found[name]) fail(`cargo ${args[0]} produced no ${name} executable`);
  return found;
}

/**
 * Runs the memory example natively (built in the bench profile, like the benchmark) and as Wasm,
 * each with short names and with the longest names allowed.
 */
async function measureMemory(wasmModule) {
  log("building the memory example natively");
  const { counter_memory: nativeExample } = await cargoExecutables(
    [
      "build",
      "--profile",
      "bench",
      "-p",
      "edgecount-core",
      "--example",
      "counter_memory",
    ],
    ["counter_memory"],
  );
  const native = [];
  const wasm = [];
  for (const args of [[], ["--longest-names"]]) {
    log(`memory per counter, native ${args.join(" ")}`);
    native.push((await run(nativeExample, args)).stdout.trim());
    log(`memory per counter, wasm32-wasip1 ${args.join(" ")}`);
    wasm.push((await runWasm(wasmModule, [], args)).stdout.trim());
  }
  return {
    native: native.join("\n\n"),
    wasm: wasm.join("\n\n"),
    text: `Native:\n${native.join("\n\n")}\n\nWasm (wasm32-wasip1 in V8):\n${wasm.join("\n\n")}`,
  };
}

async function runWasm(module, dirs, args) {
  const runner = fileURLToPath(import.meta.url);
  return run(process.execPath, [
    ...NODE_WASI_FLAGS,
    runner,
    "--wasi",
    module,
    ...dirs,
    "--",
    ...args,
  ]);
}

/**
 * Criterion's headline estimate (the slope, else the mean) of every benchmark under `home`, in
 * ns, and whether its 95% confidence interval is wider than NOISY of it.
 */
function estimates(home) {
  const found = new Map();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const path = join(dir, entry.name);
      if (entry.name !== "new") {
        walk(path);
        continue;
      }
      const id = JSON.parse(
        readFileSync(join(path, "benchmark.json"), "utf8"),
      ).full_id;
      const e = JSON.parse(readFileSync(join(path, "estimates.json"), "utf8"));
      const { point_estimate: value, confidence_interval: ci } =
        e.slope ?? e.mean;
      const noisy = (ci.upper_bound - ci.lower_bound) / value > NOISY;
      found.set(id, { value, noisy });
    }
  };
  walk(home);
  return found;
}

// A run disturbed by other work on the machine shows as a wide confidence interval: such a
// figure is marked, so that it is measured again rather than believed.
const NOISY = 0.1;
const NOISY_NOTE = `* the 95% confidence interval is wider than ${NOISY * 100}% of the estimate: run again`;

/** Keeps in `kept` the lower of its estimate and the new one, per benchmark. */
function keepLowest(kept, found) {
  for (const [id, estimate] of found) {
    if (!kept.has(id) || estimate.value < kept.get(id).value)
      kept.set(id, estimate);
  }
}

function ns(estimate) {
  if (!estimate) return "n/a";
  const { value, noisy } = estimate;
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${noisy ? "*" : ""}${value.toFixed(digits)}`;
}

function ratio(native, wasm) {
  return native && wasm ? `${(wasm.value / native.value).toFixed(2)}x` : "n/a";
}

function anyNoisy(rows) {
  return rows.some(([, native, wasm]) => native?.noisy || wasm?.noisy);
}

const HEADER = ["benchmark", "native ns/op", "wasm ns/op", "wasm/native"];

function cells(rows) {
  return rows.map(([name, native, wasm]) => [
    name,
    ns(native),
    ns(wasm),
    ratio(native, wasm),
  ]);
}

function textTable(rows) {
  const all = [HEADER, ...cells(rows)];
  const widths = HEADER.map((_, i) =>
    Math.max(...all.map((row) => row[i].length)),
  );
  return all
    .map((row) =>
      row
        .map((cell, i) =>
          i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]),
        )
        .join("  "),
    )
    .join("\n");
}

function report(rows, memory, { load, seconds, rustc, rounds }) {
  const lines = [
    "# edgecount-core benchmarks",
    "",
    `Criterion estimates (ns per op), natively and as wasm32-wasip1 in V8 (Node ${process.version}),`,
    `${CRITERION_ARGS.slice(2).join(" ")}, ${rounds > 1 ? `lowest of ${rounds} rounds` : "one round"}; ${cpus().length} cores (${cpus()[0]?.model.trim()}),`,
    `load average ${load} at the start; ${rustc}; ${seconds} s in all.`,
    "",
    `| ${HEADER.join(" | ")} |`,
    "| --- | ---: | ---: | ---: |",
    // A lone `*` would start emphasis in Markdown.
    ...cells(rows).map(
      (row) => `| ${row.join(" | ").replaceAll("*", "\\*")} |`,
    ),
  ];
  if (anyNoisy(rows)) lines.push("", NOISY_NOTE.replace("*", "\\*"));
  if (memory) {
    lines.push(
      "",
      "## Memory per counter (core/examples/counter_memory.rs)",
      "",
      "Native:",
      "",
      "```",
      memory.native,
      "```",
      "",
      "wasm32-wasip1 in V8:",
      "",
      "```",
      memory.wasm,
      "```",
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Runs a command; its stdout is shown as it comes (unless `quiet`) and returned. */
function run(command, args, { env = {}, quiet = false } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let stdout = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      if (!quiet) process.stdout.write(chunk);
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (code === 0) resolvePromise({ stdout });
      else
        reject(
          new Error(
            `${command} ${args.join(" ")} failed (${signal ?? `exit ${code}`})`,
          ),
        );
    });
  });
}

function log(message) {
  console.log(`[bench-core] ${message}`);
}

function fail(message) {
  console.error(`[bench-core] ${message}`);
  process.exit(1);
}

// Last, so that every constant above is initialised before it runs.
if (process.argv[2] === "--wasi") {
  process.exitCode = await runWasi(process.argv.slice(3));
} else {
  await main(process.argv.slice(2));
}
