// The Wasm build places keys exactly as the committed known-answer vectors say.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startService, type Service } from "./service";

interface Vector {
  ns: string;
  key: string;
  shards: number;
  shard: number;
}
const { vectors } = JSON.parse(
  readFileSync("core/tests/vectors/partition.json", "utf8"),
) as {
  vectors: Vector[];
};

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

it("answers each vector's key from the vector's shard (16 shards)", async () => {
  const sixteen = vectors.filter((v) => v.shards === 16);
  expect(sixteen.length).toBeGreaterThanOrEqual(10);
  for (const v of sixteen) {
    const response = await service.fetch(
      `/v1/counters/${v.ns}/${encodeURIComponent(v.key)}`,
    );
    expect(response.status, `${v.ns}/${v.key}`).toBe(200);
    expect(response.headers.get("x-edgecount-shard"), `${v.ns}/${v.key}`).toBe(
      String(v.shard),
    );
  }
});

it("follows EDGECOUNT_SHARDS", async () => {
  const two = await startService({ vars: { EDGECOUNT_SHARDS: "2" } });
  try {
    for (const v of vectors.filter((v) => v.shards === 2)) {
      const response = await two.fetch(
        `/v1/counters/${v.ns}/${encodeURIComponent(v.key)}`,
      );
      expect(response.headers.get("x-edgecount-shard")).toBe(String(v.shard));
    }
    expect((await (await two.fetch("/v1/health")).json()).shards).toBe(2);
  } finally {
    await two.stop();
  }
});
