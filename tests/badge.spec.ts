// The SVG badge (reading, counting, label and colour, caching) and the documents the worker
// serves: the demo page, the browser client and the OpenAPI description.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

describe("badge", () => {
  it("shows a counter's value with a label, cacheable as a read", async () => {
    const ns = freshNamespace("badge");
    await service.fetch(`/v1/counters/${ns}/home/incr?by=1234`, {
      method: "POST",
    });
    const badge = await service.fetch(`/v1/badge/${ns}/home.svg`);
    expect(badge.status).toBe(200);
    expect(badge.headers.get("content-type")).toBe(
      "image/svg+xml; charset=utf-8",
    );
    expect(badge.headers.get("cache-control")).toBe("no-cache");
    expect(badge.headers.get("x-edgecount-shard")).toMatch(/^\d+$/);
    const svg = await badge.text();
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(svg).toContain("<title>views: 1234</title>");
    // A badge that was already fetched revalidates to 304.
    const again = await service.fetch(`/v1/badge/${ns}/home.svg`, {
      headers: { "if-none-match": badge.headers.get("etag")! },
    });
    expect(again.status).toBe(304);
  });

  it("counts a view with incr=1, never cached, and takes label and colour", async () => {
    const ns = freshNamespace("badge-incr");
    const url = `/v1/badge/${ns}/post%2F7.svg?incr=1&label=readers&color=blue`;
    for (const expected of [1, 2, 3]) {
      const badge = await service.fetch(url);
      expect(badge.status).toBe(200);
      expect(badge.headers.get("cache-control")).toBe("no-store");
      const svg = await badge.text();
      expect(svg).toContain(`<title>readers: ${expected}</title>`);
      expect(svg).toContain('fill="#007ec6"');
    }
    expect(await service.value(ns, "post/7")).toBe(3n);
  });

  it("escapes the label", async () => {
    const ns = freshNamespace("badge-xss");
    const label = encodeURIComponent('<script>alert("x")</script>');
    const svg = await (
      await service.fetch(`/v1/badge/${ns}/k.svg?label=${label}`)
    ).text();
    expect(svg).not.toContain("<script>");
    expect(svg).toContain("&lt;script&gt;");
  });

  it("refuses bad queries and names with JSON errors, counting nothing", async () => {
    const ns = freshNamespace("badge-bad");
    for (const [path, status, code] of [
      [`/v1/badge/${ns}/k.svg?incr=1&color=url(x)`, 400, "invalid_parameter"],
      [`/v1/badge/${ns}/k.svg?incr=1&label=`, 400, "invalid_parameter"],
      [`/v1/badge/${ns}/k.svg?incr=2`, 400, "invalid_parameter"],
      [`/v1/badge/${ns}/k.png?incr=1`, 404, "not_found"],
      [`/v1/badge/bad%20ns/k.svg?incr=1`, 400, "invalid_namespace"],
    ] as const) {
      const response = await service.fetch(path);
      expect(response.status, path).toBe(status);
      expect((await response.json()).error.code).toBe(code);
    }
    const malformedKey = await service.fetch(`/v1/badge/${ns}/k.svg`, {
      headers: { "idempotency-key": "has space" },
    });
    expect(malformedKey.status).toBe(400);
    expect((await malformedKey.json()).error.code).toBe(
      "invalid_idempotency_key",
    );
    const post = await service.fetch(`/v1/badge/${ns}/k.svg`, {
      method: "POST",
    });
    expect(post.status).toBe(405);
    expect(await service.value(ns, "k")).toBe(0n);
  });

  it("needs a write token to count when tokens are set, but reads stay public", async () => {
    const guarded = await startService({
      vars: { EDGECOUNT_WRITE_TOKENS: "badge-writer-1" },
    });
    try {
      const ns = freshNamespace("badge-acl");
      const counted = await guarded.fetch(`/v1/badge/${ns}/k.svg?incr=1`);
      expect(counted.status).toBe(401);
      expect((await guarded.fetch(`/v1/badge/${ns}/k.svg`)).status).toBe(200);
      expect(await guarded.value(ns, "k")).toBe(0n);
    } finally {
      await guarded.stop();
    }
  });
});

describe("documents", () => {
  it("serves the browser client as a long-cached ES module", async () => {
    const client = await service.fetch("/v1/client.js");
    expect(client.status).toBe(200);
    expect(client.headers.get("content-type")).toBe(
      "text/javascript; charset=utf-8",
    );
    expect(client.headers.get("cache-control")).toContain("max-age=604800");
    expect(await client.text()).toContain("createClient");
    const again = await service.fetch("/v1/client.js", {
      headers: { "if-none-match": client.headers.get("etag")! },
    });
    expect(again.status).toBe(304);
  });

  it("serves the OpenAPI description, and the demo page only when EDGECOUNT_DEMO asks", async () => {
    const spec = await service.fetch("/v1/openapi.json");
    expect(spec.status).toBe(200);
    expect((await spec.json()).openapi).toMatch(/^3\.1\./);
    for (const path of ["/", "/demo.js"]) {
      const hidden = await service.fetch(path);
      expect(hidden.status, path).toBe(404);
      expect((await hidden.json()).error.code).toBe("not_found");
    }
    const demo = await startService({ vars: { EDGECOUNT_DEMO: "1" } });
    try {
      await showsTheDemo(demo);
    } finally {
      await demo.stop();
    }
  });
});

async function showsTheDemo(service: Service) {
  const page = await service.fetch("/");
  expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(page.headers.get("content-security-policy")).toContain(
    "default-src 'self'",
  );
  expect(await page.text()).toContain('src="/demo.js"');
  expect((await service.fetch("/demo.js")).status).toBe(200);
}
