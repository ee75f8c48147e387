// worker/entry.js restarts the Wasm instance after a trap. A trap in the real worker is a bug
// no request can trigger on purpose, so the entry module runs here, in workerd, over a
// stand-in for wasm-bindgen's glue with the same exports, whose calls trap on request.
import { readFileSync } from "node:fs";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { afterAll, beforeAll, expect, it } from "vitest";

// The glue's exports as worker/entry.js uses them: the init state the worker crate keeps,
// the reset wasm-bindgen generates, the worker's `fetch` and the `Shard` class. `/trap` and a
// shard call with the body "trap" throw what a trapping Wasm call throws.
const GLUE = `
const state = { criticalError: false, instanceId: 0 };
let resets = 0;
export function __worker_init_state() { return state; }
export function __wbg_reset_state() { resets++; }
export class Shard {
  constructor() { this.madeIn = state.instanceId; }
  runOps(body) {
    if (body === "trap") throw new WebAssembly.RuntimeError("unreachable");
    if (body === "fail") throw new Error("an ordinary error");
    return JSON.stringify({ madeIn: this.madeIn });
  }
}
export function fetch(request, env) {
  const path = new URL(request.url).pathname;
  if (path === "/trap") throw new WebAssembly.RuntimeError("unreachable");
  if (path === "/fail") throw new Error("an ordinary error");
  if (path.startsWith("/shard/")) {
    const shard = env.SHARDS.get(env.SHARDS.idFromName("one"));
    return shard.runOps(path.slice("/shard/".length)).then(
      (answer) => new Response(answer),
      (error) => new Response(String(error), { status: 500 }),
    );
  }
  return Response.json({ resets, instanceId: state.instanceId });
}
`;

let mf: Miniflare;

beforeAll(async () => {
  // In Miniflare 4's shape, as tests/service.ts passes wrangler's options.
  mf = new Miniflare(
    convertV4MiniflareOptions({
      workers: [
        {
          name: "entry",
          modules: [
            {
              type: "ESModule",
              path: "entry.js",
              contents: readFileSync("worker/entry.js", "utf8"),
            },
            { type: "ESModule", path: "index.js", contents: GLUE },
          ],
          compatibilityDate: "2026-11-01",
          durableObjects: { SHARDS: { className: "Shard", useSQLite: true } },
        },
      ],
    } as never),
  );
  await mf.ready;
});
afterAll(() => mf.dispose());

async function get(path: string): Promise<Response> {
  return mf.dispatchFetch(`http://entry.test${path}`) as never;
}

async function state(): Promise<{ resets: number; instanceId: number }> {
  return (await get("/")).json();
}

it("starts a new instance after a trap, and not after an ordinary error", async () => {
  expect(await state()).toEqual({ resets: 0, instanceId: 0 });
  expect((await get("/fail")).status).toBe(500);
  expect(await state()).toEqual({ resets: 0, instanceId: 0 });

  expect((await get("/trap")).status).toBe(500);
  // The next request finds the instance poisoned and restarts it first, once.
  expect(await state()).toEqual({ resets: 1, instanceId: 1 });
  expect(await state()).toEqual({ resets: 1, instanceId: 1 });
});

it("makes a shard's Wasm object again in the new instance after a trap in a shard call", async () => {
  const before = await state();
  const made = async () => JSON.parse(await (await get("/shard/read")).text());
  expect(await made()).toEqual({ madeIn: before.instanceId });

  expect((await get("/shard/fail")).status).toBe(500);
  expect(await made()).toEqual({ madeIn: before.instanceId });

  expect((await get("/shard/trap")).status).toBe(500);
  // The shard's next call restarts the instance and makes its object in the new one.
  expect(await made()).toEqual({ madeIn: before.instanceId + 1 });
  expect(await state()).toEqual({
    resets: before.resets + 1,
    instanceId: before.instanceId + 1,
  });
});
