// Runs the built worker inside workerd with Miniflare, configured from wrangler.toml, and
// gives specs a small client for it. Every spec shares this one setup.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";

export interface ServiceOptions {
  /** Folder for Durable Object state; omit for in-memory state. */
  persistDir?: string;
  /** Vars that replace wrangler.toml's. */
  vars?: Record<string, string>;
  /** Also serve over HTTP on a free loopback port (for a browser); see `Service.url`. */
  listen?: boolean;
  /** Vars of a second worker, the deployment being left during a rollout: it calls the same
   * shards (running this deployment's code), and `Service.fetchPrevious` reaches it. */
  previousDeployment?: Record<string, string>;
}

export interface Service {
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** A request to the previous deployment's worker (see `previousDeployment`). */
  fetchPrevious(path: string, init?: RequestInit): Promise<Response>;
  /** The exact value of a counter, read from its shard (never from the isolate's kept reads
   * of hot keys) and as text, so values past 2^53 stay exact. */
  value(ns: string, key: string): Promise<bigint>;
  /** The HTTP address when started with `listen`, e.g. `http://127.0.0.1:41234`. */
  url?: string;
  stop(): Promise<void>;
}

/** Vars every spec's worker (and a previous deployment's) gets unless it says otherwise: the
 * shards' statistics fresh on every ask (a spec compares them before and after what it does;
 * reuse, the default, is tested in tests/operations.spec.ts), and open writes. */
export const SPEC_VARS: Record<string, string> = {
  EDGECOUNT_STATS_MAX_AGE_MS: "0",
  // Open, as `make dev` is, unless a spec configures tokens or public namespaces (or sets it
  // to "0" to see a deployment nobody configured).
  EDGECOUNT_OPEN: "1",
};

/** A spec asking for a drill (EDGECOUNT_DRILL_*) needs the build that has them: without it the
 * fault would silently not happen, and the spec would test nothing. */
function checkDrills(main: string, vars: Record<string, string>) {
  if (!Object.keys(vars).some((name) => name.startsWith("EDGECOUNT_DRILL_")))
    return;
  const marker = join(dirname(main), ".features");
  const features = existsSync(marker) ? readFileSync(marker, "utf8") : "";
  if (!features.split(/\s+/).includes("drills"))
    throw new Error(
      "this spec asks for a drill, but build/ was built without them: run `make build-drills` (make test does)",
    );
}

export async function startService(
  options: ServiceOptions = {},
): Promise<Service> {
  const { workerOptions, main } =
    unstable_getMiniflareWorkerOptions("wrangler.toml");
  if (!main) throw new Error("wrangler.toml has no `main`");
  checkDrills(main, {
    ...options.vars,
    ...options.previousDeployment,
  });
  // The entry module, the wasm-bindgen glue it wraps, and the Wasm module.
  const code = {
    modulesRoot: dirname(main),
    modules: [
      { type: "ESModule", path: main },
      { type: "ESModule", path: join(dirname(main), "index.js") },
      {
        type: "CompiledWasm",
        path: join(dirname(main), "index_bg.wasm"),
      },
    ],
  };
  const name = workerOptions.name ?? "edgecount";
  const previous = options.previousDeployment
    ? [
        {
          ...workerOptions,
          ...code,
          name: `${name}-previous`,
          bindings: {
            ...workerOptions.bindings,
            ...SPEC_VARS,
            ...options.previousDeployment,
          },
          // The same Durable Object class and storage as the current deployment's worker.
          durableObjects: { SHARDS: { className: "Shard", scriptName: name } },
        },
      ]
    : [];
  // wrangler hands out options in Miniflare 4's shape; Miniflare 5 converts them.
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      workers: [
        {
          ...workerOptions,
          ...code,
          name,
          bindings: {
            ...workerOptions.bindings,
            ...SPEC_VARS,
            ...options.vars,
          },
        },
        ...previous,
      ],
      resourcePersistencePath: options.persistDir,
      cf: false,
      ...(options.listen ? { host: "127.0.0.1", port: 0 } : {}),
    } as never),
  );
  const ready = await mf.ready;
  const service: Service = {
    url: options.listen ? ready.origin : undefined,
    async fetch(path, init) {
      const send = () =>
        mf.dispatchFetch(`http://edgecount.test${path}`, init as never);
      // A read is safe to send again, and may have to be: after the worker refuses a body it
      // did not read in full (413), it closes that connection, which can still be in the
      // client's pool when the next request takes it. Whether the client then finds it closed
      // while reading ("other side closed") or while writing (EPIPE, or a reset) is down to
      // timing.
      const method = (init?.method ?? "GET").toUpperCase();
      const safe = method === "GET" || method === "HEAD";
      const closedUnder = ["UND_ERR_SOCKET", "EPIPE", "ECONNRESET"];
      const response = await send().catch((error) => {
        if (!safe || !closedUnder.includes(error?.cause?.code)) throw error;
        return send();
      });
      return buffered(response as unknown as Response);
    },
    async fetchPrevious(path, init) {
      const worker = await mf.getWorker(`${name}-previous`);
      return buffered(
        (await worker.fetch(
          `http://edgecount.test${path}`,
          init as never,
        )) as unknown as Response,
      );
    },
    async value(ns, key) {
      const response = await service.fetch(
        `/v1/counters/${ns}/${encodeURIComponent(key)}?consistency=strong`,
        { headers: { accept: "text/plain" } },
      );
      if (response.status !== 200) {
        throw new Error(
          `reading ${ns}/${key}: ${response.status} ${await response.text()}`,
        );
      }
      return BigInt(await response.text());
    },
    stop: () => mf.dispose(),
  };
  return service;
}

/** The isolate's edge figures in `/v1/stats` (asking sends no op to a shard). */
export async function edgeStats(on: Service): Promise<Record<string, number>> {
  return (await (await on.fetch("/v1/stats")).json()).edge;
}

/** Waits until the isolate's edge figures say `done`: at most 200 looks, 25 ms apart. */
export async function untilEdge(
  on: Service,
  done: (edge: Record<string, number>) => boolean,
): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (done(await edgeStats(on))) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("the isolate's figures never got there");
}

/** The `value` field of a JSON body, exactly (JSON.parse would round it past 2^53). */
export function exactValue(body: string): bigint {
  const match = /"value":(-?\d+)/.exec(body);
  if (!match) throw new Error(`no value in ${body}`);
  return BigInt(match[1]);
}

/** One shard's figures in `/v1/stats` (docs/operations.md lists them all). */
export interface ShardStats {
  calls: number;
  groups: number;
  ops: number;
  rows_read: number;
  rows_written: number;
  counters_in_memory: number;
  [figure: string]: unknown;
}

/** Increments `ns/key` once, so that its shard holds it, and answers a reader of that shard's
 * figures. */
export async function shardOfNewCounter(
  service: Service,
  ns: string,
  key: string,
): Promise<{ shardStats: () => Promise<ShardStats> }> {
  const first = await service.fetch(`/v1/counters/${ns}/${key}/incr`, {
    method: "POST",
  });
  if (first.status !== 200)
    throw new Error(`incr ${ns}/${key}: ${first.status}`);
  const shard = Number(first.headers.get("x-edgecount-shard"));
  const shardStats = async () =>
    (await (await service.fetch("/v1/stats")).json()).shards[
      shard
    ] as ShardStats;
  return { shardStats };
}

/** A namespace unique to one test, so tests never see each other's counters. */
export function freshNamespace(label: string): string {
  return `${label}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** What a shard charges a cache entry against `EDGECOUNT_SHARD_CACHE_BYTES`: its names,
 * content type and value in bytes plus a fixed 192 (`entry_charge` in core/src/shard/cache_table.rs). */
export function cacheEntryCharge(
  ns: string,
  key: string,
  contentType: string,
  valueBytes: number,
): number {
  const bytes = (text: string) => new TextEncoder().encode(text).length;
  return 192 + bytes(ns) + bytes(key) + bytes(contentType) + valueBytes;
}

/** The response with its body read at once: with many requests in flight, Miniflare may drain a
 * body that is left unread for a while, and the spec would then find it already consumed. */
async function buffered(response: Response): Promise<Response> {
  const body = await response.arrayBuffer();
  const nullBody = [101, 204, 205, 304].includes(response.status);
  return new Response(nullBody ? null : body, {
    status: response.status,
    headers: response.headers as unknown as Headers,
  });
}
