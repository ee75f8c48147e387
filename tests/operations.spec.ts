// Health, stats, metrics and CORS.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freshNamespace,
  shardOfNewCounter,
  startService,
  type Service,
} from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

describe("operations", () => {
  it("reports health, shard count and open access", async () => {
    const response = await service.fetch("/v1/health");
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body).toMatchObject({ status: "ok", shards: 16, auth: "open" });
    expect(body.version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("counts ops and keys per shard in /v1/stats", async () => {
    const before = await (await service.fetch("/v1/stats")).json();
    const ns = freshNamespace("stats");
    for (const key of ["a", "b", "c"]) {
      await service.fetch(`/v1/counters/${ns}/${key}/incr`, { method: "POST" });
    }
    // A strong read: its shard counts it whether or not the key is hot at the edge.
    await service.fetch(`/v1/counters/${ns}/a?consistency=strong`);
    const after = await (await service.fetch("/v1/stats")).json();
    expect(after.shards).toHaveLength(16);
    expect(after.totals.keys - before.totals.keys).toBe(3);
    expect(after.totals.ops - before.totals.ops).toBe(4);
    const shard = Number(
      (await service.fetch(`/v1/counters/${ns}/a`)).headers.get(
        "x-edgecount-shard",
      ),
    );
    expect(after.shards[shard].keys).toBeGreaterThanOrEqual(1);
  });

  it("counts the SQLite rows each shard reads and writes, and not those of its own statistics", async () => {
    const ns = freshNamespace("rows");
    const { shardStats } = await shardOfNewCounter(service, ns, "a");
    const before = await shardStats();
    // Asking counts every stored row, and must not show up in the counts it reports.
    const again = await shardStats();
    expect(again.rows_read).toBe(before.rows_read);
    expect(again.rows_written).toBe(before.rows_written);
    for (let i = 0; i < 5; i++) {
      await service.fetch(`/v1/counters/${ns}/a/incr`, { method: "POST" });
    }
    const after = await shardStats();
    // The counter is in memory after the first increment: one row written per increment, and
    // no read of it but the upsert's own of the old row (SQLite's, with the key total's
    // triggers on the table; billed at a thousandth of a row written).
    expect(after.rows_written - before.rows_written).toBe(5);
    expect(after.rows_read - before.rows_read).toBeLessThanOrEqual(5);
    expect(after.counters_in_memory).toBeGreaterThanOrEqual(1);
    const { totals } = await (await service.fetch("/v1/stats")).json();
    expect(totals.rows_written_per_op).toBeCloseTo(
      totals.rows_written / totals.ops,
      6,
    );
  });

  it("keeps at most 10,000 of a shard's counters in memory, however many it stores", async () => {
    // The bound is what an evicted shard frees on the next request's time, and what the
    // shards of one isolate share of its 128 MB (see docs/performance.md).
    const oneShard = await startService({ vars: { EDGECOUNT_SHARDS: "1" } });
    try {
      const ns = freshNamespace("memory");
      for (let start = 0; start < 12_000; start += 1_000) {
        const ops = Array.from({ length: 1_000 }, (_, i) => ({
          op: "set",
          ns,
          key: `k${start + i}`,
          value: start + i,
        }));
        const answer = await oneShard.fetch("/v1/batch", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ops }),
        });
        expect(answer.status).toBe(200);
      }
      const { shards } = await (await oneShard.fetch("/v1/stats")).json();
      expect(shards[0].keys).toBe(12_000);
      expect(shards[0].counters_in_memory).toBe(10_000);
      // What memory let go of is still stored: the first key written reads back.
      const first = await oneShard.fetch(
        `/v1/counters/${ns}/k0?consistency=strong`,
      );
      expect(await first.json()).toMatchObject({ value: 0, exists: true });
    } finally {
      await oneShard.stop();
    }
  });

  it("asks the shards once for 1,000 concurrent /v1/stats and /stats, and reuses the answer", async () => {
    const reused = await startService({
      vars: { EDGECOUNT_STATS_MAX_AGE_MS: "60000" },
    });
    try {
      const paths = Array.from({ length: 1_000 }, (_, i) =>
        i % 2 ? "/v1/stats" : "/stats",
      );
      const answers = await Promise.all(
        paths.map((path) => reused.fetch(path)),
      );
      expect(answers.every((answer) => answer.status === 200)).toBe(true);
      const last = await (await reused.fetch("/v1/stats")).json();
      expect(last.edge.shard_stats_asks).toBe(1);
    } finally {
      await reused.stop();
    }
  });

  it("exposes Prometheus metrics", async () => {
    const response = await service.fetch("/metrics");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/plain");
    const text = await response.text();
    expect(text).toContain("# TYPE edgecount_shard_ops_total counter");
    expect(text).toContain("# TYPE edgecount_shard_cache_bytes gauge");
    expect(text).toMatch(/edgecount_shard_keys\{shard="15"\} \d+/);
    expect(text).toMatch(/edgecount_shard_evictions_total\{shard="0"\} \d+/);
    expect(text).toContain("# TYPE edgecount_shard_rows_written_total counter");
    expect(text).toMatch(/edgecount_shard_rows_read_total\{shard="3"\} \d+/);
    // The text format allows one HELP and one TYPE per metric: a name used twice would make
    // strict scrapers refuse the whole answer.
    const types = text
      .split("\n")
      .filter((line) => line.startsWith("# TYPE "))
      .map((line) => line.split(" ")[2]);
    expect(types.length).toBeGreaterThan(20);
    expect(new Set(types).size).toBe(types.length);
    for (const gauge of ["pending_keys", "pending_bytes", "interval_ms"]) {
      expect(text).toMatch(
        new RegExp(`^edgecount_one_way_${gauge} \\d+$`, "m"),
      );
    }
  });

  it("answers CORS preflights and marks responses for any origin", async () => {
    const preflight = await service.fetch("/v1/counters/ns/k/incr", {
      method: "OPTIONS",
      headers: {
        origin: "https://site.example",
        "access-control-request-method": "POST",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    expect(preflight.headers.get("access-control-allow-methods")).toBe(
      "POST, OPTIONS",
    );
    expect(preflight.headers.get("access-control-allow-headers")).toContain(
      "Content-Type",
    );
    const read = await service.fetch("/v1/counters/ns/k", {
      headers: { origin: "https://x.example" },
    });
    expect(read.headers.get("access-control-allow-origin")).toBe("*");
    expect(read.headers.get("access-control-expose-headers")).toContain(
      "X-Edgecount-Shard",
    );
    // A request that names no origin is no browser's cross-origin request: the list is left
    // out, the permission stays.
    const plain = await service.fetch("/v1/counters/ns/k");
    expect(plain.headers.get("access-control-allow-origin")).toBe("*");
    expect(plain.headers.get("access-control-expose-headers")).toBeNull();
  });

  it("allows only the configured origins when a list is set", async () => {
    const strict = await startService({
      vars: { EDGECOUNT_CORS_ORIGINS: "https://good.example" },
    });
    try {
      const good = await strict.fetch("/v1/health", {
        headers: { origin: "https://good.example" },
      });
      expect(good.headers.get("access-control-allow-origin")).toBe(
        "https://good.example",
      );
      expect(good.headers.get("vary")).toContain("Origin");
      // A header set by the handler and one added for CORS go out as one.
      const read = await strict.fetch("/v1/counters/ns/k", {
        headers: { origin: "https://good.example" },
      });
      expect(read.headers.get("vary")).toBe("Accept, Origin");
      const bad = await strict.fetch("/v1/health", {
        headers: { origin: "https://evil.example" },
      });
      expect(bad.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await strict.stop();
    }
  });

  it("refuses a misconfigured shard count instead of misplacing keys", async () => {
    const broken = await startService({ vars: { EDGECOUNT_SHARDS: "zero" } });
    try {
      const response = await broken.fetch("/v1/counters/ns/k");
      expect(response.status).toBe(500);
      expect((await response.json()).error.code).toBe("misconfigured");
    } finally {
      await broken.stop();
    }
  });
});
