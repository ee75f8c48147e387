// Cache entries: bytes and content type kept, 1 MiB limit, LRU eviction under a byte bound
// (names and content types charged, not just values) and an entry bound, content types checked
// as header values, and stored bytes served sandboxed.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cacheEntryCharge,
  freshNamespace,
  startService,
  type Service,
} from "./service";
import { shardDatabase } from "./shard-database";

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
    // The entry is there until its second is up: read within it, that is, on a run where the
    // write and the read took less than the second (tried again, on another key, if not).
    let path = "";
    let read: Response | undefined;
    for (let attempt = 0; attempt < 5; attempt++) {
      path = `/v1/cache/${ns}/t${attempt}`;
      const sent = Date.now();
      await put(service, `${path}?ttl=1`, "soon gone");
      read = await service.fetch(path);
      if (Date.now() - sent < 1_000) break;
    }
    expect(read!.status).toBe(200);
    // Counted from when the write was answered, its second is over.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect((await service.fetch(path)).status).toBe(404);
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

describe("stored values as attack surface", () => {
  const expectSandboxed = (response: Response) => {
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(response.headers.get("content-security-policy")).toBe(
      "sandbox; default-src 'none'",
    );
  };

  it("refuses a PUT whose Content-Type is not a header value, storing nothing", async () => {
    const ns = freshNamespace("ctype");
    // fetch itself refuses control characters in a header; a byte past ASCII and an
    // overlong value get through to the worker.
    for (const type of [
      "text/plain; name=caf\u00e9",
      `text/${"a".repeat(300)}`,
    ]) {
      const refused = await put(service, `/v1/cache/${ns}/k`, "x", type);
      expect(refused.status).toBe(400);
      expect((await refused.json()).error.code).toBe("invalid_content_type");
      expectSandboxed(refused);
    }
    expect((await service.fetch(`/v1/cache/${ns}/k`)).status).toBe(404);
  });

  it("refuses a batch cache_put whose content_type would break headers, storing nothing", async () => {
    const ns = freshNamespace("ctype-batch");
    const types = ["text/html\r\nSet-Cookie: x=1", "text/plain\u0000"];
    const response = await service.fetch("/v1/batch", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ops: types.map((content_type, i) => ({
          op: "cache_put",
          ns,
          key: `k${i}`,
          value: "<b>x</b>",
          content_type,
        })),
      }),
    });
    expect(response.status).toBe(200);
    const { results } = await response.json();
    for (const result of results) {
      expect(result.error.code).toBe("invalid_content_type");
    }
    for (const i of types.keys()) {
      const read = await service.fetch(`/v1/cache/${ns}/k${i}`);
      expect(read.status).toBe(404);
    }
  });

  it("serves every entry answer with nosniff and a sandboxing CSP", async () => {
    const ns = freshNamespace("sandbox");
    const path = `/v1/cache/${ns}/page`;
    const stored = await put(
      service,
      path,
      "<script>alert(document.cookie)</script>",
      "text/html",
    );
    expect(stored.status).toBe(204);
    expectSandboxed(stored);
    const read = await service.fetch(path);
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("text/html");
    expectSandboxed(read);
    expectSandboxed(await service.fetch(`/v1/cache/${ns}/missing`));
    expectSandboxed(await service.fetch(path, { method: "DELETE" }));
  });

  it("never serves an entry that expired while its shard was stopped, and counts it gone once read", async () => {
    // A restarted shard answers a read from the entry's own row, expiry included: make the
    // row expired straight in the stopped shard's SQLite file.
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-expired-"));
    try {
      const ns = freshNamespace("lapsed");
      const vars = { EDGECOUNT_SHARDS: "1" };
      const first = await startService({ persistDir, vars });
      for (const key of ["gone", "kept"]) {
        const path = `/v1/cache/${ns}/${key}?ttl=3600`;
        expect((await put(first, path, key)).status).toBe(204);
      }
      await first.stop();
      const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite");
      const db = new DatabaseSync(shardDatabase(persistDir));
      const changed = Number(
        db
          .prepare(
            "UPDATE cache_entries SET expires_at_ms = 1 WHERE ns = ? AND key = ?",
          )
          .run(ns, "gone").changes,
      );
      db.close();
      expect(changed).toBe(1);

      const second = await startService({ persistDir, vars });
      try {
        const entries = async () =>
          (await (await second.fetch("/v1/stats")).json()).shards.reduce(
            (sum: number, shard: { cache_entries: number }) =>
              sum + shard.cache_entries,
            0,
          );
        expect(await entries()).toBe(2);
        expect((await second.fetch(`/v1/cache/${ns}/gone`)).status).toBe(404);
        expect(await (await second.fetch(`/v1/cache/${ns}/kept`)).text()).toBe(
          "kept",
        );
        // The lapsed row went with the read, and the count with it.
        expect(await entries()).toBe(1);
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });

  it("serves an entry stored with a broken content type as opaque bytes, not a 500", async () => {
    // Such entries could be stored before content types were checked: write one straight
    // into the shard's SQLite file while the runtime is stopped.
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-ctype-"));
    try {
      const ns = freshNamespace("legacy");
      const first = await startService({ persistDir });
      expect(
        (await put(first, `/v1/cache/${ns}/old`, "<b>hi</b>")).status,
      ).toBe(204);
      await first.stop();
      const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite");
      let changed = 0;
      const files = readdirSync(persistDir, {
        recursive: true,
        encoding: "utf8",
      });
      for (const file of files.filter((f) => f.endsWith(".sqlite"))) {
        const db = new DatabaseSync(join(persistDir, file));
        const tables = db
          .prepare(
            "SELECT name FROM sqlite_master WHERE name = 'cache_entries'",
          )
          .all();
        if (tables.length > 0) {
          changed += Number(
            db
              .prepare(
                "UPDATE cache_entries SET content_type = ? WHERE ns = ? AND key = ?",
              )
              .run("text/html\r\nSet-Cookie: x=1", ns, "old").changes,
          );
        }
        db.close();
      }
      expect(changed).toBe(1);

      const second = await startService({ persistDir });
      try {
        const read = await second.fetch(`/v1/cache/${ns}/old`);
        expect(read.status).toBe(200);
        expect(read.headers.get("content-type")).toBe(
          "application/octet-stream",
        );
        expect(read.headers.get("set-cookie")).toBeNull();
        expect(await read.text()).toBe("<b>hi</b>");
        expectSandboxed(read);
        const batch = await second.fetch("/v1/batch", {
          method: "POST",
          body: JSON.stringify({ ops: [{ op: "cache_get", ns, key: "old" }] }),
        });
        expect((await batch.json()).results[0]).toEqual({
          value: "<b>hi</b>",
          content_type: "application/octet-stream",
        });
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });
});
