// `make dev` keeps no trace of a visit (docs/days.md#what-is-kept-and-what-is-not): wrangler
// dev's local trace store, which keeps every request's URL, is turned off by scripts/dev.sh,
// and one left in .dev-state/ by an earlier run is removed. With the store off, the name of a
// counted page is on disk only in its counter's shard, and a visitor's address and user agent
// nowhere.
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freePort } from "../scripts/child-process.mjs";

const dir = mkdtempSync(join(tmpdir(), "edgecount-dev-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What scripts/dev.sh runs wrangler with, from a copy of it in a checkout of its own (its
 * .dev-state/ there holds `state`), with a stand-in wrangler that records its call. */
function devScriptRun(state: Record<string, string>) {
  const root = mkdtempSync(join(dir, "checkout-"));
  mkdirSync(join(root, "scripts"));
  writeFileSync(
    join(root, "scripts/dev.sh"),
    readFileSync("scripts/dev.sh", "utf8"),
    { mode: 0o755 },
  );
  for (const [file, text] of Object.entries(state)) {
    mkdirSync(join(root, file, ".."), { recursive: true });
    writeFileSync(join(root, file), text);
  }
  const bin = join(root, "bin");
  mkdirSync(bin);
  writeFileSync(
    join(bin, "wrangler"),
    '#!/bin/sh\nprintf "%s\\n" "X_LOCAL_OBSERVABILITY=${X_LOCAL_OBSERVABILITY-}" "$*" > "$(dirname "$0")/../called"\n',
    { mode: 0o755 },
  );
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
  delete env.X_LOCAL_OBSERVABILITY;
  const run = spawnSync("bash", [join(root, "scripts/dev.sh")], {
    env,
    encoding: "utf8",
  });
  expect(run.status, run.stderr).toBe(0);
  const [observability, args] = readFileSync(join(root, "called"), "utf8")
    .trimEnd()
    .split("\n");
  return { root, observability, args };
}

it("runs wrangler dev with its trace store off, and removes one an earlier run left", () => {
  const { root, observability, args } = devScriptRun({
    ".dev-state/v3/observability/traces.sqlite": "POST /v1/counters/pages/home",
    ".dev-state/v3/do/edgecount-Shard/shard.sqlite": "counters",
  });
  expect(observability).toBe("X_LOCAL_OBSERVABILITY=false");
  expect(args).toContain("--persist-to .dev-state");
  expect(existsSync(join(root, ".dev-state/v3/observability"))).toBe(false);
  expect(existsSync(join(root, ".dev-state/v3/do/edgecount-Shard"))).toBe(true);
});

/** Files under `root` whose bytes hold `text`. */
function filesHolding(root: string, text: string): string[] {
  if (!existsSync(root)) return [];
  return (readdirSync(root, { recursive: true }) as string[]).filter((file) => {
    try {
      return readFileSync(join(root, file)).includes(text);
    } catch {
      return false; // a folder
    }
  });
}

/** Serves the build with wrangler dev over `persist`, with `env` added, counts a visit to the
 * page `key` by `visitor`, and stops. */
async function visitUnderWranglerDev(
  persist: string,
  env: Record<string, string>,
  key: string,
  visitor: { agent: string; address: string },
  waitForTrace: boolean,
) {
  const port = await freePort();
  // Only `env` decides the trace store: none of this shell's settings of it.
  const { X_LOCAL_OBSERVABILITY: _, ...inherited } = process.env;
  const child = spawn(
    resolve("node_modules/.bin/wrangler"),
    [
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--persist-to",
      persist,
      "--show-interactive-dev-session=false",
      "--var",
      "EDGECOUNT_OPEN:1",
    ],
    {
      env: {
        ...inherited,
        CLOUDFLARE_CF_FETCH_ENABLED: "false",
        WRANGLER_SEND_METRICS: "false",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  let log = "";
  child.stdout!.on("data", (text) => (log += text));
  child.stderr!.on("data", (text) => (log += text));
  const exited = new Promise((done) => child.once("exit", done));
  try {
    const url = `http://127.0.0.1:${port}`;
    let up = false;
    for (let i = 0; i < 600 && !up && child.exitCode === null; i++) {
      up = await fetch(`${url}/v1/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (!up) await new Promise((r) => setTimeout(r, 100));
    }
    expect(up, log).toBe(true);
    const counted = await fetch(
      `${url}/v1/counters/site/${key}/incr?unique=1`,
      {
        method: "POST",
        headers: {
          "user-agent": visitor.agent,
          "cf-connecting-ip": visitor.address,
        },
      },
    );
    expect(counted.status).toBe(200);
    // The store writes a trace after its request is answered: wait until it holds this one.
    const traces = join(persist, "v3/observability");
    for (
      let i = 0;
      waitForTrace && i < 300 && filesHolding(traces, key).length === 0;
      i++
    )
      await new Promise((r) => setTimeout(r, 100));
  } finally {
    // wrangler runs workerd as a child of its own: end the process group this spec started.
    const end = (signal: NodeJS.Signals) => {
      if (child.exitCode === null && child.signalCode === null)
        process.kill(-child.pid!, signal);
    };
    end("SIGTERM");
    const timer = setTimeout(() => end("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  }
  return {
    page: filesHolding(persist, key),
    visitor: [
      ...filesHolding(persist, visitor.agent),
      ...filesHolding(persist, visitor.address),
    ],
  };
}

it("keeps the pages visited only in their counters, and no visitor, with the trace store off", async () => {
  const { observability } = devScriptRun({});
  // What dev.sh sets, if anything (unset, wrangler's default holds).
  const [name, value] = observability.split("=");
  const asMakeDevRunsIt: Record<string, string> = value
    ? { [name]: value }
    : {};
  const key = `page-${Math.random().toString(36).slice(2)}`;
  const visitor = {
    agent: `Mozilla/5.0 (probe ${Math.random().toString(36).slice(2)})`,
    address: "203.0.113.77",
  };
  // wrangler's default: its trace store keeps the visit's URL, so the search below sees it.
  const kept = join(dir, "default");
  const withTraces = await visitUnderWranglerDev(kept, {}, key, visitor, true);
  expect(withTraces.page.some((f) => f.startsWith("v3/observability/"))).toBe(
    true,
  );
  expect(withTraces.visitor).toEqual([]);
  // As make dev runs it: the counter's shard holds the page, and nothing else does.
  const off = join(dir, "off");
  const withoutTraces = await visitUnderWranglerDev(
    off,
    asMakeDevRunsIt,
    key,
    visitor,
    false,
  );
  expect(existsSync(join(off, "v3/observability"))).toBe(false);
  expect(withoutTraces.page.length).toBeGreaterThan(0);
  expect(withoutTraces.page.every((f) => f.startsWith("v3/do/"))).toBe(true);
  expect(withoutTraces.visitor).toEqual([]);
}, 180_000);
