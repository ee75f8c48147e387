// Acknowledged writes survive a restart of the runtime: a new workerd over the same state.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freshNamespace, startService } from "./service";

const persistDir = mkdtempSync(join(tmpdir(), "edgecount-restart-"));
afterAll(() => rmSync(persistDir, { recursive: true, force: true }));

it("keeps every acknowledged counter write and cache entry across a restart", async () => {
  const ns = freshNamespace("durable");
  const first = await startService({ persistDir });
  const keys = Array.from({ length: 40 }, (_, i) => `key-${i}`);
  await Promise.all(
    keys.map(async (key, i) => {
      const response = await first.fetch(
        `/v1/counters/${ns}/${key}/incr?by=${i + 1}`,
        {
          method: "POST",
        },
      );
      expect(response.status).toBe(200);
    }),
  );
  await first.fetch(`/v1/counters/${ns}/big`, {
    method: "PUT",
    body: '{"value":-9223372036854775808}',
  });
  await first.fetch(`/v1/counters/${ns}/key-0`, { method: "DELETE" });
  const blob = new Uint8Array([9, 8, 7, 0, 255]);
  const put = await first.fetch(`/v1/cache/${ns}/blob`, {
    method: "PUT",
    headers: { "content-type": "application/x-blob" },
    body: blob,
  });
  expect(put.status).toBe(204);
  await first.stop();

  const second = await startService({ persistDir });
  try {
    for (const [i, key] of keys.entries()) {
      expect(await second.value(ns, key)).toBe(i === 0 ? 0n : BigInt(i + 1));
    }
    expect(await second.value(ns, "big")).toBe(-9223372036854775808n);
    const gone = await second.fetch(`/v1/counters/${ns}/key-0`);
    expect((await gone.json()).exists).toBe(false);
    const entry = await second.fetch(`/v1/cache/${ns}/blob`);
    expect(entry.headers.get("content-type")).toBe("application/x-blob");
    expect(new Uint8Array(await entry.arrayBuffer())).toEqual(blob);
  } finally {
    await second.stop();
  }
});
