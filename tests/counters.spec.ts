// The counter routes of API v1: every happy path, exact 64-bit values, text/plain, TTLs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

const json = (value: unknown) => ({
  method: "PUT",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(value),
});

describe("counters", () => {
  it("reads a never-written counter as 0 that does not exist", async () => {
    const ns = freshNamespace("read");
    const response = await service.fetch(`/v1/counters/${ns}/home`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe(
      "application/json; charset=utf-8",
    );
    expect(response.headers.get("cache-control")).toBe("no-cache");
    expect(await response.json()).toEqual({
      ns,
      key: "home",
      value: 0,
      exists: false,
    });
  });

  it("increments, decrements, sets and deletes", async () => {
    const ns = freshNamespace("crud");
    const base = `/v1/counters/${ns}/likes`;
    let response = await service.fetch(`${base}/incr`, { method: "POST" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      ns,
      key: "likes",
      value: 1,
      exists: true,
    });
    response = await service.fetch(`${base}/incr?by=10`, { method: "POST" });
    expect((await response.json()).value).toBe(11);
    response = await service.fetch(`${base}/decr?by=4`, { method: "POST" });
    expect((await response.json()).value).toBe(7);
    response = await service.fetch(`${base}/decr`, { method: "POST" });
    expect((await response.json()).value).toBe(6);
    response = await service.fetch(`${base}/incr?by=-2`, { method: "POST" });
    expect((await response.json()).value).toBe(4);
    response = await service.fetch(base, json({ value: -40 }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      ns,
      key: "likes",
      value: -40,
      exists: true,
    });
    expect(await (await service.fetch(base)).json()).toEqual({
      ns,
      key: "likes",
      value: -40,
      exists: true,
    });
    response = await service.fetch(base, { method: "DELETE" });
    expect(await response.json()).toEqual({ deleted: true });
    response = await service.fetch(base, { method: "DELETE" });
    expect(await response.json()).toEqual({ deleted: false });
    expect(await (await service.fetch(base)).json()).toEqual({
      ns,
      key: "likes",
      value: 0,
      exists: false,
    });
  });

  it("names the owning shard on every counter response", async () => {
    const ns = freshNamespace("shard");
    for (const path of [`/v1/counters/${ns}/k`, `/v1/counters/${ns}/k/incr`]) {
      const response = await service.fetch(path, {
        method: path.endsWith("incr") ? "POST" : "GET",
      });
      const shard = Number(response.headers.get("x-edgecount-shard"));
      expect(shard).toBeGreaterThanOrEqual(0);
      expect(shard).toBeLessThan(16);
    }
  });

  it("keeps values above 2^53 exact in JSON and text", async () => {
    const ns = freshNamespace("big");
    const big = 9007199254740993n; // 2^53 + 1: a double cannot hold it
    const response = await service.fetch(`/v1/counters/${ns}/n`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: `{"value": ${big}}`,
    });
    expect(exactValue(await response.text())).toBe(big);
    const incr = await service.fetch(`/v1/counters/${ns}/n/incr?by=2`, {
      method: "POST",
    });
    expect(exactValue(await incr.text())).toBe(big + 2n);
    expect(await service.value(ns, "n")).toBe(big + 2n);
  });

  it("reaches both ends of the signed 64-bit range", async () => {
    const ns = freshNamespace("ends");
    const max = 9223372036854775807n;
    const min = -9223372036854775808n;
    await service.fetch(`/v1/counters/${ns}/top/incr?by=${max}`, {
      method: "POST",
    });
    expect(await service.value(ns, "top")).toBe(max);
    await service.fetch(`/v1/counters/${ns}/bottom/decr?by=${max}`, {
      method: "POST",
    });
    await service.fetch(`/v1/counters/${ns}/bottom/decr`, { method: "POST" });
    expect(await service.value(ns, "bottom")).toBe(min);
  });

  it("reads a whole number written as a float (5.0) as that integer", async () => {
    const ns = freshNamespace("floaty");
    const put = await service.fetch(`/v1/counters/${ns}/k`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: '{"value":5.0}',
    });
    expect(put.status).toBe(200);
    expect(await service.value(ns, "k")).toBe(5n);
  });

  it("answers bare digits for Accept: text/plain", async () => {
    const ns = freshNamespace("text");
    const response = await service.fetch(`/v1/counters/${ns}/k/incr?by=42`, {
      method: "POST",
      headers: { accept: "text/plain" },
    });
    expect(response.headers.get("content-type")).toBe(
      "text/plain; charset=utf-8",
    );
    expect(await response.text()).toBe("42");
  });

  it("keeps keys with slashes, spaces and unicode apart", async () => {
    const ns = freshNamespace("keys");
    const keys = ["a/b", "a b", "café", "a%b", "...", "incr"];
    for (const [i, key] of keys.entries()) {
      await service.fetch(
        `/v1/counters/${ns}/${encodeURIComponent(key)}/incr?by=${i + 1}`,
        {
          method: "POST",
        },
      );
    }
    for (const [i, key] of keys.entries()) {
      const response = await service.fetch(
        `/v1/counters/${ns}/${encodeURIComponent(key)}`,
      );
      expect(await response.json()).toEqual({
        ns,
        key,
        value: i + 1,
        exists: true,
      });
    }
  });

  it("expires a counter TTL seconds after its last write", async () => {
    const ns = freshNamespace("ttl");
    // The counter is there until its second is up: read within it, that is, on a run where
    // the write and the read took less than the second (tried again, on another key, if not).
    let key = "";
    let value = 0n;
    for (let attempt = 0; attempt < 5; attempt++) {
      key = `t${attempt}`;
      const sent = Date.now();
      await service.fetch(`/v1/counters/${ns}/${key}/incr?ttl=1`, {
        method: "POST",
      });
      value = await service.value(ns, key);
      if (Date.now() - sent < 1_000) break;
    }
    expect(value).toBe(1n);
    // Counted from when the write was answered, its second is over.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const response = await service.fetch(`/v1/counters/${ns}/${key}`);
    expect(await response.json()).toEqual({
      ns,
      key,
      value: 0,
      exists: false,
    });
  });

  it("marks writes as never cacheable", async () => {
    const ns = freshNamespace("nostore");
    const response = await service.fetch(`/v1/counters/${ns}/k/incr`, {
      method: "POST",
    });
    expect(response.headers.get("cache-control")).toBe("no-store");
  });
});
