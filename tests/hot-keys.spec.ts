// Hot keys at the edge: max-age caching, ETags, strong reads, and the staleness bound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const MAX_AGE_S = 2;
let service: Service;
beforeAll(async () => {
  service = await startService({
    vars: {
      EDGECOUNT_HOT_THRESHOLD: "5",
      EDGECOUNT_HOT_MAX_AGE: String(MAX_AGE_S),
    },
  });
});
afterAll(() => service.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Reads a key often enough to make it hot; returns the last response. */
async function heat(path: string, reads = 20): Promise<Response> {
  let last: Response | undefined;
  for (let i = 0; i < reads; i++) last = await service.fetch(path);
  return last!;
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
    const stats = await (await service.fetch("/v1/stats")).json();
    expect(stats.edge.hits).toBeGreaterThan(0);
    const listed = stats.edge.hot_keys.find((h: { ns: string }) => h.ns === ns);
    expect(listed).toMatchObject({ key: "home" });
    expect(
      stats.shards[listed.shard].hot_keys.map((h: { key: string }) => h.key),
    ).toContain("home");
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
    await heat(path);
    await service.fetch(`${path}/incr?by=5`, { method: "POST" });
    const response = await service.fetch(path);
    expect(response.headers.get("x-cache")).toBe("HIT");
    expect((await response.json()).value).toBe(5);
    await service.fetch(path, { method: "DELETE" });
    const deleted = await service.fetch(path);
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
    const filled = Date.now();
    let response = await heat(path);
    expect(response.headers.get("x-cache")).toBe("HIT");
    // Keep reading for longer than the max age: every hit must be younger than it, and the
    // entry must be refetched (a MISS) once it is due.
    let sawRefetch = false;
    while (Date.now() - filled < (MAX_AGE_S + 1) * 1000) {
      response = await service.fetch(path);
      const age = Number(response.headers.get("age"));
      expect(age).toBeLessThan(MAX_AGE_S);
      if (response.headers.get("x-cache") === "MISS") sawRefetch = true;
      await sleep(100);
    }
    expect(sawRefetch).toBe(true);
  });

  it("turns a key cold again once it stops being read", async () => {
    const ns = freshNamespace("cools");
    const path = `/v1/counters/${ns}/k`;
    await heat(path);
    await sleep(2_100);
    const response = await service.fetch(path);
    expect(response.headers.get("cache-control")).toBe("no-cache");
  });
});
