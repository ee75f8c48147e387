// The alarm's work follows what lapses, not what is stored. A shard is given, in its stopped
// database, 300,000 lapsed idempotency records in the earlier generation, 100,000 counters with
// a TTL a year away, 500 whose first expiry passed but whose expiry slid on, and 1,000 that
// expired. One alarm later the records and the expired counters are gone, the slid ones are
// due again at their expiry, and the shard's own count of rows read is a small fraction of
// the 400,000 rows it holds: the records go a generation at a time, and the counters are found
// by the index on when they are due.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";
import { shardDatabase } from "./shard-database";

const oneShard = { EDGECOUNT_SHARDS: "1" };
const hour = 60 * 60 * 1000;
const lapsedRecords = 300_000;
const liveCounters = 100_000;
const slidCounters = 500;
const expiredCounters = 1_000;

const stats = async (service: Service) =>
  (await (await service.fetch("/v1/stats")).json()).shards[0];

function storeLapsedRows(dir: string, ns: string, now: number) {
  const db = new DatabaseSync(shardDatabase(dir));
  try {
    db.exec("BEGIN");
    const record = db.prepare(
      `INSERT INTO idempotency_records_earlier
       (ns, key, kind, idempotency_key, request_digest, result, created_at_ms)
       VALUES (?, ?, 'counter', ?, '0', '{}', ?)`,
    );
    for (let i = 0; i < lapsedRecords; i++) {
      record.run(ns, `r${i % 1000}`, `key-${i}`, now - 30 * hour);
    }
    const counter = db.prepare(
      `INSERT INTO counters (ns, key, value, version, ttl_seconds, expires_at_ms,
       created_ms, settings, reclaim_after_ms) VALUES (?, ?, 1, 1, ?, ?, ?, NULL, ?)`,
    );
    const year = 365 * 24 * hour;
    for (let i = 0; i < liveCounters; i++) {
      counter.run(ns, `live-${i}`, year / 1000, now + year, now, now + year);
    }
    for (let i = 0; i < slidCounters; i++) {
      counter.run(ns, `slid-${i}`, 7_200, now + hour, now, now - hour);
    }
    for (let i = 0; i < expiredCounters; i++) {
      counter.run(ns, `expired-${i}`, 3_600, now - hour, now, now - hour);
    }
    // The current generation of records began a day and an hour ago: the earlier one is due.
    db.prepare("UPDATE records_generation SET since_ms = ?").run(
      now - 25 * hour,
    );
    db.exec("COMMIT");
  } finally {
    db.close();
  }
}

it("reclaims 300,000 lapsed records and 1,000 expired counters without reading the tables", async () => {
  const dir = mkdtempSync(join(tmpdir(), "edgecount-reclaim-"));
  const ns = freshNamespace("reclaim");
  const now = Date.now();
  try {
    const first = await startService({ persistDir: dir, vars: oneShard });
    try {
      const keyed = await first.fetch(`/v1/counters/${ns}/k/incr`, {
        method: "POST",
        headers: { "idempotency-key": "kept-record" },
      });
      expect(keyed.status).toBe(200);
    } finally {
      await first.stop();
    }
    storeLapsedRows(dir, ns, now);

    const second = await startService({ persistDir: dir, vars: oneShard });
    try {
      const before = await stats(second);
      // A counter with a TTL of a second brings the alarm a second on.
      const short = await second.fetch(`/v1/counters/${ns}/short/incr?ttl=1`, {
        method: "POST",
      });
      expect(short.status).toBe(200);
      let after = await stats(second);
      const wanted = before.reclaimed + expiredCounters;
      for (let i = 0; i < 300 && after.reclaimed < wanted; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after = await stats(second);
      }
      expect(after.reclaimed).toBeGreaterThanOrEqual(wanted);
      const read = after.rows_read - before.rows_read;
      // The rows due (1,500 counters and the short one), each found by the index and then by
      // its key, and the requests' own; the tables hold 401,500 rows more.
      expect(read).toBeLessThan(20_000);
      expect(after.stored_counters).toBe(
        before.stored_counters -
          expiredCounters +
          1 -
          (after.reclaimed - wanted),
      );
      // The key written with an Idempotency-Key before still replays.
      const replay = await second.fetch(`/v1/counters/${ns}/k/incr`, {
        method: "POST",
        headers: { "idempotency-key": "kept-record" },
      });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
    } finally {
      await second.stop();
    }

    const db = new DatabaseSync(shardDatabase(dir), { readOnly: true });
    try {
      const count = (query: string, ...args: (string | number)[]) =>
        Number((db.prepare(query).get(...args) as { n: number | bigint }).n);
      const records =
        "SELECT COUNT(*) AS n FROM (SELECT * FROM idempotency_records UNION ALL SELECT * FROM idempotency_records_earlier)";
      expect(count(records)).toBe(1);
      expect(
        count("SELECT COUNT(*) AS n FROM counters WHERE key LIKE 'expired-%'"),
      ).toBe(0);
      expect(
        count("SELECT COUNT(*) AS n FROM counters WHERE key LIKE 'live-%'"),
      ).toBe(liveCounters);
      // The slid counters are kept, due again when they now expire.
      expect(
        count(
          "SELECT COUNT(*) AS n FROM counters WHERE key LIKE 'slid-%' AND reclaim_after_ms = expires_at_ms",
        ),
      ).toBe(slidCounters);
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

it("brings a shard of the release before up to date, and reclaims what it stored", async () => {
  const dir = mkdtempSync(join(tmpdir(), "edgecount-reclaim-upgrade-"));
  const ns = freshNamespace("upgrade");
  const now = Date.now();
  const counter = (db: DatabaseSync, key: string, expiresAt: number) =>
    db
      .prepare(
        `INSERT INTO counters (ns, key, value, version, ttl_seconds, expires_at_ms)
         VALUES (?, ?, 1, 1, 3600, ?)`,
      )
      .run(ns, key, expiresAt);
  try {
    const first = await startService({ persistDir: dir, vars: oneShard });
    try {
      expect(await first.value(ns, "live")).toBe(0n);
    } finally {
      await first.stop();
    }
    // As the release before this one left a shard: no due time, index or triggers for
    // counters, one records table.
    const db = new DatabaseSync(shardDatabase(dir));
    db.exec(`DROP TRIGGER counter_reclaim_earlier;
      DROP TRIGGER counter_reclaim_on_insert;
      DROP INDEX counters_by_reclaim;
      ALTER TABLE counters DROP COLUMN reclaim_after_ms;
      DROP TABLE records_generation;
      DROP TABLE idempotency_records_earlier;`);
    counter(db, "expired", now - hour);
    counter(db, "live", now + hour);
    db.prepare(
      `INSERT INTO idempotency_records
       (ns, key, kind, idempotency_key, request_digest, result, created_at_ms)
       SELECT ?, 'expired', 'counter', 'old', '0', '{}', ?`,
    ).run(ns, now - hour);
    db.close();

    const reclaimed = async (service: Service, wanted: number) => {
      const short = await service.fetch(`/v1/counters/${ns}/short/incr?ttl=1`, {
        method: "POST",
      });
      expect(short.status).toBe(200);
      let after = await stats(service);
      for (let i = 0; i < 150 && after.reclaimed < wanted; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after = await stats(service);
      }
      return after.reclaimed;
    };
    const second = await startService({ persistDir: dir, vars: oneShard });
    try {
      // The expired counter and the short one.
      expect(await reclaimed(second, 2)).toBe(2);
      expect(await second.value(ns, "live")).toBe(1n);
    } finally {
      await second.stop();
    }

    // Rolled back and forward again: a row the release before inserted, without a due time.
    const rolledBack = new DatabaseSync(shardDatabase(dir));
    counter(rolledBack, "inserted-by-the-release-before", now - hour);
    rolledBack.close();
    const third = await startService({ persistDir: dir, vars: oneShard });
    try {
      expect(await reclaimed(third, 2)).toBe(2);
    } finally {
      await third.stop();
    }

    const after = new DatabaseSync(shardDatabase(dir), { readOnly: true });
    try {
      const keys = after
        .prepare(
          "SELECT key, reclaim_after_ms = expires_at_ms AS due FROM counters WHERE ns = ? ORDER BY key",
        )
        .all(ns);
      expect(keys).toEqual([{ key: "live", due: 1 }]);
      const records = after
        .prepare(
          "SELECT COUNT(*) AS n FROM (SELECT * FROM idempotency_records UNION ALL SELECT * FROM idempotency_records_earlier)",
        )
        .get() as { n: number };
      // The record is kept through its window.
      expect(Number(records.n)).toBe(1);
    } finally {
      after.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
