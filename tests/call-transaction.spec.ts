// A shard call applies wholly or not at all: its writes run in one SQLite transaction. The
// spec makes the shard's storage refuse one idempotency record of a batch (a trigger that
// aborts its insert, installed in the stopped shard's database) and checks that nothing of the
// batch was kept: not the counter written before it, not the cache entry. Without the
// transaction, those were stored and the batch answered them as applied.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";
import { shardDatabase } from "./shard-database";

const oneShard = { EDGECOUNT_SHARDS: "1" };
const refusedKey = "refused-by-storage-0001";

function alterShard(dir: string, statement: string) {
  const db = new DatabaseSync(shardDatabase(dir));
  try {
    db.exec(statement);
  } finally {
    db.close();
  }
}

async function batch(service: Service, ops: object[]) {
  const answer = await service.fetch("/v1/batch", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ops }),
  });
  expect(answer.status).toBe(200);
  return (await answer.json()).results;
}

async function value(service: Service, ns: string, key: string) {
  const answer = await service.fetch(
    `/v1/counters/${ns}/${key}?consistency=strong`,
  );
  return (await answer.json()).value;
}

describe("one transaction per shard call", () => {
  it("keeps nothing of a call whose storage failed part-way, and its retry applies once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "edgecount-transaction-"));
    const ns = freshNamespace("tx");
    const ops = [
      { op: "incr", ns, key: "a" },
      { op: "cache_put", ns, key: "c", value: "kept?" },
      { op: "incr", ns, key: "b", idempotency_key: refusedKey },
    ];
    try {
      const first = await startService({ persistDir: dir, vars: oneShard });
      try {
        expect(
          (await batch(first, [{ op: "incr", ns, key: "a" }]))[0].value,
        ).toBe(1);
      } finally {
        await first.stop();
      }
      alterShard(
        dir,
        `CREATE TRIGGER refuse_one_record BEFORE INSERT ON idempotency_records
         WHEN NEW.idempotency_key = '${refusedKey}'
         BEGIN SELECT RAISE(ABORT, 'storage refuses this record'); END`,
      );
      const refusing = await startService({ persistDir: dir, vars: oneShard });
      try {
        const results = await batch(refusing, ops);
        expect(results.map((r: any) => r.error?.code)).toEqual([
          "storage_unavailable",
          "storage_unavailable",
          "storage_unavailable",
        ]);
        // Nothing of the call was kept, in storage or in the shard's memory.
        expect(await value(refusing, ns, "a")).toBe(1);
        expect(await value(refusing, ns, "b")).toBe(0);
        expect((await refusing.fetch(`/v1/cache/${ns}/c`)).status).toBe(404);
      } finally {
        await refusing.stop();
      }
      alterShard(dir, "DROP TRIGGER refuse_one_record");
      const healed = await startService({ persistDir: dir, vars: oneShard });
      try {
        const results = await batch(healed, ops);
        expect(results.map((r: any) => r.value ?? r.stored)).toEqual([
          2,
          true,
          1,
        ]);
        // The keyed write was recorded with the others: sent again, it is not applied again.
        const again = await batch(healed, [ops[2]]);
        expect(again[0]).toMatchObject({ value: 1, replayed: true });
        expect(await value(healed, ns, "b")).toBe(1);
        expect(await (await healed.fetch(`/v1/cache/${ns}/c`)).text()).toBe(
          "kept?",
        );
      } finally {
        await healed.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
