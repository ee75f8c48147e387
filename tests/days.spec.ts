// Days and unique visitors: every count lands in its day (in the namespace's time zone), a read
// of `/days` asks for `today`, `yesterday`, `Nd` or a `from`..`to` series, and `?unique=1`
// counts each visitor (address and user agent) once a day without storing either
// (docs/days.md).
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";
import { clearOfMidnight, dateIn } from "./days";
import { shardDatabase } from "./shard-database";

/** `date` moved by `days`. */
function shifted(date: string, days: number): string {
  const at = new Date(`${date}T12:00:00Z`);
  at.setUTCDate(at.getUTCDate() + days);
  return at.toISOString().slice(0, 10);
}

/** A count from one visitor. */
function visit(
  service: Service,
  path: string,
  address: string,
  agent = "Mozilla/5.0 spec",
) {
  return service.fetch(path, {
    method: "POST",
    headers: { "cf-connecting-ip": address, "user-agent": agent },
  });
}

let service: Service;
beforeAll(async () => {
  service = await startService({
    vars: {
      EDGECOUNT_TIME_ZONES: "east=Pacific/Kiritimati,west=Pacific/Pago_Pago",
    },
  });
});
afterAll(async () => {
  await service.stop();
});
// Each spec counts and then reads its days within seconds: none runs across a midnight.
beforeEach(() =>
  clearOfMidnight(["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"]),
);

describe("days", () => {
  it("counts every increment and decrement in today, and lists each day of a period", async () => {
    const ns = freshNamespace("days");
    for (let i = 0; i < 3; i++) {
      expect(
        (
          await service.fetch(`/v1/counters/${ns}/page/incr`, {
            method: "POST",
          })
        ).status,
      ).toBe(200);
    }
    await service.fetch(`/v1/counters/${ns}/page/decr?by=1`, {
      method: "POST",
    });
    const today = dateIn("UTC");
    const read = await service.fetch(
      `/v1/counters/${ns}/page/days?period=today`,
    );
    expect(read.status).toBe(200);
    expect(read.headers.get("cache-control")).toBe("no-store");
    expect(await read.json()).toEqual({
      ns,
      key: "page",
      value: 2,
      exists: true,
      period: "today",
      from: today,
      to: today,
      time_zone: "UTC",
      count: 2,
      days: [{ date: today, count: 2 }],
    });
    const week = await (
      await service.fetch(`/v1/counters/${ns}/page/days?period=7d`)
    ).json();
    expect(week.days).toHaveLength(7);
    expect(week.days[0]).toEqual({ date: shifted(today, -6), count: 0 });
    expect(week.days[6]).toEqual({ date: today, count: 2 });
    const yesterday = await (
      await service.fetch(`/v1/counters/${ns}/page/days?period=yesterday`)
    ).json();
    expect([yesterday.count, yesterday.value]).toEqual([0, 2]);
    const plain = await service.fetch(
      `/v1/counters/${ns}/page/days?period=7d`,
      {
        headers: { accept: "text/plain" },
      },
    );
    expect(await plain.text()).toBe("2");
    // The counter's own read is what it was: the total, whatever the query says of days.
    const counter = await service.fetch(`/v1/counters/${ns}/page?period=7d`);
    expect(await counter.json()).toEqual({
      ns,
      key: "page",
      value: 2,
      exists: true,
    });
  });

  it("answers a from..to series and refuses bad periods with a 400 that names them", async () => {
    const ns = freshNamespace("series");
    await service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST" });
    const today = dateIn("UTC");
    const from = shifted(today, -2);
    const series = await (
      await service.fetch(`/v1/counters/${ns}/k/days?from=${from}&to=${today}`)
    ).json();
    expect(series.days.map((d: { date: string }) => d.date)).toEqual([
      from,
      shifted(today, -1),
      today,
    ]);
    for (const [query, parameter] of [
      ["period=week", "period"],
      ["period=401d", "period"],
      ["period=%2B7d", "period"],
      ["period=07d", "period"],
      ["period=0d", "period"],
      [`from=${from}`, "from"],
      [`from=${today}&to=${from}`, "period"],
      ["from=2026-02-30&to=2026-03-01", "from"],
      // Older than the 400 days kept: refused, whether or not such days are still stored.
      [`from=${shifted(today, -400)}&to=${shifted(today, -399)}`, "period"],
      ["unique=maybe", "unique"],
    ]) {
      const refused = await service.fetch(`/v1/counters/${ns}/k/days?${query}`);
      expect(refused.status, query).toBe(400);
      const body = await refused.json();
      expect(body.error.code, query).toBe("invalid_parameter");
      expect(body.error.message, query).toContain(parameter);
    }
  });

  it("accepts as a period exactly what the OpenAPI description's pattern allows", async () => {
    const ns = freshNamespace("pattern");
    const spec = await (await service.fetch("/v1/openapi.json")).json();
    const pattern = new RegExp(
      spec.components.parameters.period.schema.pattern,
    );
    // Within the 400 days this service keeps: past them the pattern allows what it refuses.
    for (const period of [
      "today",
      "yesterday",
      "total",
      "1d",
      "7d",
      "400d",
      "0d",
      "07d",
      "+7d",
      "-7d",
      " 7d",
      "7",
      "7D",
      "d",
      "week",
    ]) {
      const answer = await service.fetch(
        `/v1/counters/${ns}/k/days?period=${encodeURIComponent(period)}`,
      );
      expect(answer.status === 200, period).toBe(pattern.test(period));
    }
    expect(pattern.test("3660d") && !pattern.test("3661d")).toBe(true);
  });

  it("counts days in the namespace's own time zone", async () => {
    // Kiritimati is UTC+14 and Pago Pago UTC-11: their dates always differ, by one day.
    for (const [ns, zone] of [
      ["east", "Pacific/Kiritimati"],
      ["west", "Pacific/Pago_Pago"],
      [freshNamespace("utc"), "UTC"],
    ]) {
      const body = await (
        await service.fetch(`/v1/counters/${ns}/zoned/days?period=today`)
      ).json();
      expect(body.time_zone).toBe(zone);
      expect(body.to).toBe(dateIn(zone));
    }
  });

  it("refuses to start with a time zone it does not know", async () => {
    const broken = await startService({
      vars: { EDGECOUNT_TIME_ZONES: "shop=Mars/Olympus" },
    });
    try {
      const answer = await broken.fetch("/v1/counters/shop/k");
      expect(answer.status).toBe(500);
      expect((await answer.json()).error.code).toBe("misconfigured");
    } finally {
      await broken.stop();
    }
  });
});

describe("unique visitors", () => {
  it("counts each of 50 visitors exactly once however often they come", async () => {
    const ns = freshNamespace("uniq");
    const path = `/v1/counters/${ns}/home/incr?unique=1`;
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          visit(service, path, `192.0.2.${i}`),
        ),
      );
    }
    const body = await (
      await service.fetch(`/v1/counters/${ns}/home/days?period=today&unique=1`)
    ).json();
    expect([body.value, body.count, body.uniques]).toEqual([150, 150, 50]);
    expect(body.days[0].uniques).toBe(50);
    const plain = await service.fetch(
      `/v1/counters/${ns}/home/days?period=today&unique=1`,
      { headers: { accept: "text/plain" } },
    );
    expect(await plain.text()).toBe("50");
  });

  it("refuses unique on a decrement: a visitor is counted by a count", async () => {
    const ns = freshNamespace("decr");
    const refused = await service.fetch(`/v1/counters/${ns}/k/decr?unique=1`, {
      method: "POST",
    });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.message).toContain("unique");
    expect(await service.value(ns, "k")).toBe(0n);
  });

  it("refuses unique on an increment by 0 or less, acknowledged, one-way or batched, and changes nothing", async () => {
    const ns = freshNamespace("negative");
    for (const by of [-5, 0]) {
      for (const oneWay of ["", "&async=1"]) {
        const refused = await visit(
          service,
          `/v1/counters/${ns}/k/incr?by=${by}&unique=1${oneWay}`,
          "198.51.100.9",
        );
        expect(refused.status).toBe(400);
        const { error } = await refused.json();
        expect(error.code).toBe("invalid_parameter");
        expect(error.message).toContain("unique");
      }
    }
    for (const query of ["", "?async=1"]) {
      const batch = await service.fetch(`/v1/batch${query}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "cf-connecting-ip": "198.51.100.9",
        },
        body: JSON.stringify({
          ops: [
            { op: "incr", ns, key: "k", by: -3, unique: true },
            { op: "incr", ns, key: "k", by: 0, unique: true },
          ],
        }),
      });
      const { results } = await batch.json();
      expect(results.map((r: any) => r.error?.code)).toEqual([
        "invalid_op",
        "invalid_op",
      ]);
    }
    // Give a one-way flush time to land, had anything been accepted.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const days = await (
      await service.fetch(`/v1/counters/${ns}/k/days?period=today&unique=1`)
    ).json();
    expect([days.exists, days.count, days.uniques]).toEqual([false, 0, 0]);
  });

  it("tells visitors apart by user agent too, and by key", async () => {
    const ns = freshNamespace("agents");
    for (const agent of ["Firefox", "Chrome", "Firefox"]) {
      await visit(
        service,
        `/v1/counters/${ns}/a/incr?unique=1`,
        "198.51.100.7",
        agent,
      );
    }
    await visit(
      service,
      `/v1/counters/${ns}/b/incr?unique=1`,
      "198.51.100.7",
      "Firefox",
    );
    const uniques = async (key: string) =>
      (
        await (
          await service.fetch(
            `/v1/counters/${ns}/${key}/days?period=today&unique=1`,
          )
        ).json()
      ).uniques;
    expect([await uniques("a"), await uniques("b")]).toEqual([2, 1]);
  });

  it("counts one-way page views' visitors once their flush is applied", async () => {
    const ns = freshNamespace("oneway");
    const path = `/v1/counters/${ns}/page/incr?async=1&unique=1`;
    for (let i = 0; i < 20; i++) {
      expect((await visit(service, path, `203.0.113.${i % 10}`)).status).toBe(
        202,
      );
    }
    await expect
      .poll(
        async () =>
          (
            await (
              await service.fetch(
                `/v1/counters/${ns}/page/days?period=today&unique=1`,
              )
            ).json()
          ).uniques,
        { timeout: 10_000 },
      )
      .toBe(10);
    const body = await (
      await service.fetch(`/v1/counters/${ns}/page/days?period=today&unique=1`)
    ).json();
    expect([body.value, body.count]).toEqual([20, 20]);
  });

  it("counts a batch's visitor with unique on its incr ops, acknowledged or one-way", async () => {
    const ns = freshNamespace("batched");
    const send = (address: string, oneWay: boolean) =>
      service.fetch(`/v1/batch${oneWay ? "?async=1" : ""}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "cf-connecting-ip": address,
          "user-agent": "Batch/1.0",
        },
        body: JSON.stringify({
          ops: [
            { op: "incr", ns, key: "a", unique: true },
            { op: "incr", ns, key: "b", unique: true },
          ],
        }),
      });
    expect((await send("192.0.2.1", false)).status).toBe(200);
    expect((await send("192.0.2.2", false)).status).toBe(200);
    expect((await send("192.0.2.3", true)).status).toBe(202);
    const refused = await service.fetch("/v1/batch", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ops: [{ op: "decr", ns, key: "a", unique: true }],
      }),
    });
    expect((await refused.json()).results[0].error.code).toBe("invalid_op");
    // The OpenAPI description's incr op, which allows no field it does not name, names it.
    const spec = await (await service.fetch("/v1/openapi.json")).json();
    const incr = spec.components.schemas.BatchIncr;
    expect([incr.additionalProperties, incr.properties.unique?.type]).toEqual([
      false,
      "boolean",
    ]);
    for (const key of ["a", "b"])
      await expect
        .poll(
          async () =>
            (
              await (
                await service.fetch(
                  `/v1/counters/${ns}/${key}/days?period=today&unique=1`,
                )
              ).json()
            ).uniques,
          { timeout: 10_000 },
        )
        .toBe(3);
  });

  it("answers the total's uniques over the days kept without listing them", async () => {
    const ns = freshNamespace("total");
    await visit(service, `/v1/counters/${ns}/k/incr?unique=1`, "192.0.2.200");
    const body = await (
      await service.fetch(`/v1/counters/${ns}/k/days?unique=1`)
    ).json();
    expect([body.period, body.count, body.uniques, body.days]).toEqual([
      "total",
      1,
      1,
      [],
    ]);
  });
});

describe("badges", () => {
  it("show a period's count or its visitors, counting this view first with incr=1", async () => {
    const ns = freshNamespace("badge");
    const badge = (query: string, address: string) =>
      service.fetch(`/v1/badge/${ns}/post.svg?${query}`, {
        headers: { "cf-connecting-ip": address, "user-agent": "Badge/1.0" },
      });
    for (const address of ["192.0.2.1", "192.0.2.2", "192.0.2.1"]) {
      const counted = await badge("incr=1&unique=1&period=today", address);
      expect(counted.headers.get("cache-control")).toBe("no-store");
    }
    const views = await (await badge("period=today", "192.0.2.3")).text();
    expect(views).toContain("<title>views: 3</title>");
    const visitors = await (
      await badge("period=7d&unique=1&label=visitors", "192.0.2.3")
    ).text();
    expect(visitors).toContain("<title>visitors: 2</title>");
    const total = await (await badge("period=total", "192.0.2.3")).text();
    expect(total).toContain("<title>views: 3</title>");
    const today = dateIn("UTC");
    const series = await (
      await badge(`from=${shifted(today, -1)}&to=${today}`, "192.0.2.3")
    ).text();
    expect(series).toContain("<title>views: 3</title>");
    const spec = await (await service.fetch("/v1/openapi.json")).json();
    const described = spec.paths["/v1/badge/{ns}/{key}.svg"].get.parameters.map(
      (p: { $ref?: string; name?: string }) =>
        p.name ?? spec.components.parameters[p.$ref!.split("/").pop()!].name,
    );
    expect(described).toEqual(expect.arrayContaining(["period", "from", "to"]));
    const refused = await badge("period=fortnight", "192.0.2.3");
    expect(refused.status).toBe(400);
  });
});

describe("what a shard stores of days and visitors", () => {
  it("moves a finished day to its own row, and keeps no address or user agent anywhere", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-days-"));
    const ns = freshNamespace("stored");
    const addresses = ["192.0.2.77", "192.0.2.78"];
    const agent = "Mozilla/5.0 (X11; SpecAgent/9.9)";
    const vars = { EDGECOUNT_SHARDS: "1" };
    try {
      const first = await startService({ persistDir, vars });
      for (const address of addresses) {
        await visit(
          first,
          `/v1/counters/${ns}/post/incr?unique=1`,
          address,
          agent,
        );
      }
      await first.stop();
      // Make the counter's latest day yesterday, as if the counts had come then: the next
      // count of today moves it to its own row.
      const today = dateIn("UTC");
      const yesterday = Math.round(
        Date.parse(`${shifted(today, -1)}T00:00:00Z`) / 86_400_000,
      );
      const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite");
      let db = new DatabaseSync(shardDatabase(persistDir));
      db.prepare("UPDATE counters SET day = ? WHERE ns = ?").run(yesterday, ns);
      db.prepare("UPDATE visitor_sketches SET day = ? WHERE ns = ?").run(
        yesterday,
        ns,
      );
      db.prepare("UPDATE visitor_salts SET day = ?").run(yesterday);
      db.close();

      const second = await startService({ persistDir, vars });
      try {
        await visit(
          second,
          `/v1/counters/${ns}/post/incr?unique=1`,
          addresses[0],
          agent,
        );
        const body = await (
          await second.fetch(`/v1/counters/${ns}/post/days?period=7d&unique=1`)
        ).json();
        expect(body.days.slice(-2)).toEqual([
          { date: shifted(today, -1), count: 2, uniques: 2 },
          { date: today, count: 1, uniques: 1 },
        ]);
        // A visitor of two days is two visitors of the range: their days' salts differ.
        expect([body.value, body.count, body.uniques]).toEqual([3, 3, 3]);
      } finally {
        await second.stop();
      }
      db = new DatabaseSync(shardDatabase(persistDir));
      const days = db
        .prepare("SELECT day, count FROM counter_days WHERE ns = ?")
        .all(ns);
      db.close();
      expect(days).toEqual([{ day: yesterday, count: 2 }]);
      // Nothing of an address or a user agent, in any file the shards wrote.
      const files = readdirSync(persistDir, {
        recursive: true,
        encoding: "utf8",
      });
      for (const file of files) {
        let bytes: Buffer;
        try {
          bytes = readFileSync(join(persistDir, file));
        } catch {
          continue; // a folder
        }
        for (const secret of [...addresses, agent, "SpecAgent"]) {
          expect(bytes.includes(secret), `${secret} in ${file}`).toBe(false);
        }
      }
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });

  it("keeps EDGECOUNT_DAYS days and at most 400 days of visitors, dropping older ones at the key's next day", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-days-kept-"));
    const ns = freshNamespace("kept");
    try {
      // Started first with the default 400 days kept, then with 500: the pruning follows the
      // setting the shard starts with.
      const first = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "1" },
      });
      await visit(first, `/v1/counters/${ns}/k/incr?unique=1`, "192.0.2.5");
      await first.stop();
      const today = dateIn("UTC");
      const dayOf = (date: string) =>
        Math.round(Date.parse(`${date}T00:00:00Z`) / 86_400_000);
      const t = dayOf(today);
      // As if the counter had last counted yesterday and held older days and sketches.
      const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite");
      let db = new DatabaseSync(shardDatabase(persistDir));
      db.prepare("UPDATE counters SET day = ? WHERE ns = ?").run(t - 1, ns);
      db.prepare("UPDATE visitor_sketches SET day = ? WHERE ns = ?").run(
        t - 1,
        ns,
      );
      for (const back of [600, 500, 499, 450, 10])
        db.prepare(
          "INSERT INTO counter_days (ns, key, day, count) VALUES (?, 'k', ?, 1)",
        ).run(ns, t - back);
      for (const back of [401, 400, 399, 10])
        db.prepare(
          "INSERT INTO visitor_sketches (ns, key, day, sketch) SELECT ns, key, ?, sketch FROM visitor_sketches WHERE ns = ? AND day = ?",
        ).run(t - back, ns, t - 1);
      db.close();

      const second = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "1", EDGECOUNT_DAYS: "500" },
      });
      try {
        await visit(second, `/v1/counters/${ns}/k/incr?unique=1`, "192.0.2.5");
        // The oldest day a read may ask for is the oldest kept.
        const oldest = await second.fetch(
          `/v1/counters/${ns}/k/days?from=${shifted(today, -499)}&to=${shifted(today, -499)}`,
        );
        expect((await oldest.json()).days).toEqual([
          { date: shifted(today, -499), count: 1 },
        ]);
        const older = await second.fetch(
          `/v1/counters/${ns}/k/days?from=${shifted(today, -500)}&to=${shifted(today, -499)}`,
        );
        expect(older.status).toBe(400);
      } finally {
        await second.stop();
      }
      db = new DatabaseSync(shardDatabase(persistDir));
      const days = db
        .prepare("SELECT day FROM counter_days WHERE ns = ? ORDER BY day")
        .all(ns)
        .map((row: { day: number }) => t - row.day);
      const sketches = db
        .prepare("SELECT day FROM visitor_sketches WHERE ns = ? ORDER BY day")
        .all(ns)
        .map((row: { day: number }) => t - row.day);
      db.close();
      // Days back from today: 500 and more are gone (a day 500 back is past the 500 kept,
      // today included), sketches 400 and more, whatever EDGECOUNT_DAYS says.
      expect(days).toEqual([499, 450, 10, 1]);
      expect(sketches).toEqual([399, 10, 1, 0]);
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });

  it("moves each counter's days and visitors with it when the shard count changes", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-days-move-"));
    const ns = freshNamespace("moved");
    const keys = Array.from({ length: 24 }, (_, i) => `page-${i}`);
    const read = async (svc: Service) =>
      Promise.all(
        keys.map(async (key) =>
          (
            await svc.fetch(`/v1/counters/${ns}/${key}/days?period=7d&unique=1`)
          ).json(),
        ),
      );
    try {
      const under4 = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "4" },
      });
      for (const [i, key] of keys.entries()) {
        for (let v = 0; v <= i % 4; v++) {
          await visit(
            under4,
            `/v1/counters/${ns}/${key}/incr?unique=1`,
            `192.0.2.${v}`,
          );
        }
      }
      await under4.stop();
      // Give every counter a finished day too, the day before yesterday, as the shard stores
      // one when a count of a later day comes.
      const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite");
      const files = readdirSync(persistDir, {
        recursive: true,
        encoding: "utf8",
      }).filter((file) => /Shard\/[0-9a-f]{64}\.sqlite$/.test(file));
      for (const file of files) {
        const db = new DatabaseSync(join(persistDir, file));
        db.prepare(
          "INSERT INTO counter_days (ns, key, day, count) SELECT ns, key, day - 2, 5 FROM counters WHERE ns = ?",
        ).run(ns);
        db.close();
      }
      const again4 = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "4" },
      });
      const before = await read(again4);
      await again4.stop();
      expect(
        before.every(
          (b) =>
            b.days.filter((d: { count: number }) => d.count > 0).length === 2,
        ),
      ).toBe(true);

      const under8 = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "8", EDGECOUNT_SHARDS_FROM: "4" },
      });
      try {
        let moving = -1;
        for (let i = 0; i < 600 && moving !== 0; i++) {
          moving = (await (await under8.fetch("/v1/stats")).json()).totals
            .keys_to_move;
          if (moving !== 0) await new Promise((r) => setTimeout(r, 100));
        }
        expect(moving).toBe(0);
        expect(await read(under8)).toEqual(before);
      } finally {
        await under8.stop();
      }
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });

  it("imports a line's days over a counter's, keeping the days the line does not carry", async () => {
    const ns = freshNamespace("imported");
    await visit(service, `/v1/counters/${ns}/k/incr?unique=1`, "192.0.2.1");
    const before = await (
      await service.fetch(`/v1/counters/${ns}/k/days?period=today`)
    ).json();
    const today = before.to;
    const day = Math.round(Date.parse(`${today}T00:00:00Z`) / 86_400_000);
    const line = JSON.stringify({
      ns,
      key: "k",
      counter: { value: 100, version: 1, today: { day, count: 7 } },
      days: [{ day: day - 1, count: 3 }],
    });
    const imported = await service.fetch("/v1/import", {
      method: "POST",
      body: `${line}\n`,
    });
    expect(imported.status).toBe(200);
    expect(await imported.text()).toContain('"ok":true');
    const after = await (
      await service.fetch(`/v1/counters/${ns}/k/days?period=2d&unique=1`)
    ).json();
    expect([after.value, after.count]).toEqual([100, 10]);
    expect(after.days.map((d: { count: number }) => d.count)).toEqual([3, 7]);
    // The visitor's sketch of today was not in the line: it stays.
    expect(after.uniques).toBe(1);
    const exported = await (await service.fetch(`/v1/export?ns=${ns}`)).text();
    expect(exported).toContain(`"days":[{"day":${day - 1},"count":3}]`);
    expect(exported).toContain('"sketches":[');
  });

  it("takes a counter's days and visitors away with it when it is deleted", async () => {
    const ns = freshNamespace("deleted");
    await visit(service, `/v1/counters/${ns}/gone/incr?unique=1`, "192.0.2.9");
    await service.fetch(`/v1/counters/${ns}/gone`, { method: "DELETE" });
    const body = await (
      await service.fetch(`/v1/counters/${ns}/gone/days?period=7d&unique=1`)
    ).json();
    expect([body.exists, body.count, body.uniques]).toEqual([false, 0, 0]);
  });
});
