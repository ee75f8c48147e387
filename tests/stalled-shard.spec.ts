// A shard that takes a call and never answers (EDGECOUNT_DRILL_STALLED_CALLS: the isolate's
// first call is sent, then waited on as if no answer came). A batch must not hang on it: after
// the 15 s a single-key request also waits, its writes are answered `outcome_unknown`, never a
// plain retry's invitation, since the shard did apply them. A one-way flush must not be
// stranded on it either: its flusher gives the call up and sends the flush again, applied once.
import { describe, expect, it } from "vitest";
import { freshNamespace, startService } from "./service";

describe.concurrent("a shard that never answers", () => {
  it("does not hold a batch for good: its write is answered outcome_unknown", async () => {
    const service = await startService({
      vars: { EDGECOUNT_DRILL_STALLED_CALLS: "1" },
    });
    try {
      const ns = freshNamespace("stalled-batch");
      const answer = await service.fetch("/v1/batch", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ops: [{ op: "incr", ns, key: "k" }] }),
      });
      expect(answer.status).toBe(200);
      const { results } = await answer.json();
      expect(results[0].error.code).toBe("outcome_unknown");
      // The shard applied it: "unknown" was the truth, "retry" would have counted it twice.
      expect(await service.value(ns, "k")).toBe(1n);
    } finally {
      await service.stop();
    }
  });

  it("does not hold a batch over many shards either (past 30, futures are joined differently)", async () => {
    const service = await startService({
      vars: { EDGECOUNT_DRILL_STALLED_CALLS: "1", EDGECOUNT_SHARDS: "64" },
    });
    try {
      const ns = freshNamespace("stalled-wide");
      const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
      const answer = await service.fetch("/v1/batch", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          ops: keys.map((key) => ({ op: "incr", ns, key })),
        }),
        signal: AbortSignal.timeout(40_000),
      });
      expect(answer.status).toBe(200);
      const { results } = await answer.json();
      const unknown = results.filter(
        (r: { error?: { code: string } }) =>
          r.error?.code === "outcome_unknown",
      );
      // One shard's call stalled: its ops, and only those, are unknown; the rest answered.
      expect(unknown.length).toBeGreaterThan(0);
      expect(unknown.length).toBeLessThan(keys.length / 10);
      expect(
        results.filter((r: { value?: number }) => r.value === 1).length,
      ).toBe(keys.length - unknown.length);
      for (const key of keys) expect(await service.value(ns, key)).toBe(1n);
    } finally {
      await service.stop();
    }
  });

  it("does not strand a one-way flush: it is sent again and applied once", async () => {
    const service = await startService({
      vars: {
        EDGECOUNT_DRILL_STALLED_CALLS: "1",
        EDGECOUNT_ONE_WAY_INTERVAL_MS: "100",
      },
    });
    try {
      const ns = freshNamespace("stalled-flush");
      for (let i = 0; i < 3; i++) {
        const accepted = await service.fetch(
          `/v1/counters/${ns}/k/incr?async=1`,
          { method: "POST" },
        );
        expect(accepted.status).toBe(202);
      }
      const deadline = Date.now() + 25_000;
      let stats;
      do {
        await new Promise((r) => setTimeout(r, 250));
        stats = (await (await service.fetch("/v1/stats")).json()).edge.one_way;
      } while (stats.pending > 0 && Date.now() < deadline);
      expect(stats.pending).toBe(0);
      expect(stats.flushed).toBe(3);
      expect(stats.retried).toBeGreaterThanOrEqual(1);
      expect(await service.value(ns, "k")).toBe(3n);
    } finally {
      await service.stop();
    }
  });
});
