// Reads of a whole namespace (docs/dashboard.md): GET /v1/namespaces/:ns/days answers the
// namespace's views by day, /top its top keys of the period, both from every shard's part,
// checked here against the keys' own reads; bad queries are 400s that read nothing, a read
// is kept a few seconds, and private namespaces need a read token.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const READER = "reader-secret-ns";
const auth = { authorization: `Bearer ${READER}` };

/** Days since 1970-01-01 of a `yyyy-mm-dd` date. */
const dayOf = (date: string) =>
  Math.round(Date.parse(`${date}T00:00:00Z`) / 86_400_000);

let service: Service;
let today: string;
beforeAll(async () => {
  service = await startService({});
  const probe = await service.fetch(
    `/v1/counters/${freshNamespace("probe")}/k/days?period=today`,
  );
  today = (await probe.json()).to;
});
afterAll(() => service?.stop());

/** A namespace of `keys` keys, key i counted i + 1 times today and, through an import, 10 * i
 * times on each of the three days before. */
async function filled(keys: number): Promise<string> {
  const ns = freshNamespace("whole");
  const day = dayOf(today);
  const lines = Array.from({ length: keys }, (_, i) =>
    JSON.stringify({
      ns,
      key: `page-${i}`,
      counter: {
        value: 30 * i + i + 1,
        version: 1,
        today: { day, count: i + 1 },
      },
      days: [1, 2, 3].map((back) => ({ day: day - back, count: 10 * i })),
    }),
  );
  const imported = await service.fetch("/v1/import", {
    method: "POST",
    body: `${lines.join("\n")}\n`,
  });
  expect(imported.status).toBe(200);
  return ns;
}

describe("namespace reads", () => {
  it("answer the namespace's days and top keys as the keys' own reads add up", async () => {
    const ns = await filled(24);
    const days = await service.fetch(`/v1/namespaces/${ns}/days?period=7d`);
    expect(days.status).toBe(200);
    const body = await days.json();
    expect(body.days).toHaveLength(7);
    expect(body.to).toBe(today);
    // Each day the sum of the keys' days, read one by one.
    const perKey = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        service
          .fetch(`/v1/counters/${ns}/page-${i}/days?period=7d`)
          .then((r) => r.json()),
      ),
    );
    const summed = body.days.map((_: unknown, d: number) =>
      perKey.reduce((sum, read) => sum + read.days[d].count, 0),
    );
    expect(body.days.map((d: { count: number }) => d.count)).toEqual(summed);
    expect(summed.slice(-4)).toEqual([
      10 * 276,
      10 * 276,
      10 * 276,
      (24 * 25) / 2,
    ]);
    expect(body.count).toBe(3 * 10 * 276 + 300);
    expect(Number(days.headers.get("x-edgecount-rows-read"))).toBeGreaterThan(
      0,
    );

    const top = await (
      await service.fetch(`/v1/namespaces/${ns}/top?period=7d&limit=3`)
    ).json();
    expect(top.keys).toEqual([
      { key: "page-23", count: 30 * 23 + 24 },
      { key: "page-22", count: 30 * 22 + 23 },
      { key: "page-21", count: 30 * 21 + 22 },
    ]);
    const todayTop = await (
      await service.fetch(`/v1/namespaces/${ns}/top?period=today&limit=100`)
    ).json();
    expect(todayTop.keys).toHaveLength(24);
    expect(todayTop.count).toBe(300);
    const plain = await service.fetch(
      `/v1/namespaces/${ns}/days?period=today`,
      {
        headers: { accept: "text/plain" },
      },
    );
    expect(await plain.text()).toBe("300");
  });

  it("keep a read at most a few seconds: a count shows once it is over", async () => {
    const ns = await filled(2);
    const read = () => service.fetch(`/v1/namespaces/${ns}/days?period=today`);
    const first = await read();
    expect(first.headers.get("x-edgecount-kept")).toBe("false");
    const firstCount = (await first.json()).count;
    await service.fetch(`/v1/counters/${ns}/page-0/incr`, { method: "POST" });
    expect(first.headers.get("x-edgecount-rows-read")).not.toBe("0");
    const again = await read();
    // Kept (core/src/visits/namespace.rs tests when): a kept answer is the first read's and
    // cost the shards nothing; one made afresh has the count.
    const kept = again.headers.get("x-edgecount-kept") === "true";
    expect((await again.json()).count).toBe(kept ? firstCount : firstCount + 1);
    if (kept) expect(again.headers.get("x-edgecount-rows-read")).toBe("0");
    await expect
      .poll(async () => (await (await read()).json()).count, {
        timeout: 20_000,
        interval: 1_000,
      })
      .toBe(firstCount + 1);
  });

  it("refuse bad queries and names with a 400 and other methods with a 405", async () => {
    const ns = freshNamespace("bad");
    const refused = async (path: string, name: string) => {
      const response = await service.fetch(path);
      expect(response.status, path).toBe(400);
      expect((await response.json()).error.message, path).toContain(name);
    };
    await refused(`/v1/namespaces/${ns}/days?period=total`, "period");
    await refused(`/v1/namespaces/${ns}/days?period=401d`, "period");
    await refused(`/v1/namespaces/${ns}/top?limit=0`, "limit");
    await refused(`/v1/namespaces/${ns}/top?limit=101`, "limit");
    await refused(`/v1/namespaces/${ns}/top?limit=1&limit=2`, "limit");
    await refused(
      `/v1/namespaces/${ns}/days?from=2020-01-01&to=2020-01-02`,
      "period",
    );
    const badName = await service.fetch("/v1/namespaces/no%20space/days");
    expect(badName.status).toBe(400);
    expect((await badName.json()).error.code).toBe("invalid_namespace");
    const post = await service.fetch(`/v1/namespaces/${ns}/top`, {
      method: "POST",
    });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, OPTIONS");
  });

  it("need a read token unless the namespace is public, even where a key's reads are", async () => {
    const guarded = await startService({
      vars: {
        EDGECOUNT_ADMIN_TOKENS: "admin-secret-ns",
        EDGECOUNT_READ_TOKENS: `${READER},pages-reader@pages`,
        EDGECOUNT_PUBLIC_NAMESPACES: "pages",
      },
    });
    try {
      const shop = "/v1/namespaces/shop/top?period=today";
      // A named key of `shop` is public to read; the list of its keys is not.
      expect((await guarded.fetch("/v1/counters/shop/home")).status).toBe(200);
      expect((await guarded.fetch(shop)).status).toBe(401);
      expect(
        (
          await guarded.fetch(shop, {
            headers: { authorization: "Bearer pages-reader" },
          })
        ).status,
      ).toBe(403);
      const allowed = await guarded.fetch(shop, { headers: auth });
      expect(allowed.status).toBe(200);
      expect((await allowed.json()).keys).toEqual([]);
      const open = await guarded.fetch(
        "/v1/namespaces/pages/days?period=today",
      );
      expect(open.status).toBe(200);
    } finally {
      await guarded.stop();
    }
  });
});
