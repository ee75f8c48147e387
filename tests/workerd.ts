// `workerd serve` with the production-like config (scripts/workerd-config.mjs), for specs that
// need the runtime itself: killing it, or speaking raw sockets to it without a dev proxy.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort } from "../scripts/child-process.mjs";
import { SPEC_VARS } from "./service";

export interface Runtime {
  /** `http://127.0.0.1:<port>` */
  url: string;
  process: ChildProcess;
  /** What the runtime has written to stderr so far (its last 64 KiB). */
  log: () => string;
}

const LOG_BYTES = 64 * 1024;

/** Starts workerd on `port` over the state kept in `dir`, with `vars` over wrangler.toml's,
 * and waits until it answers. */
export async function startWorkerd(
  port: number,
  dir: string,
  vars: Record<string, string> = {},
): Promise<Runtime> {
  const config = join(dir, "edgecount.capnp");
  mkdirSync(join(dir, "state"), { recursive: true });
  spawnSync(
    process.execPath,
    [
      "scripts/workerd-config.mjs",
      String(port),
      join(dir, "state"),
      config,
      ...Object.entries({ ...SPEC_VARS, ...vars }).map(
        ([name, value]) => `${name}=${value}`,
      ),
    ],
    { stdio: "inherit" },
  );
  const child = spawn(resolve("node_modules/.bin/workerd"), ["serve", config], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (text: string) => {
    log = (log + text).slice(-LOG_BYTES);
  });
  const url = `http://127.0.0.1:${port}`;
  // Up to 30 s: a runtime compiling the worker's Wasm on a machine busy with the rest of the
  // suite has taken more than 10.
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/v1/health`)).ok)
        return { url, process: child, log: () => log };
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error("workerd did not start");
}

/** A runtime that is one spec's alone: over a fresh state folder, on a free port. */
export interface ScratchRuntime extends Runtime {
  /** Kills the runtime and removes its folder. */
  stop(): void;
}

/** Starts a {@link ScratchRuntime}, its folder named after `name`, with `vars`. */
export async function startScratchWorkerd(
  name: string,
  vars: Record<string, string> = {},
): Promise<ScratchRuntime> {
  const dir = mkdtempSync(join(tmpdir(), `edgecount-${name}-`));
  try {
    const runtime = await startWorkerd(await freePort(), dir, vars);
    return {
      ...runtime,
      stop() {
        runtime.process.kill("SIGKILL");
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
