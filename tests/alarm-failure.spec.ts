// A shard that stores a call's writes and then cannot set the alarm that reclaims what they
// stored (EDGECOUNT_DRILL_FAILED_ALARMS: the first N tries fail with a storage error whose text
// says "overloaded"). The write is stored, so its answer may never read as "nothing applied,
// retry": it is the write's value once a later try sets the alarm, else `outcome_unknown`.
import { describe, expect, it } from "vitest";
import { freshNamespace, startService } from "./service";

describe.concurrent("a shard whose alarm cannot be set after a write", () => {
  it("answers a write it stored as outcome_unknown, never as overloaded", async () => {
    const service = await startService({
      vars: { EDGECOUNT_DRILL_FAILED_ALARMS: "3" },
    });
    try {
      const ns = freshNamespace("alarm-fails");
      // A TTL lapses, so this write needs the alarm.
      const answer = await service.fetch(`/v1/counters/${ns}/k/incr?ttl=3600`, {
        method: "POST",
      });
      const body = await answer.json();
      expect([answer.status, body.error?.code]).toEqual([
        503,
        "outcome_unknown",
      ]);
      expect(answer.headers.get("retry-after")).toBeNull();
      expect(await service.value(ns, "k")).toBe(1n);
    } finally {
      await service.stop();
    }
  });

  it("sets the alarm it owes on its next call, a read included, and reclaims on time", async () => {
    const service = await startService({
      vars: { EDGECOUNT_DRILL_FAILED_ALARMS: "3", EDGECOUNT_SHARDS: "1" },
    });
    try {
      const ns = freshNamespace("alarm-owed");
      const stats = async () =>
        (await (await service.fetch("/v1/stats")).json()).shards[0];
      const before = (await stats()).reclaimed;
      const write = await service.fetch(`/v1/counters/${ns}/k/incr?ttl=1`, {
        method: "POST",
      });
      expect(write.status).toBe(503);
      // A read lapses nothing of its own; the shard sets the alarm its last call owed.
      expect(
        (await service.fetch(`/v1/counters/${ns}/other?consistency=strong`))
          .status,
      ).toBe(200);
      let after = await stats();
      for (let i = 0; i < 150 && after.reclaimed === before; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after = await stats();
      }
      expect(after.reclaimed - before).toBe(1);
    } finally {
      await service.stop();
    }
  });

  it("answers the write's value when a later try sets the alarm", async () => {
    const service = await startService({
      vars: { EDGECOUNT_DRILL_FAILED_ALARMS: "2" },
    });
    try {
      const ns = freshNamespace("alarm-retried");
      const answer = await service.fetch(`/v1/counters/${ns}/k/incr?ttl=3600`, {
        method: "POST",
      });
      expect(answer.status).toBe(200);
      expect((await answer.json()).value).toBe(1);
    } finally {
      await service.stop();
    }
  });
});
