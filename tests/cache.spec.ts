// Cache entries: bytes and content type kept, 1 MiB limit, LRU eviction under a byte bound
// (names and content types charged, not just values) and an entry bound.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cacheEntryCharge,
  freshNamespace,
  startService,
  type Service,
} from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

const put = (s: Service, path: string, body: BodyInit, type = "text/plain") =>
  s.fetch(path, { method: "PUT", headers: { "content-type": type }, body });

describe("cache entries", () => {
  it("stores bytes with their content type and deletes them", async () => {
    const ns = freshNamespace("cache");
    const path = `/v1/cache/${ns}/logo%2Fsmall`;
    const bytes = new Uint8Array([0, 1, 2, 255, 254, 10, 13]);
    const stored = await put(service, path, bytes, "image/x-test");
    expect(stored.status).toBe(204);
    expect(Number(stored.headers.get("x-edgecount-shard"))).toBeLessThan(16);
    const read = await service.fetch(path);
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("image/x-test");
    expect(new Uint8Array(await read.arrayBuffer())).toEqual(bytes);
    expect(
      await (await service.fetch(path, { method: "DELETE" })).json(),
    ).toEqual({ deleted: true });
    expect(
      await (await service.fetch(path, { method: "DELETE" })).json(),
    ).toEqual({ deleted: false });
    const gone = await service.fetch(path);
    expect(gone.status).toBe(404);
    expect((await gone.json()).error.code).toBe("not_found");
  });

  it("keeps an empty value and defaults the content type", async () => {
    const ns = freshNamespace("empty");
    await service.fetch(`/v1/cache/${ns}/e`, {
      method: "PUT",
      body: new Uint8Array([]),
    });
    const read = await service.fetch(`/v1/cache/${ns}/e`);
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("application/octet-stream");
    expect((await read.arrayBuffer()).byteLength).toBe(0);
  });

  it("accepts 1 MiB and refuses one byte more, changing nothing", async () => {
    const ns = freshNamespace("limit");
    const path = `/v1/cache/${ns}/big`;
    const mib = new Uint8Array(1024 * 1024).fill(7);
    expect(
      (await put(service, path, mib, "application/octet-stream")).status,
    ).toBe(204);
    const over = await put(
      service,
      path,
      new Uint8Array(1024 * 1024 + 1),
      "application/octet-stream",
    );
    expect(over.status).toBe(413);
    expect((await over.json()).error.code).toBe("payload_too_large");
    const read = await service.fetch(path);
    expect((await read.arrayBuffer()).byteLength).toBe(1024 * 1024);
  });

  it("expires an entry after its TTL", async () => {
    const ns = freshNamespace("ttl");
    await put(service, `/v1/cache/${ns}/t?ttl=1`, "soon gone");
    expect((await service.fetch(`/v1/cache/${ns}/t`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect((await service.fetch(`/v1/cache/${ns}/t`)).status).toBe(404);
  });

  it("refuses bad names and TTLs with 400", async () => {
    expect((await put(service, "/v1/cache/bad%20ns/k", "x")).status).toBe(400);
    expect((await put(service, "/v1/cache/ns/%FF", "x")).status).toBe(400);
    const ttl = await put(service, "/v1/cache/ns/k?ttl=0", "x");
    expect((await ttl.json()).error.code).toBe("invalid_ttl");
    const post = await service.fetch("/v1/cache/ns/k", { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, PUT, DELETE, OPTIONS");
  });
});

describe("LRU eviction", () => {
  const ns = freshNamespace("lru");
  const charge = cacheEntryCharge(ns, "a", "text/plain", 100);

  it("evicts the least recently used entries past the shard's byte bound", async () => {
    const small = await startService({
      vars: {
        EDGECOUNT_SHARDS: "1",
        EDGECOUNT_SHARD_CACHE_BYTES: String(3 * charge),
      },
    });
    try {
      const value = "x".repeat(100);
      for (const key of ["a", "b", "c"]) {
        expect((await put(small, `/v1/cache/${ns}/${key}`, value)).status).toBe(
          204,
        );
      }
      expect((await small.fetch(`/v1/cache/${ns}/a`)).status).toBe(200); // b is now oldest
      await put(small, `/v1/cache/${ns}/d`, value);
      expect((await small.fetch(`/v1/cache/${ns}/b`)).status).toBe(404);
      for (const key of ["a", "c", "d"]) {
        expect((await small.fetch(`/v1/cache/${ns}/${key}`)).status, key).toBe(
          200,
        );
      }
      const stats = await (await small.fetch("/v1/stats")).json();
      expect(stats.shards[0]).toMatchObject({
        cache_entries: 3,
        cache_bytes: 3 * charge,
        evictions: 1,
      });
      // An entry charged one byte more than the whole bound is refused.
      const tooBig = await put(
        small,
        `/v1/cache/${ns}/e`,
        "y".repeat(3 * charge - cacheEntryCharge(ns, "e", "text/plain", 0) + 1),
      );
      expect(tooBig.status).toBe(413);
      expect((await small.fetch(`/v1/cache/${ns}/e`)).status).toBe(404);
    } finally {
      await small.stop();
    }
  });

  it("keeps empty values with long keys and content types within both bounds", async () => {
    const small = await startService({
      vars: {
        EDGECOUNT_SHARDS: "1",
        EDGECOUNT_SHARD_CACHE_BYTES: "20000",
        EDGECOUNT_SHARD_CACHE_ENTRIES: "40",
      },
    });
    // Under 256 bytes, a content type any version accepts; the key is the longest allowed.
    const type = `application/${"x".repeat(200)}`;
    const keyOf = (i: number) => `${i}`.padStart(256, "k");
    const each = cacheEntryCharge(ns, keyOf(0), type, 0);
    try {
      const stats = async () =>
        (await (await small.fetch("/v1/stats")).json()).shards[0];
      for (let i = 0; i < 100; i++) {
        const path = `/v1/cache/${ns}/${keyOf(i)}`;
        expect((await put(small, path, "", type)).status).toBe(204);
      }
      // Each entry is charged about 680 bytes though its value is empty, so 20,000 bytes
      // hold fewer than 40 of them: the byte bound binds first.
      const fits = Math.floor(20_000 / each);
      expect(fits).toBeLessThan(40);
      expect(await stats()).toMatchObject({
        cache_entries: fits,
        cache_bytes: fits * each,
        evictions: 100 - fits,
      });
      expect((await small.fetch(`/v1/cache/${ns}/${keyOf(99)}`)).status).toBe(
        200,
      );
      expect((await small.fetch(`/v1/cache/${ns}/${keyOf(0)}`)).status).toBe(
        404,
      );

      // Tiny entries: now the entry bound binds, exactly at 40.
      for (let i = 0; i < 60; i++) {
        expect((await put(small, `/v1/cache/${ns}/t${i}`, "")).status).toBe(
          204,
        );
      }
      const after = await stats();
      expect(after.cache_entries).toBe(40);
      expect(after.cache_bytes).toBe(
        40 * cacheEntryCharge(ns, "t10", "text/plain", 0),
      );
    } finally {
      await small.stop();
    }
  });
});
