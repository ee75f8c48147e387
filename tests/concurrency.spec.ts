// Concurrent writes to one key: none lost, none applied twice, each caller its own value.
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  exactValue,
  freshNamespace,
  startService,
  type Service,
} from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

it("1,000 concurrent increments on one key give exactly 1,000 and distinct values", async () => {
  const ns = freshNamespace("race");
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
  expect(await service.value(ns, "hot")).toBe(1_000n);
});
