// Concurrent writes to one key: none lost, none applied twice, each caller its own value; calls
// that arrive while the shard makes a group's writes durable run together in the next group.
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  edgeStats,
  exactValue,
  freshNamespace,
  shardOfNewCounter,
  startService,
  type Service,
  type ShardStats,
} from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

/** A counter's value read from its shard, never from the isolate's kept reads. */
it("1,000 concurrent increments on one key give exactly 1,000, distinct values, in one shard call each", async () => {
  const ns = freshNamespace("race");
  const before = await edgeStats(service);
  const responses = await Promise.all(
    Array.from({ length: 1_000 }, () =>
      service.fetch(`/v1/counters/${ns}/hot/incr`, { method: "POST" }),
    ),
  );
  const values = await Promise.all(
    responses.map(async (response) => {
      expect(response.status).toBe(200);
      return exactValue(await response.text());
    }),
  );
  expect(new Set(values).size).toBe(1_000);
  expect(values.reduce((a, b) => (a > b ? a : b))).toBe(1_000n);
  // A strong read: the key is hot by now, and a plain read may be answered from the
  // isolate's kept value without reaching the shard.
  expect(await service.value(ns, "hot")).toBe(1_000n);
  const after = await edgeStats(service);
  // The increments and the read, each in a call of its own.
  expect(after.shard_calls - before.shard_calls).toBe(1_001);
  expect(after.calls_under_way).toBe(0);
});

it("100 concurrent increments of one key write its row once per group the shard ran them in", async () => {
  const ns = freshNamespace("rows");
  const { shardStats } = await shardOfNewCounter(service, ns, "hot");
  const before = await shardStats();
  const responses = await Promise.all(
    Array.from({ length: 100 }, () =>
      service.fetch(`/v1/counters/${ns}/hot/incr`, { method: "POST" }),
    ),
  );
  const values = await Promise.all(
    responses.map(async (response) => {
      expect(response.status).toBe(200);
      return exactValue(await response.text());
    }),
  );
  const after = await shardStats();
  // Each caller still gets its own value, and every increment is stored.
  expect(new Set(values).size).toBe(100);
  expect(await service.value(ns, "hot")).toBe(101n);
  // How many groups the calls ran in depends on how they arrived (a busy machine makes
  // smaller groups); that each group writes the key's row once, whatever it carries, does not.
  // The test below holds a group open to make the grouping certain.
  const calls = after.calls - before.calls;
  const groups = after.groups - before.groups;
  const rows = after.rows_written - before.rows_written;
  console.log(
    `100 concurrent increments of one key: ${groups} groups, ${rows / 100} rows written per op`,
  );
  // The increments (a read of the figures is a call of another kind, not counted here).
  expect(calls).toBe(100);
  expect(rows).toBe(groups);
});

it("calls that arrive while a group's writes are made durable run together in the next group, which writes the key's row once", async () => {
  // The shard's first group waits, once the first call's writes are durable, until 99 calls
  // have queued (EDGECOUNT_DRILL_GROUP_AFTER): which calls run together is then certain.
  const held = await startService({
    vars: { EDGECOUNT_DRILL_GROUP_AFTER: "99" },
  });
  try {
    const ns = freshNamespace("grouped");
    // The key's shard, found without calling it: a refused method still names it.
    const refused = await held.fetch(`/v1/counters/${ns}/hot`, {
      method: "PATCH",
    });
    expect(refused.status).toBe(405);
    const shard = Number(refused.headers.get("x-edgecount-shard"));
    const shardStats = async (): Promise<ShardStats> =>
      (await (await held.fetch("/v1/stats")).json()).shards[shard];
    const before = await shardStats();

    const first = await held.fetch(`/v1/counters/${ns}/hot/incr`, {
      method: "POST",
    });
    expect(first.status).toBe(200);
    expect(exactValue(await first.text())).toBe(1n);
    const responses = await Promise.all(
      Array.from({ length: 99 }, () =>
        held.fetch(`/v1/counters/${ns}/hot/incr`, { method: "POST" }),
      ),
    );
    const values = await Promise.all(
      responses.map(async (response) => {
        expect(response.status).toBe(200);
        return Number(exactValue(await response.text()));
      }),
    );
    // Each its own value, counting on from the first.
    expect(values.sort((a, b) => a - b)).toEqual(
      Array.from({ length: 99 }, (_, i) => i + 2),
    );
    const after = await shardStats();
    expect(after.calls - before.calls).toBe(100);
    expect(after.groups - before.groups).toBe(2);
    // The new key's row and the shard's key total for the first call, the key's row once
    // for the group of 99.
    expect(after.rows_written - before.rows_written).toBe(2 + 1);
    expect(await held.value(ns, "hot")).toBe(100n);
  } finally {
    await held.stop();
  }
});

it("answers one key's acknowledged writes past its shard's bound 503 shard_overloaded with Retry-After, none applied", async () => {
  // One shard, whose first group waits until 2,100 more calls have arrived: 2,000 increments
  // of one key wait for the next group, and the 100 past that bound are refused at once.
  const held = await startService({
    vars: {
      EDGECOUNT_SHARDS: "1",
      EDGECOUNT_DRILL_GROUP_AFTER: "2100",
      // The isolate's own bound on calls under way would refuse first otherwise.
      EDGECOUNT_SHARD_QUEUE_LIMIT: "5000",
    },
  });
  try {
    const ns = freshNamespace("one-key");
    const path = `/v1/counters/${ns}/hot/incr`;
    expect((await held.fetch(path, { method: "POST" })).status).toBe(200);
    const answers = await Promise.all(
      Array.from({ length: 2_100 }, async () => {
        const response = await held.fetch(path, { method: "POST" });
        const body = await response.json();
        return {
          status: response.status,
          code: body.error?.code,
          retryAfter: response.headers.get("retry-after"),
        };
      }),
    );
    const refused = answers.filter((a) => a.status === 503);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(2_000);
    expect(refused).toHaveLength(100);
    expect(refused.every((a) => a.code === "shard_overloaded")).toBe(true);
    expect(refused.every((a) => Number(a.retryAfter) >= 1)).toBe(true);
    expect(await held.value(ns, "hot")).toBe(2_001n);
  } finally {
    await held.stop();
  }
}, 60_000);

it("refuses a call that would take the ops waiting for the next group past 2,000, before applying any of it", async () => {
  // One shard, whose first group waits until three calls have arrived: two batches of 1,000
  // increments and a single one, sent at once. Any two of them fit in the group's 2,000 ops;
  // all three do not, so whichever arrives last is refused, whatever the order.
  const held = await startService({
    vars: { EDGECOUNT_SHARDS: "1", EDGECOUNT_DRILL_GROUP_AFTER: "3" },
  });
  try {
    const ns = freshNamespace("bound");
    const first = await held.fetch(`/v1/counters/${ns}/single/incr`, {
      method: "POST",
    });
    expect(first.status).toBe(200);
    const thousand = (key: string) =>
      held.fetch("/v1/batch", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          ops: Array.from({ length: 1_000 }, () => ({ op: "incr", ns, key })),
        }),
      });
    const [a, b, single] = await Promise.all([
      thousand("a"),
      thousand("b"),
      held.fetch(`/v1/counters/${ns}/single/incr`, { method: "POST" }),
    ]);
    const codes = async (response: Response): Promise<string[]> => {
      if (response.headers.get("content-type")?.includes("json") !== true)
        return [String(response.status)];
      const body = await response.json();
      if (body.error) return [body.error.code];
      if (!body.results) return ["applied"]; // a counter's answer
      return [
        ...new Set(
          body.results.map((r: any) => (r.error ? r.error.code : "applied")),
        ),
      ] as string[];
    };
    const outcomes = [await codes(a), await codes(b), await codes(single)];
    expect(
      outcomes.filter((o) => o.join() === "shard_overloaded"),
    ).toHaveLength(1);
    expect(outcomes.filter((o) => o.join() === "applied")).toHaveLength(2);
    const value = async (key: string) =>
      Number(
        await (
          await held.fetch(`/v1/counters/${ns}/${key}?consistency=strong`, {
            headers: { accept: "text/plain" },
          })
        ).text(),
      );
    const applied = [
      outcomes[0].join() === "applied" ? 1_000 : 0,
      outcomes[1].join() === "applied" ? 1_000 : 0,
      outcomes[2].join() === "applied" ? 2 : 1,
    ];
    expect([await value("a"), await value("b"), await value("single")]).toEqual(
      applied,
    );
    // The shard counts the call it refused.
    const stats = await (await held.fetch("/v1/stats")).json();
    expect(stats.shards[0].overloaded).toBe(1);
  } finally {
    await held.stop();
  }
});
