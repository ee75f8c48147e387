// Idempotency keys: a repeat returns the first answer without applying again, also after a
// restart; the same key with a different request is refused.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

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
