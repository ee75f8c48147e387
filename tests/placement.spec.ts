// A changed EDGECOUNT_SHARDS is refused, not obeyed: under another count most keys would map to
// shards that never held them and read 0. The first count is kept by shard-0; every request of
// an isolate configured otherwise is a 500 `misconfigured` naming both counts, and changes
// nothing.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freshNamespace, startService } from "./service";

const persistDir = mkdtempSync(join(tmpdir(), "edgecount-placement-"));
afterAll(() => rmSync(persistDir, { recursive: true, force: true }));

it("refuses a changed shard count on every route until it is set back", async () => {
  const ns = freshNamespace("placed");
  const keys = Array.from({ length: 20 }, (_, i) => `key-${i}`);
  const first = await startService({
    persistDir,
    vars: { EDGECOUNT_SHARDS: "4" },
  });
  for (const key of keys) {
    expect(
      (
        await first.fetch(`/v1/counters/${ns}/${key}/incr?by=3`, {
          method: "POST",
        })
      ).status,
    ).toBe(200);
  }
  await first.stop();

  const changed = await startService({
    persistDir,
    vars: { EDGECOUNT_SHARDS: "7" },
  });
  const attempts: [string, RequestInit?][] = [
    [`/v1/counters/${ns}/${keys[0]}`],
    [`/v1/counters/${ns}/${keys[1]}/incr`, { method: "POST" }],
    [`/v1/counters/${ns}/${keys[2]}/incr?async=1`, { method: "POST" }],
    [
      "/v1/batch",
      {
        method: "POST",
        body: JSON.stringify({ ops: [{ op: "incr", ns, key: keys[3] }] }),
      },
    ],
    ["/v1/stats", {}],
  ];
  for (const [path, init] of attempts) {
    const refused = await changed.fetch(path, init);
    expect(refused.status, path).toBe(500);
    const body = await refused.json();
    expect(body.error.code, path).toBe("misconfigured");
    expect(body.error.message).toContain("EDGECOUNT_SHARDS=4");
    expect(body.error.message).toContain("EDGECOUNT_SHARDS=7");
  }
  const compat = await changed.fetch(`/hit/${ns}/${keys[4]}`);
  expect(compat.status).toBe(500);
  expect((await compat.json()).error).toContain("EDGECOUNT_SHARDS=4");
  // Health needs no shard, and says the service is up.
  expect((await changed.fetch("/v1/health")).status).toBe(200);
  await changed.stop();

  const back = await startService({
    persistDir,
    vars: { EDGECOUNT_SHARDS: "4" },
  });
  for (const key of keys) expect(await back.value(ns, key)).toBe(3n);
  await back.stop();
});
