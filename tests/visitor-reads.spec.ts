// Reads of visitors over many days: the shard keeps the union of a period's days before its
// last, so that the same read again reads one kept union and one sketch whatever the period's
// length; a sketch of one of those days that changes or goes (an import, a delete) drops it,
// and a key keeps at most four (docs/days.md, core/src/shard/visit_union.rs).
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";
import { clearOfMidnight } from "./days";
import { shardDatabase } from "./shard-database";

const DAY_MS = 86_400_000;

/** Today in UTC, counted in days from 1970-01-01 as lines of an export count them. */
const today = () => Math.floor(Date.now() / DAY_MS);
const date = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);

/** The stored form of an exact sketch of `ids`: each a little-endian u64, ascending. */
function exactSketch(ids: bigint[]): string {
  const sorted = [...new Set(ids)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const bytes = Buffer.alloc(8 * sorted.length);
  sorted.forEach((id, i) => bytes.writeBigUInt64LE(id, 8 * i));
  return bytes.toString("base64");
}

/** Imports `ns/key` counted today, with the sketches of `sketches` (day and its visitors'
 * ids): each replaces what the key held of its day. */
async function importVisitors(
  on: Service,
  ns: string,
  key: string,
  sketches: [number, bigint[]][],
) {
  const line = JSON.stringify({
    ns,
    key,
    counter: { value: 1, version: 1, today: { day: today(), count: 1 } },
    sketches: sketches.map(([day, ids]) => ({ day, sketch: exactSketch(ids) })),
  });
  const answer = await on.fetch("/v1/import", {
    method: "POST",
    body: `${line}\n`,
  });
  expect(await answer.text()).toContain('"ok":true');
}

/** One visitor on each of the `n` days up to today: day t's id is t. */
const oneADay = (n: number): [number, bigint[]][] =>
  Array.from({ length: n }, (_, i) => {
    const day = today() - n + 1 + i;
    return [day, [BigInt(day)]];
  });

async function visitors(on: Service, path: string) {
  const answer = await on.fetch(path);
  expect(answer.status).toBe(200);
  return answer.json();
}

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await service.stop();
});
beforeEach(() => clearOfMidnight(["UTC"]));

/** The shards' rows read so far. */
async function rowsRead(): Promise<number> {
  return (await (await service.fetch("/v1/stats")).json()).totals.rows_read;
}

/** The answer to `path`, and the rows the shards read for it: what the figures say before and
 * after, less what asking for them reads itself. */
async function visitorsRead(path: string) {
  const asked = await rowsRead();
  const ask = (await rowsRead()) - asked;
  const before = await rowsRead();
  const body = await visitors(service, path);
  return { body, rows: (await rowsRead()) - before - ask };
}

describe("reads of visitors over many days", () => {
  it("read the same period again from one kept union and today's sketch", async () => {
    const ns = freshNamespace("kept");
    await importVisitors(service, ns, "k", oneADay(60));
    const path = `/v1/counters/${ns}/k/days?period=60d&unique=1`;
    const { body: first, rows: merged } = await visitorsRead(path);
    const { body: again, rows: kept } = await visitorsRead(path);
    expect(first.uniques).toBe(60);
    expect(first.days.every((d: { uniques: number }) => d.uniques === 1)).toBe(
      true,
    );
    expect(again).toEqual(first);
    // The first merges the 60 days' sketches; the second reads the counter's row, the kept
    // union of the 59 days before today and today's sketch, whatever the period's length
    // (the key has no finished days' counts to read: none were imported).
    expect(merged).toBeGreaterThanOrEqual(60);
    expect(kept).toBeLessThanOrEqual(3);
  });

  it("see a day's sketch replaced by an import, and nothing kept of a deleted counter", async () => {
    const ns = freshNamespace("dropped");
    await importVisitors(service, ns, "k", oneADay(10));
    const path = `/v1/counters/${ns}/k/days?period=10d&unique=1`;
    expect((await visitors(service, path)).uniques).toBe(10);
    // Day t-5 now had three visitors: the union of the days before today holds it.
    const t = today();
    await importVisitors(service, ns, "k", [[t - 5, [1n, 2n, 3n]]]);
    const replaced = await visitors(service, path);
    expect(replaced.uniques).toBe(12);
    expect(
      replaced.days.find((d: { date: string }) => d.date === date(t - 5))
        .uniques,
    ).toBe(3);
    const deleted = await service.fetch(`/v1/counters/${ns}/k`, {
      method: "DELETE",
    });
    expect(deleted.status).toBe(200);
    const gone = await visitors(service, path);
    expect([gone.exists, gone.uniques]).toEqual([false, 0]);
  });
});

describe("what a shard keeps of reads of visitors", () => {
  it("keeps at most four unions a key, those ending latest, and none of a deleted key", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-unions-"));
    const ns = freshNamespace("bound");
    try {
      const one = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "1" },
      });
      const t = today();
      try {
        await importVisitors(one, ns, "k", oneADay(10));
        await importVisitors(one, ns, "gone", oneADay(10));
        // Each keeps the days before its last: t-9..t-5 first, then four ranges ending
        // on t-1, then t-9..t-2, which ends before them all.
        const ranges = [
          [t - 9, t - 4],
          [t - 3, t],
          [t - 5, t],
          [t - 7, t],
          [t - 9, t],
          [t - 9, t - 1],
        ];
        for (const [from, to] of ranges) {
          const body = await visitors(
            one,
            `/v1/counters/${ns}/k/days?from=${date(from)}&to=${date(to)}&unique=1`,
          );
          expect(body.uniques).toBe(to - from + 1);
        }
        await visitors(one, `/v1/counters/${ns}/gone/days?period=10d&unique=1`);
        await one.fetch(`/v1/counters/${ns}/gone`, { method: "DELETE" });
      } finally {
        await one.stop();
      }
      const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite");
      const db = new DatabaseSync(shardDatabase(persistDir));
      const kept = db
        .prepare(
          "SELECT key, from_day, to_day FROM visitor_unions WHERE ns = ? ORDER BY key, to_day, from_day",
        )
        .all(ns)
        .map((r: { key: string; from_day: number; to_day: number }) => [
          r.key,
          t - r.from_day,
          t - r.to_day,
        ]);
      db.close();
      // Days back from today.
      expect(kept).toEqual([
        ["k", 9, 1],
        ["k", 7, 1],
        ["k", 5, 1],
        ["k", 3, 1],
      ]);
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });
});

describe("the rate of reads of visitors", () => {
  /** What a request from `address` answers: its status and `RateLimit-*` figures. */
  const charged = async (on: Service, path: string, address: string) => {
    const answer = await on.fetch(path, {
      headers: { "cf-connecting-ip": address },
    });
    await answer.arrayBuffer();
    const header = (name: string) => answer.headers.get(`ratelimit-${name}`);
    return [answer.status, header("limit"), header("remaining")];
  };

  it("charges one request for each 40 days read, in a bucket apart, under a configured limit", async () => {
    // A request a second, twenty saved up; reads of visitors ten times that saved up apart.
    const limited = await startService({
      vars: { EDGECOUNT_RATE_LIMIT: "1", EDGECOUNT_RATE_BURST: "20" },
    });
    const ns = freshNamespace("charged");
    try {
      await importVisitors(limited, ns, "k", oneADay(3));
      const days = (query: string) => `/v1/counters/${ns}/k/days?${query}`;
      // Each from an address of its own, whose buckets are full. Reads of over 40 days'
      // visitors answer their own bucket's figures; the rest the request's.
      const reads = [
        ["period=400d&unique=1", "200", "190"],
        ["period=total&unique=1", "200", "190"],
        ["period=41d&unique=1", "200", "198"],
        ["period=30d&unique=1", "20", "19"],
        ["period=400d", "20", "19"],
      ];
      for (const [i, [query, limit, remaining]] of reads.entries())
        expect(await charged(limited, days(query), `192.0.2.${i}`)).toEqual([
          200,
          limit,
          remaining,
        ]);
      const badge = `/v1/badge/${ns}/k.svg?period=total&unique=1`;
      expect(await charged(limited, badge, "198.51.100.1")).toEqual([
        200,
        "200",
        "190",
      ]);
      // A badge that counts pays for the visitors it reads too (past the bucket it still
      // counts its view: see below).
      expect(await charged(limited, `${badge}&incr=1`, "198.51.100.3")).toEqual(
        [200, "200", "190"],
      );
      // A bad period pays one, and is refused by its handler.
      expect(
        await charged(limited, days("period=401d&unique=1"), "198.51.100.2"),
      ).toEqual([400, "20", "19"]);
    } finally {
      await limited.stop();
    }
  });

  it("refuses reads of many days' visitors past their bucket, and never a count beside them", async () => {
    const ns = freshNamespace("refused");
    await importVisitors(service, ns, "k", oneADay(3));
    const from = { headers: { "cf-connecting-ip": "203.0.113.9" } };
    const total = `/v1/counters/${ns}/k/days?period=total&unique=1`;
    // Nothing configured: ten reads of the 400 days saved up, one refilled a second. Reads
    // sent back to back run into the bound; ten pass first, whatever the machine's pace.
    const statuses: number[] = [];
    while (statuses.length < 100 && !statuses.includes(429)) {
      const answer = await service.fetch(total, from);
      await answer.arrayBuffer();
      statuses.push(answer.status);
    }
    expect(statuses.indexOf(429)).toBeGreaterThanOrEqual(10);
    // The same client's counts, and its counting badge of the same visitors, are not refused.
    const counted = await service.fetch(`/v1/counters/${ns}/k/incr`, {
      method: "POST",
      ...from,
    });
    expect(counted.status).toBe(200);
    // The badge counts its view, and says it did not read the visitors past the bucket.
    const badge = await service.fetch(
      `/v1/badge/${ns}/k.svg?period=total&unique=1&incr=1`,
      from,
    );
    expect(badge.status).toBe(200);
    expect(await badge.text()).toContain("<title>views: rate limited</title>");
    expect(await service.value(ns, "k")).toBe(
      BigInt((await counted.json()).value) + 1n,
    );
  });

  it("limits reads of visitors over more than 40 days where no limit is configured", async () => {
    const ns = freshNamespace("unlimited");
    await importVisitors(service, ns, "k", oneADay(3));
    const total = `/v1/counters/${ns}/k/days?period=total&unique=1`;
    // The public default's rate, 10 a second, and ten times it saved up: a read of the 400
    // days kept costs 10.
    expect(await charged(service, total, "203.0.113.1")).toEqual([
      200,
      "100",
      "90",
    ]);
    // Other reads are not limited, as before; nor a read of 40 days' visitors.
    for (const path of [
      `/v1/counters/${ns}/k`,
      `/v1/counters/${ns}/k/days?period=400d`,
      `/v1/counters/${ns}/k/days?period=40d&unique=1`,
    ])
      expect(await charged(service, path, "203.0.113.1")).toEqual([
        200,
        null,
        null,
      ]);
  });

  it("limits none with EDGECOUNT_RATE_LIMIT=0", async () => {
    const off = await startService({ vars: { EDGECOUNT_RATE_LIMIT: "0" } });
    const ns = freshNamespace("off");
    try {
      await importVisitors(off, ns, "k", oneADay(3));
      const total = `/v1/counters/${ns}/k/days?period=total&unique=1`;
      for (let i = 0; i < 3; i++)
        expect(await charged(off, total, "203.0.113.1")).toEqual([
          200,
          null,
          null,
        ]);
    } finally {
      await off.stop();
    }
  });
});
