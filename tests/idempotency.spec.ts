// Idempotency keys: a repeat returns the first answer without applying again, also after a
// restart; the same key with a different request to the same key is refused, and to another
// key is another write. Records are small, and those of the older layout still work.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freshNamespace,
  shardOfNewCounter,
  startService,
  type Service,
} from "./service";
import { shardDatabase } from "./shard-database";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

const keyed = (key: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: {
    "idempotency-key": key,
    ...(init.headers as Record<string, string>),
  },
});

describe("idempotency keys", () => {
  it("applies a repeated increment once and replays the first answer", async () => {
    const ns = freshNamespace("idem");
    const path = `/v1/counters/${ns}/k/incr?by=5`;
    const first = await service.fetch(
      path,
      keyed("order-1", { method: "POST" }),
    );
    const again = await service.fetch(
      path,
      keyed("order-1", { method: "POST" }),
    );
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(await first.json());
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await service.value(ns, "k")).toBe(5n);
    await service.fetch(path, keyed("order-2", { method: "POST" }));
    expect(await service.value(ns, "k")).toBe(10n);
  });

  it("refuses the same key for a different request with 422, changing nothing", async () => {
    const ns = freshNamespace("mismatch");
    await service.fetch(
      `/v1/counters/${ns}/k/incr`,
      keyed("same", { method: "POST" }),
    );
    const other = await service.fetch(
      `/v1/counters/${ns}/k/incr?by=2`,
      keyed("same", { method: "POST" }),
    );
    expect(other.status).toBe(422);
    expect((await other.json()).error.code).toBe("idempotency_mismatch");
    expect(await service.value(ns, "k")).toBe(1n);
  });

  it("refuses malformed keys with 400", async () => {
    for (const bad of ["has space", "x".repeat(129)]) {
      const response = await service.fetch(
        "/v1/counters/ns/k/incr",
        keyed(bad, { method: "POST" }),
      );
      expect(response.status).toBe(400);
      expect((await response.json()).error.code).toBe(
        "invalid_idempotency_key",
      );
    }
  });

  it("covers cache writes and batch ops", async () => {
    const ns = freshNamespace("idemcache");
    const put = () =>
      service.fetch(
        `/v1/cache/${ns}/c`,
        keyed("put-1", { method: "PUT", body: "first" }),
      );
    expect((await put()).status).toBe(204);
    const replay = await put();
    expect(replay.status).toBe(204);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");

    const batch = () =>
      service.fetch("/v1/batch", {
        method: "POST",
        body: JSON.stringify({
          ops: [
            { op: "incr", ns, key: "b", by: 3, idempotency_key: "batch-op-1" },
            { op: "incr", ns, key: "b", by: 4 },
          ],
        }),
      });
    const first = (await (await batch()).json()).results;
    const second = (await (await batch()).json()).results;
    expect(first).toEqual([
      { value: 3, exists: true },
      { value: 7, exists: true },
    ]);
    expect(second).toEqual([
      { value: 3, exists: true, replayed: true },
      { value: 11, exists: true },
    ]);
    expect(await service.value(ns, "b")).toBe(11n);
  });
});

describe("rows written for a keyed write", () => {
  // Each op's idempotency record is one row beside what the op writes anyway: a keyed
  // increment writes its counter's row and its record, a replay writes nothing, and a keyed
  // batch writes its keys' rows and one record per op.
  it("writes at most one row more than the same write without a key, and none to replay", async () => {
    const ns = freshNamespace("idem-rows");
    const { shardStats } = await shardOfNewCounter(service, ns, "k");
    const rowsWritten = async () => (await shardStats()).rows_written;

    let before = await rowsWritten();
    for (let i = 0; i < 5; i++) {
      await service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST" });
    }
    const unkeyed = (await rowsWritten()) - before;

    before = await rowsWritten();
    for (let i = 0; i < 5; i++) {
      const keyedWrite = await service.fetch(
        `/v1/counters/${ns}/k/incr`,
        keyed(`rows-${i}`, { method: "POST" }),
      );
      expect(keyedWrite.status).toBe(200);
    }
    const keyedRows = (await rowsWritten()) - before;
    expect(unkeyed).toBe(5);
    // Exactly one record per keyed op (at most one is the promise; fewer would be news).
    expect(keyedRows).toBe(unkeyed + 5);

    before = await rowsWritten();
    for (let i = 0; i < 5; i++) {
      const replay = await service.fetch(
        `/v1/counters/${ns}/k/incr`,
        keyed(`rows-${i}`, { method: "POST" }),
      );
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
    }
    expect((await rowsWritten()) - before).toBe(0);

    // Ten keyed increments of one key in one batch: its row once, and ten records.
    before = await rowsWritten();
    const ops = Array.from({ length: 10 }, (_, i) => ({
      op: "incr",
      ns,
      key: "k",
      idempotency_key: `batch-${i}`,
    }));
    const batch = await service.fetch("/v1/batch", {
      method: "POST",
      body: JSON.stringify({ ops }),
    });
    expect(batch.status).toBe(200);
    expect((await rowsWritten()) - before).toBe(1 + 10);
    expect(await service.value(ns, "k")).toBe(21n);
  });
});

describe("idempotency across a restart", () => {
  const dir = mkdtempSync(join(tmpdir(), "edgecount-idem-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("still replays after the runtime restarts", async () => {
    const ns = freshNamespace("idemrestart");
    const path = `/v1/counters/${ns}/k/incr`;
    const first = await startService({ persistDir: dir });
    await first.fetch(path, keyed("survives", { method: "POST" }));
    await first.stop();
    const second = await startService({ persistDir: dir });
    try {
      const replay = await second.fetch(
        path,
        keyed("survives", { method: "POST" }),
      );
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(await second.value(ns, "k")).toBe(1n);
    } finally {
      await second.stop();
    }
  });
});

/** Stores a record as shards did before records were scoped and digested: keyed by the
 * Idempotency-Key alone (`old-key`), holding the whole op, here a first `incr` of `ns/k`. */
function storeLegacyRecord(dir: string, ns: string, createdAtMs: number) {
  const db = new DatabaseSync(shardDatabase(dir));
  db.exec(`CREATE TABLE IF NOT EXISTS idempotency (
    idempotency_key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,
    result TEXT NOT NULL, created_at_ms INTEGER NOT NULL) WITHOUT ROWID`);
  db.prepare("INSERT INTO idempotency VALUES (?, ?, ?, ?)").run(
    "old-key",
    JSON.stringify({ op: "incr", ns, key: "k", by: 1 }),
    JSON.stringify({ value: { value: 1, exists: true, version: 1 } }),
    createdAtMs,
  );
  db.close();
}

describe("records per written key", () => {
  const oneShard = { EDGECOUNT_SHARDS: "1" };

  it("applies one Idempotency-Key on two namespaces, and on a counter and an entry, as separate writes", async () => {
    const single = await startService({ vars: oneShard });
    try {
      const [a, b] = [freshNamespace("scope-a"), freshNamespace("scope-b")];
      for (const ns of [a, b]) {
        const incr = await single.fetch(
          `/v1/counters/${ns}/k/incr?by=3`,
          keyed("shared", { method: "POST" }),
        );
        expect(incr.status, ns).toBe(200);
        expect(incr.headers.get("idempotent-replayed")).toBeNull();
        const put = await single.fetch(
          `/v1/cache/${ns}/k`,
          keyed("shared", { method: "PUT", body: ns }),
        );
        expect(put.status, ns).toBe(204);
        expect(put.headers.get("idempotent-replayed")).toBeNull();
      }
      for (const ns of [a, b]) {
        expect(await single.value(ns, "k")).toBe(3n);
        expect(await (await single.fetch(`/v1/cache/${ns}/k`)).text()).toBe(ns);
      }
      // Each write still replays on its own key.
      const again = await single.fetch(
        `/v1/counters/${b}/k/incr?by=3`,
        keyed("shared", { method: "POST" }),
      );
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await single.value(b, "k")).toBe(3n);
    } finally {
      await single.stop();
    }
  });

  it("keeps a small record for a keyed 1 MiB PUT", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edgecount-idem-size-"));
    try {
      const first = await startService({ persistDir: dir, vars: oneShard });
      const ns = freshNamespace("bigput");
      const mib = new Uint8Array(1024 * 1024).fill(1);
      for (let i = 0; i < 20; i++) {
        const path = `/v1/cache/${ns}/v${i}`;
        const put = await first.fetch(
          path,
          keyed(`put-${i}`, { method: "PUT", body: mib }),
        );
        expect(put.status).toBe(204);
        await first.fetch(path, { method: "DELETE" });
      }
      const replay = await first.fetch(
        `/v1/cache/${ns}/v0`,
        keyed("put-0", { method: "PUT", body: mib }),
      );
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      await first.stop();

      // With the 20 entries deleted, what the shard still stores is its records.
      const db = new DatabaseSync(shardDatabase(dir), { readOnly: true });
      const pragma = (name: string) =>
        Number(Object.values(db.prepare(`PRAGMA ${name}`).get()!)[0]);
      const used =
        (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
      db.close();
      expect(used).toBeLessThan(256 * 1024);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("still replays records stored in the older layout, and scopes them to their key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edgecount-idem-legacy-"));
    const ns = freshNamespace("legacy");
    try {
      const first = await startService({ persistDir: dir, vars: oneShard });
      await first.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST" });
      await first.stop();

      storeLegacyRecord(dir, ns, Date.now());

      const second = await startService({ persistDir: dir, vars: oneShard });
      try {
        const path = `/v1/counters/${ns}/k/incr`;
        const replay = await second.fetch(
          path,
          keyed("old-key", { method: "POST" }),
        );
        expect(replay.status).toBe(200);
        expect(replay.headers.get("idempotent-replayed")).toBe("true");
        expect((await replay.json()).value).toBe(1);
        const mismatch = await second.fetch(
          `${path}?by=2`,
          keyed("old-key", { method: "POST" }),
        );
        expect(mismatch.status).toBe(422);
        expect(await second.value(ns, "k")).toBe(1n);

        const elsewhere = await second.fetch(
          `/v1/counters/${ns}/other/incr`,
          keyed("old-key", { method: "POST" }),
        );
        expect(elsewhere.status).toBe(200);
        expect(elsewhere.headers.get("idempotent-replayed")).toBeNull();
        const fresh = () =>
          second.fetch(path, keyed("new-key", { method: "POST" }));
        expect((await fresh()).status).toBe(200);
        expect((await fresh()).headers.get("idempotent-replayed")).toBe("true");
        expect(await second.value(ns, "k")).toBe(2n);
        expect(await second.value(ns, "other")).toBe(1n);
      } finally {
        await second.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("drops the older records table when the first generation of records ends", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edgecount-idem-drop-"));
    const ns = freshNamespace("legacydrop");
    try {
      const first = await startService({ persistDir: dir, vars: oneShard });
      await first.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST" });
      await first.stop();
      // As a shard upgraded a day ago holds it: a legacy record from before the upgrade, and
      // the first generation of records begun at the upgrade.
      const dayAndHour = 25 * 60 * 60 * 1000;
      storeLegacyRecord(dir, ns, Date.now() - dayAndHour);
      const upgraded = new DatabaseSync(shardDatabase(dir));
      upgraded
        .prepare("UPDATE records_generation SET since_ms = ?")
        .run(Date.now() - dayAndHour + 1_000);
      upgraded.close();

      const second = await startService({ persistDir: dir, vars: oneShard });
      try {
        // A write with a TTL of one second brings the shard's alarm, which reclaims.
        const incr = () =>
          second.fetch(
            `/v1/counters/${ns}/t/incr?ttl=1`,
            keyed("after", { method: "POST" }),
          );
        expect((await incr()).status).toBe(200);
        // The alarm runs once the counter lapses, a second on: it reclaims the counter and,
        // in the same run, the lapsed records. Waited for (a busy machine may run it late).
        let reclaimed = 0;
        for (let i = 0; i < 150 && reclaimed < 1; i++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          reclaimed = (await (await second.fetch("/v1/stats")).json()).shards[0]
            .reclaimed;
        }
        expect(reclaimed).toBe(1);
        const replay = await incr();
        expect(replay.headers.get("idempotent-replayed")).toBe("true");
        // The lapsed record no longer answers: the same key applies again.
        const lapsed = await second.fetch(
          `/v1/counters/${ns}/k/incr`,
          keyed("old-key", { method: "POST" }),
        );
        expect(lapsed.headers.get("idempotent-replayed")).toBeNull();
        expect(await second.value(ns, "k")).toBe(2n);
      } finally {
        await second.stop();
      }
      const db = new DatabaseSync(shardDatabase(dir), { readOnly: true });
      const tables = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .all()
        .map((row) => row.name);
      db.close();
      expect(tables).toContain("idempotency_records");
      expect(tables).toContain("idempotency_records_earlier");
      expect(tables).not.toContain("idempotency");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
