// A shard's key count for the statistics is a total it keeps as counters are added and
// removed, not a count of its table: asking costs the same however many keys it holds. A
// shard stored by a release that kept no total counts its table once, when it starts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";
import { shardDatabase } from "./shard-database";

const oneShard = { EDGECOUNT_SHARDS: "1" };

async function storedCounters(service: Service): Promise<number> {
  const stats = await (await service.fetch("/v1/stats")).json();
  return stats.shards[0].stored_counters;
}

async function increment(service: Service, ns: string, key: string) {
  const answer = await service.fetch(`/v1/counters/${ns}/${key}/incr`, {
    method: "POST",
  });
  expect(answer.status).toBe(200);
}

/** Runs `alter` on the stopped shard's database file. */
function alterShard(dir: string, alter: (db: DatabaseSync) => void) {
  const db = new DatabaseSync(shardDatabase(dir));
  try {
    alter(db);
  } finally {
    db.close();
  }
}

describe("a shard's kept key total", () => {
  it("follows adds and deletes, and is what the statistics report", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edgecount-totals-"));
    const ns = freshNamespace("totals");
    try {
      const first = await startService({ persistDir: dir, vars: oneShard });
      try {
        for (const key of ["a", "b", "c"]) await increment(first, ns, key);
        // Counting an existing key adds no counter.
        await increment(first, ns, "a");
        expect(await storedCounters(first)).toBe(3);
        const removed = await first.fetch(`/v1/counters/${ns}/b`, {
          method: "DELETE",
        });
        expect(removed.status).toBe(200);
        expect(await storedCounters(first)).toBe(2);
      } finally {
        await first.stop();
      }

      // The figure is the kept total: were the shard counting its table, this would not show.
      alterShard(dir, (db) => db.exec("UPDATE totals SET counters = 1000"));
      const second = await startService({ persistDir: dir, vars: oneShard });
      try {
        expect(await storedCounters(second)).toBe(1000);
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("is counted once for a shard stored before totals were kept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edgecount-totals-old-"));
    const ns = freshNamespace("oldtotals");
    try {
      const first = await startService({ persistDir: dir, vars: oneShard });
      try {
        for (const key of ["a", "b", "c", "d"]) await increment(first, ns, key);
      } finally {
        await first.stop();
      }
      // As an older release left it: no total and nothing keeping one.
      alterShard(dir, (db) =>
        db.exec(
          "DROP TRIGGER counter_added; DROP TRIGGER counter_removed; DROP TABLE totals",
        ),
      );

      const second = await startService({ persistDir: dir, vars: oneShard });
      try {
        expect(await storedCounters(second)).toBe(4);
        await increment(second, ns, "e");
        await second.fetch(`/v1/counters/${ns}/a`, { method: "DELETE" });
        await second.fetch(`/v1/counters/${ns}/b`, { method: "DELETE" });
        expect(await storedCounters(second)).toBe(3);
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
