// Hot keys at the edge: max-age caching, ETags, strong reads, and the staleness bound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  edgeStats,
  exactValue,
  freshNamespace,
  startService,
  type Service,
} from "./service";

const MAX_AGE_S = 2;
let service: Service;
// Every key hot from its first read, and a kept read refreshed only after 45 s: whether a read
// is answered from the edge then depends on nothing but the key's history.
let alwaysHot: Service;
beforeAll(async () => {
  [service, alwaysHot] = await Promise.all([
    startService({
      vars: {
        // A key read twice within a second is hot; read once, it is cold.
        EDGECOUNT_HOT_THRESHOLD: "1",
        EDGECOUNT_HOT_MAX_AGE: String(MAX_AGE_S),
      },
    }),
    startService({
      vars: { EDGECOUNT_HOT_THRESHOLD: "0", EDGECOUNT_HOT_MAX_AGE: "60" },
    }),
  ]);
});
afterAll(() => Promise.all([service.stop(), alwaysHot.stop()]));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Reads a key until a read is answered from the edge (a key's rate is measured over the last
 * second, so how many reads that takes depends on the machine's pace); returns that answer. */
async function heat(path: string, on: Service = service): Promise<Response> {
  for (let i = 0; i < 50; i++) {
    const response = await on.fetch(path);
    if (response.headers.get("x-cache") === "HIT") return response;
  }
  throw new Error(
    `50 reads of ${path} in a row and none answered from the edge`,
  );
}

describe("hot keys", () => {
  it("answers a cold key with no-cache from the shard", async () => {
    const ns = freshNamespace("cold");
    const response = await service.fetch(`/v1/counters/${ns}/k`);
    expect(response.headers.get("cache-control")).toBe("no-cache");
    expect(response.headers.get("x-cache")).toBe("MISS");
    expect(response.headers.get("etag")).toBe('"0.0"');
    expect(response.headers.get("cache-tag")).toBeNull();
  });

  it("serves a hot key from the edge with public max-age and a namespace tag", async () => {
    const ns = freshNamespace("hot");
    const path = `/v1/counters/${ns}/home`;
    await service.fetch(`${path}/incr?by=7`, { method: "POST" });
    const response = await heat(path);
    expect(response.headers.get("x-cache")).toBe("HIT");
    expect(response.headers.get("cache-control")).toMatch(
      /^public, max-age=[0-2]$/,
    );
    expect(response.headers.get("cache-tag")).toBe(`ec-ns:${ns}`);
    expect(Number(response.headers.get("age"))).toBeLessThanOrEqual(MAX_AGE_S);
    expect(await response.json()).toEqual({
      ns,
      key: "home",
      value: 7,
      exists: true,
    });
    // The stats list the keys hot when they are asked, by their rate over the last second:
    // they are asked right after a read (again, should the machine pause between the two).
    let stats: any;
    let listed: { key: string; shard: number } | undefined;
    for (let i = 0; i < 5 && !listed; i++) {
      await service.fetch(path);
      stats = await (await service.fetch("/v1/stats")).json();
      listed = stats.edge.hot_keys.find((h: { ns: string }) => h.ns === ns);
    }
    expect(stats.edge.hits).toBeGreaterThan(0);
    expect(listed).toMatchObject({ key: "home" });
    expect(
      stats.shards[listed!.shard].hot_keys.map((h: { key: string }) => h.key),
    ).toContain("home");
  });

  it("lets scripts read a shared-cacheable answer's headers, whoever asked for it", async () => {
    // A shared cache may give the answer to a browser's cross-origin request later.
    const ns = freshNamespace("shared");
    const response = await alwaysHot.fetch(`/v1/counters/${ns}/k`);
    expect(response.headers.get("cache-control")).toMatch(/^public, /);
    expect(response.headers.get("access-control-expose-headers")).toContain(
      "ETag",
    );
  });

  it("always reads the shard for ?consistency=strong and Cache-Control: no-cache", async () => {
    const ns = freshNamespace("strong");
    const path = `/v1/counters/${ns}/k`;
    await heat(path);
    const strong = await service.fetch(`${path}?consistency=strong`);
    expect(strong.headers.get("x-cache")).toBe("MISS");
    const noCache = await service.fetch(path, {
      headers: { "cache-control": "no-cache" },
    });
    expect(noCache.headers.get("x-cache")).toBe("MISS");
  });

  it("sees its own writes at once, also on a hot key", async () => {
    const ns = freshNamespace("ryw");
    const path = `/v1/counters/${ns}/k`;
    const kept = await heat(path, alwaysHot);
    expect((await kept.json()).value).toBe(0);
    await alwaysHot.fetch(`${path}/incr?by=5`, { method: "POST" });
    // Still answered from the edge, with the write's value in place of the kept read's.
    const response = await alwaysHot.fetch(path);
    expect(response.headers.get("x-cache")).toBe("HIT");
    expect((await response.json()).value).toBe(5);
    await alwaysHot.fetch(path, { method: "DELETE" });
    const deleted = await alwaysHot.fetch(path);
    expect(deleted.headers.get("x-cache")).toBe("MISS");
    expect((await deleted.json()).exists).toBe(false);
  });

  it("answers If-None-Match with 304 until the value changes", async () => {
    const ns = freshNamespace("etag");
    const path = `/v1/counters/${ns}/k`;
    await service.fetch(`${path}/incr`, { method: "POST" });
    const first = await service.fetch(path);
    const tag = first.headers.get("etag")!;
    const same = await service.fetch(path, {
      headers: { "if-none-match": tag },
    });
    expect(same.status).toBe(304);
    expect(same.headers.get("etag")).toBe(tag);
    await service.fetch(`${path}/incr`, { method: "POST" });
    const changed = await service.fetch(path, {
      headers: { "if-none-match": tag },
    });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(tag);
  });

  it("never serves a cached read older than the max age", async () => {
    const ns = freshNamespace("stale");
    const path = `/v1/counters/${ns}/k`;
    let response = await heat(path);
    const hit = Date.now();
    // Keep reading until the kept read is refetched (a MISS), which is due three quarters of
    // the max age after it was read: every hit until then must be younger than the max age.
    let sawRefetch = false;
    while (!sawRefetch && Date.now() - hit < 10_000) {
      if (response.headers.get("x-cache") === "HIT") {
        expect(Number(response.headers.get("age"))).toBeLessThan(MAX_AGE_S);
      } else {
        sawRefetch = true;
      }
      await sleep(100);
      response = await service.fetch(path);
    }
    expect(sawRefetch).toBe(true);
  });

  it("turns a key cold again once it stops being read", async () => {
    const ns = freshNamespace("cools");
    const path = `/v1/counters/${ns}/k`;
    await heat(path);
    // Two windows of the rate after the last read, nothing of it is left.
    await sleep(2_100);
    const response = await service.fetch(path);
    expect(response.headers.get("cache-control")).toBe("no-cache");
  });
});

describe("a read sent beside a write", () => {
  // One shard, every key hot, kept reads refreshed only after 60 s, and the shard's first
  // group held until two calls have arrived while it waits (EDGECOUNT_DRILL_GROUP_AFTER): a
  // write then waits for the read sent after it, which writes nothing and runs at once, so
  // the read answers the value from before the write and reaches the isolate first.
  let held: Service;
  beforeAll(async () => {
    held = await startService({
      vars: {
        EDGECOUNT_SHARDS: "1",
        EDGECOUNT_HOT_THRESHOLD: "0",
        EDGECOUNT_HOT_MAX_AGE: "60",
        EDGECOUNT_DRILL_GROUP_AFTER: "2",
      },
    });
  });
  afterAll(() => held.stop());

  it("never leaves its older value kept over the write's", async () => {
    const ns = freshNamespace("beside");
    // A first write, of another key: the shard's next group waits for the two calls below.
    const first = await held.fetch(`/v1/counters/${ns}/other/incr`, {
      method: "POST",
    });
    expect(first.status).toBe(200);
    // The key has no kept read yet, so the read goes to the shard too.
    const path = `/v1/counters/${ns}/key`;
    const write = held.fetch(`${path}/incr`, { method: "POST" });
    await new Promise((r) => setTimeout(r, 5));
    const read = await held.fetch(path);
    expect((await read.json()).value).toBe(0);
    expect(exactValue(await (await write).text())).toBe(1n);
    // The isolate keeps the write's value, the later version, over the read answered first.
    const after = await held.fetch(path);
    expect(after.headers.get("x-cache")).toBe("HIT");
    expect((await after.json()).value).toBe(1);
    expect((await edgeStats(held)).calls_under_way).toBe(0);
  });
});
