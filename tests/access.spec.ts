// Tokens: open without any, then 401 / 403 by right and namespace; tokens never echoed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const ADMIN = "admin-secret-123";
const WRITER = "writer-secret-456";
const PAGES_WRITER = "pages-only-789";
const READER = "reader-secret-000";
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

let service: Service;
beforeAll(async () => {
  service = await startService({
    vars: {
      EDGECOUNT_ADMIN_TOKENS: ADMIN,
      EDGECOUNT_WRITE_TOKENS: `${WRITER},${PAGES_WRITER}@pages`,
      EDGECOUNT_READ_TOKENS: READER,
    },
  });
});
afterAll(() => service.stop());

describe("access with tokens", () => {
  it("reports token mode in health, which stays public", async () => {
    expect((await (await service.fetch("/v1/health")).json()).auth).toBe(
      "tokens",
    );
  });

  it("refuses writes without a valid token (401) or with a read token (403), changing nothing", async () => {
    const ns = freshNamespace("acl");
    const incr = (headers: Record<string, string> = {}) =>
      service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST", headers });
    const none = await incr();
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    // Refused before the handler ran, the answer still names the key's shard.
    expect(none.headers.get("x-edgecount-shard")).toMatch(/^\d+$/);
    expect((await none.json()).error.code).toBe("unauthorized");
    const wrong = await incr(auth("not-a-real-token"));
    expect(wrong.status).toBe(401);
    const body = await wrong.text();
    expect(body).not.toContain("not-a-real-token");
    const reader = await incr(auth(READER));
    expect(reader.status).toBe(403);
    expect((await reader.json()).error.code).toBe("forbidden");
    expect(await service.value(ns, "k")).toBe(0n);
    expect((await incr(auth(WRITER))).status).toBe(200);
    expect((await incr(auth(ADMIN))).status).toBe(200);
    expect(await service.value(ns, "k")).toBe(2n);
  });

  it("holds a namespace-limited token to its namespaces", async () => {
    const allowed = await service.fetch("/v1/counters/pages/home/incr", {
      method: "POST",
      headers: auth(PAGES_WRITER),
    });
    expect(allowed.status).toBe(200);
    const other = await service.fetch("/v1/counters/likes/home/incr", {
      method: "POST",
      headers: auth(PAGES_WRITER),
    });
    expect(other.status).toBe(403);
  });

  it("keeps reads public and operations data for admins", async () => {
    expect((await service.fetch("/v1/counters/pages/home")).status).toBe(200);
    expect((await service.fetch("/v1/stats")).status).toBe(401);
    expect(
      (await service.fetch("/v1/stats", { headers: auth(WRITER) })).status,
    ).toBe(403);
    expect(
      (await service.fetch("/v1/stats", { headers: auth(ADMIN) })).status,
    ).toBe(200);
    expect(
      (await service.fetch("/metrics", { headers: auth(ADMIN) })).status,
    ).toBe(200);
  });

  it("checks each batch op on its own", async () => {
    const ns = freshNamespace("batchacl");
    const response = await service.fetch("/v1/batch", {
      method: "POST",
      headers: auth(PAGES_WRITER),
      body: JSON.stringify({
        ops: [
          { op: "get", ns, key: "k" },
          { op: "incr", ns, key: "k" },
          { op: "incr", ns: "pages", key: "batch" },
        ],
      }),
    });
    const { results } = await response.json();
    expect(results[0]).toEqual({ value: 0, exists: false });
    expect(results[1].error.code).toBe("forbidden");
    expect(results[2].exists).toBe(true);
    expect(await service.value(ns, "k")).toBe(0n);
  });
});

describe("private reads", () => {
  const privateReads = {
    EDGECOUNT_ADMIN_TOKENS: ADMIN,
    EDGECOUNT_READ_TOKENS: READER,
    EDGECOUNT_WRITE_TOKENS: WRITER,
    EDGECOUNT_PRIVATE_READS: "true",
  };
  let strict: Service;
  // The same, with every key hot from its first read and a kept read refreshed only after
  // 45 s: its hot answers then depend on nothing but the key's history, not on the pace of
  // the reads (a key's rate is measured over the last second).
  let strictHot: Service;
  beforeAll(async () => {
    [strict, strictHot] = await Promise.all([
      startService({ vars: privateReads }),
      startService({
        vars: {
          ...privateReads,
          EDGECOUNT_HOT_THRESHOLD: "0",
          EDGECOUNT_HOT_MAX_AGE: "60",
        },
      }),
    ]);
  });
  afterAll(() => Promise.all([strict.stop(), strictHot.stop()]));

  it("needs a read token for reads when EDGECOUNT_PRIVATE_READS is set", async () => {
    expect((await strict.fetch("/v1/counters/pages/home")).status).toBe(401);
    expect(
      (
        await strict.fetch("/v1/counters/pages/home", {
          headers: auth(READER),
        })
      ).status,
    ).toBe(200);
    expect(
      (await strict.fetch("/v1/cache/pages/x", { headers: auth(READER) }))
        .status,
    ).toBe(404);
  });

  it("needs an admin token for the compatible routes' deployment-wide /stats", async () => {
    expect((await strict.fetch("/stats")).status).toBe(401);
    expect(
      (await strict.fetch("/stats", { headers: auth(READER) })).status,
    ).toBe(403);
    expect(
      (await strict.fetch("/stats", { headers: auth(ADMIN) })).status,
    ).toBe(200);
  });

  it("marks every token-gated read answer private, hot ones included, never public", async () => {
    const ns = freshNamespace("private");
    const read = (
      path: string,
      headers: Record<string, string> = {},
      on = strict,
    ) => on.fetch(path, { headers: { ...auth(READER), ...headers } });
    const expectPrivate = (response: Response, pattern: RegExp) => {
      const header = response.headers.get("cache-control") ?? "";
      expect(header).toMatch(pattern);
      expect(header).not.toContain("public");
      expect(response.headers.get("cache-tag")).toBeNull();
    };

    const cold = await read(`/v1/counters/${ns}/cold`);
    expect(cold.status).toBe(200);
    expectPrivate(cold, /^private, no-cache$/);

    const path = `/v1/counters/${ns}/hot`;
    await strictHot.fetch(`${path}/incr?by=3`, {
      method: "POST",
      headers: auth(WRITER),
    });
    await read(path, {}, strictHot);
    const hot = await read(path, {}, strictHot);
    expect(hot.headers.get("x-cache")).toBe("HIT");
    const maxAge = /^private, max-age=(\d+)$/;
    expectPrivate(hot, maxAge);
    expect(
      Number(maxAge.exec(hot.headers.get("cache-control")!)![1]),
    ).toBeLessThanOrEqual(60);
    const notModified = await read(
      path,
      { "if-none-match": hot.headers.get("etag")! },
      strictHot,
    );
    expect(notModified.status).toBe(304);
    expectPrivate(notModified, maxAge);

    const badge = await read(`/v1/badge/${ns}/hot.svg`, {}, strictHot);
    expect(badge.status).toBe(200);
    expectPrivate(badge, maxAge);
    const coldBadge = await read(`/v1/badge/${ns}/other.svg`);
    expectPrivate(coldBadge, /^private, no-cache$/);

    const put = await strict.fetch(`/v1/cache/${ns}/entry`, {
      method: "PUT",
      headers: { ...auth(WRITER), "content-type": "text/plain" },
      body: "kept",
    });
    expect(put.status).toBe(204);
    const entry = await read(`/v1/cache/${ns}/entry`);
    expect(entry.status).toBe(200);
    expectPrivate(entry, /^private, no-cache$/);
  });
});

describe("a deployment nobody configured", () => {
  it("answers reads only until tokens, public namespaces or open writes are set", async () => {
    const bare = await startService({ vars: { EDGECOUNT_OPEN: "0" } });
    try {
      const ns = freshNamespace("bare");
      expect((await (await bare.fetch("/v1/health")).json()).auth).toBe(
        "reads_only",
      );
      const writes: [string, RequestInit][] = [
        [`/v1/counters/${ns}/a/incr`, { method: "POST" }],
        [`/v1/counters/${ns}/a/incr?mode=one-way`, { method: "POST" }],
        [
          `/v1/counters/${ns}/a`,
          {
            method: "PUT",
            headers: { "content-type": "application/json" },
            body: '{"value":5}',
          },
        ],
        [`/v1/counters/${ns}/a`, { method: "DELETE" }],
        [`/v1/badge/${ns}/a.svg?incr=1`, {}],
        ["/v1/stats", {}],
      ];
      for (const [path, init] of writes) {
        const answer = await bare.fetch(path, init);
        expect([path, answer.status], path).toEqual([path, 403]);
        expect((await answer.json()).error.code, path).toBe("not_open");
      }
      for (const [path, method] of [
        [`/hit/${ns}/aaa`, "GET"],
        [`/create/${ns}/bbb`, "POST"],
      ]) {
        const answer = await bare.fetch(path, { method });
        expect([path, answer.status]).toEqual([path, 403]);
        expect((await answer.json()).error, path).toMatch(/reads only/);
      }
      const read = await bare.fetch(`/v1/counters/${ns}/a`);
      expect(read.status).toBe(200);
      expect((await read.json()).exists).toBe(false);
      expect(await bare.value(ns, "a")).toBe(0n);
    } finally {
      await bare.stop();
    }
  });
});
