// Every bad-input rule of DESIGN.md: the right 4xx, the right code, and nothing changed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendHead } from "./raw-http";
import { freshNamespace, startService, type Service } from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

interface Case {
  name: string;
  method?: string;
  /** Path with {c} standing for the guarded counter's `/v1/counters/ns/key` and {ns} for its
   * namespace (also in the body), so a case aimed at it would show if it changed it. */
  path: string;
  body?: string;
  headers?: Record<string, string>;
  status: number;
  code: string;
}

const MAX = "9223372036854775807";
const MIN = "-9223372036854775808";
const cases: Case[] = [
  {
    name: "namespace with a space",
    path: "/v1/counters/bad%20ns/k",
    status: 400,
    code: "invalid_namespace",
  },
  {
    name: "namespace with a bang",
    path: "/v1/counters/a!b/k/incr",
    method: "POST",
    status: 400,
    code: "invalid_namespace",
  },
  {
    name: "namespace of 65 characters",
    path: `/v1/counters/${"n".repeat(65)}/k`,
    status: 400,
    code: "invalid_namespace",
  },
  {
    name: "empty namespace",
    path: "/v1/counters//k",
    status: 400,
    code: "invalid_namespace",
  },
  {
    name: "empty key",
    path: "/v1/counters/ns/",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "key of 257 bytes",
    path: `/v1/counters/ns/${"k".repeat(257)}`,
    status: 400,
    code: "invalid_key",
  },
  {
    name: "key with a control character",
    path: "/v1/counters/ns/a%00b",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "key with a stray percent",
    path: "/v1/counters/ns/a%zz/incr",
    method: "POST",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "key that is not UTF-8",
    path: "/v1/counters/ns/%FF/incr",
    method: "POST",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "by that is not a number",
    path: "{c}/incr?by=abc",
    method: "POST",
    status: 400,
    code: "invalid_number",
  },
  {
    name: "by with a fraction",
    path: "{c}/incr?by=1.5",
    method: "POST",
    status: 400,
    code: "invalid_number",
  },
  {
    name: "by that is empty",
    path: "{c}/decr?by=",
    method: "POST",
    status: 400,
    code: "invalid_number",
  },
  {
    name: "by given twice",
    path: "{c}/incr?by=1&by=2",
    method: "POST",
    status: 400,
    code: "duplicate_parameter",
  },
  {
    name: "by past i64",
    path: "{c}/incr?by=9223372036854775808",
    method: "POST",
    status: 422,
    code: "overflow",
  },
  {
    name: "ttl of zero",
    path: "{c}/incr?ttl=0",
    method: "POST",
    status: 400,
    code: "invalid_ttl",
  },
  {
    name: "negative ttl",
    path: "{c}/incr?ttl=-5",
    method: "POST",
    status: 400,
    code: "invalid_ttl",
  },
  {
    name: "bad consistency",
    path: "{c}?consistency=sometimes",
    status: 400,
    code: "invalid_parameter",
  },
  {
    name: "increment past the maximum",
    path: `{c}/incr?by=${MAX}`,
    method: "POST",
    status: 422,
    code: "overflow",
  },
  {
    name: "decrement past the minimum",
    path: "{c}/decr",
    method: "POST",
    status: 422,
    code: "overflow",
  },
  {
    name: "malformed JSON",
    path: "{c}",
    method: "PUT",
    body: "{",
    status: 400,
    code: "invalid_body",
  },
  {
    name: "empty body",
    path: "{c}",
    method: "PUT",
    body: "",
    status: 400,
    code: "invalid_body",
  },
  {
    name: "value as a string",
    path: "{c}",
    method: "PUT",
    body: '{"value":"1"}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "value with a fraction",
    path: "{c}",
    method: "PUT",
    body: '{"value":1.5}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "missing value",
    path: "{c}",
    method: "PUT",
    body: "{}",
    status: 400,
    code: "invalid_body",
  },
  {
    name: "value given twice",
    path: "{c}",
    method: "PUT",
    body: '{"value":1,"value":2}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "unknown field",
    path: "{c}",
    method: "PUT",
    body: '{"value":1,"x":2}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "deeply nested value",
    path: "{c}",
    method: "PUT",
    body: `{"value":${"[".repeat(5000)}${"]".repeat(5000)}}`,
    status: 413,
    code: "payload_too_large",
  },
  {
    name: "nesting under the size limit",
    path: "{c}",
    method: "PUT",
    body: `{"value":${"[".repeat(1000)}${"]".repeat(1000)}}`,
    status: 400,
    code: "invalid_body",
  },
  {
    name: "value past i64",
    path: "{c}",
    method: "PUT",
    body: `{"value":${MAX}0}`,
    status: 422,
    code: "overflow",
  },
  {
    name: "value below i64",
    path: "{c}",
    method: "PUT",
    body: '{"value":-9223372036854775809}',
    status: 422,
    code: "overflow",
  },
  {
    name: "body that is not JSON",
    path: "{c}",
    method: "PUT",
    body: "value=1",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    status: 415,
    code: "unsupported_media_type",
  },
  {
    name: "body over 4 KiB",
    path: "{c}",
    method: "PUT",
    body: `{"value":1${" ".repeat(5000)}}`,
    status: 413,
    code: "payload_too_large",
  },
  {
    name: "POST to a counter",
    path: "{c}",
    method: "POST",
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "PATCH to a counter",
    path: "{c}",
    method: "PATCH",
    body: "{}",
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "GET on incr",
    path: "{c}/incr",
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "DELETE on decr",
    path: "{c}/decr",
    method: "DELETE",
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "key that is a percent-encoded NUL",
    path: "/v1/counters/ns/%00",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "key with an overlong UTF-8 encoding",
    path: "/v1/counters/ns/%C0%AF",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "key with a truncated percent-encoding",
    path: "/v1/counters/ns/ab%4",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "by in hexadecimal",
    path: "{c}/incr?by=0x10",
    method: "POST",
    status: 400,
    code: "invalid_number",
  },
  {
    name: "by in exponent form",
    path: "{c}/incr?by=1e3",
    method: "POST",
    status: 400,
    code: "invalid_number",
  },
  {
    name: "ttl past ten years",
    path: "{c}/incr?ttl=315360001",
    method: "POST",
    status: 400,
    code: "invalid_ttl",
  },
  {
    name: "Idempotency-Key of 129 characters",
    path: "{c}/incr",
    method: "POST",
    headers: { "idempotency-key": "i".repeat(129) },
    status: 400,
    code: "invalid_idempotency_key",
  },
  {
    name: "Idempotency-Key with a control character",
    path: "{c}/incr",
    method: "POST",
    headers: { "idempotency-key": "a\tb" },
    status: 400,
    code: "invalid_idempotency_key",
  },
  {
    name: "content type that only starts like JSON",
    path: "{c}",
    method: "PUT",
    body: '{"value":1}',
    headers: { "content-type": "application/jsonx" },
    status: 415,
    code: "unsupported_media_type",
  },
  {
    name: "body that is a JSON array",
    path: "{c}",
    method: "PUT",
    body: "[1]",
    status: 400,
    code: "invalid_body",
  },
  {
    name: "body with a trailing second document",
    path: "{c}",
    method: "PUT",
    body: '{"value":1}{"value":2}',
    status: 400,
    code: "invalid_body",
  },
  {
    // The runtime itself answers methods it does not know (FROB) with 501; WebDAV's reach us.
    name: "PROPFIND on a counter",
    path: "{c}",
    method: "PROPFIND",
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "PATCH on the batch route",
    path: "/v1/batch",
    method: "PATCH",
    body: '{"ops":[]}',
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "batch that is not an object",
    path: "/v1/batch",
    method: "POST",
    body: '[{"op":"incr","ns":"{ns}","key":"guarded"}]',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "batch whose ops are not a list",
    path: "/v1/batch",
    method: "POST",
    body: '{"ops":{"op":"incr","ns":"{ns}","key":"guarded"}}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "batch with ops given twice",
    path: "/v1/batch",
    method: "POST",
    body: '{"ops":[],"ops":[{"op":"incr","ns":"{ns}","key":"guarded"}]}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "batch nested 5000 deep",
    path: "/v1/batch",
    method: "POST",
    body: `{"ops":[{"op":"incr","ns":"{ns}","key":"guarded"}],"x":${"[".repeat(5000)}${"]".repeat(5000)}}`,
    status: 400,
    code: "invalid_body",
  },
  {
    name: "batch of 1001 ops",
    path: "/v1/batch",
    method: "POST",
    body: JSON.stringify({
      ops: Array.from({ length: 1001 }, () => ({
        op: "incr",
        ns: "{ns}",
        key: "guarded",
      })),
    }),
    status: 413,
    code: "too_many_ops",
  },
  {
    name: "batch sent as a form",
    path: "/v1/batch",
    method: "POST",
    body: '{"ops":[{"op":"incr","ns":"{ns}","key":"guarded"}]}',
    headers: { "content-type": "application/x-www-form-urlencoded" },
    status: 415,
    code: "unsupported_media_type",
  },
  {
    name: "empty cache key",
    path: "/v1/cache/{ns}/",
    method: "PUT",
    body: "v",
    status: 400,
    code: "invalid_key",
  },
  {
    name: "counter value with a fraction in exponent form",
    path: "{c}",
    method: "PUT",
    body: '{"value":2.5e0}',
    status: 400,
    code: "invalid_body",
  },
  {
    name: "cache value over 1 MiB",
    path: "/v1/cache/{ns}/guarded",
    method: "PUT",
    body: "v".repeat(1024 * 1024 + 1),
    headers: { "content-type": "application/octet-stream" },
    status: 413,
    code: "payload_too_large",
  },
  {
    name: "cache entry with a bad ttl",
    path: "/v1/cache/{ns}/guarded?ttl=soon",
    method: "PUT",
    body: "v",
    status: 400,
    code: "invalid_ttl",
  },
  {
    name: "unknown route",
    path: "/v1/nothing-here",
    status: 404,
    code: "not_found",
  },
  {
    name: "extra path segment",
    path: "{c}/incr/more",
    method: "POST",
    status: 404,
    code: "not_found",
  },
];

describe("bad input", () => {
  for (const c of cases) {
    it(`${c.name}: ${c.status} ${c.code}, nothing changed`, async () => {
      const ns = freshNamespace("bad");
      const guarded = `/v1/counters/${ns}/guarded`;
      const initial = c.name.includes("maximum")
        ? MAX
        : c.name.includes("minimum")
          ? MIN
          : "5";
      const seed = await service.fetch(guarded, {
        method: "PUT",
        body: `{"value":${initial}}`,
      });
      expect(seed.status).toBe(200);

      const response = await service.fetch(
        c.path.replace("{c}", guarded).replace("{ns}", ns),
        {
          method: c.method ?? "GET",
          headers: { "content-type": "application/json", ...c.headers },
          body: c.body?.replaceAll("{ns}", ns),
        },
      );
      expect(response.status).toBe(c.status);
      expect(response.headers.get("content-type")).toBe(
        "application/json; charset=utf-8",
      );
      const body = await response.json();
      expect(body.error.code).toBe(c.code);
      expect(body.error.message).toMatch(/^[A-Z].*\.$/);
      if (c.status === 405) {
        expect(response.headers.get("allow")).toMatch(/OPTIONS$/);
      }
      if (c.path.startsWith("{c}") && c.status !== 404) {
        // Every answer on a counter route names its shard, refusals included.
        expect(response.headers.get("x-edgecount-shard")).toMatch(/^\d+$/);
      }
      expect(await service.value(ns, "guarded")).toBe(BigInt(initial));
    });
  }

  it("refuses a batch body past 8 MiB sent without a length (413), applying none of it", async () => {
    const ns = freshNamespace("bad-huge");
    const head = new TextEncoder().encode(
      `{"ops":[{"op":"incr","ns":"${ns}","key":"k"}],"pad":"`,
    );
    const chunk = new Uint8Array(1024 * 1024).fill(0x70);
    let sent = 0;
    // Streamed, so the request has no Content-Length and the limit must hold while reading.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(head);
        if (sent < 9) controller.enqueue(chunk);
        else {
          controller.enqueue(new TextEncoder().encode('"}'));
          controller.close();
        }
        sent++;
      },
    });
    const response = await service.fetch("/v1/batch", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      duplex: "half",
    } as RequestInit);
    expect(response.status).toBe(413);
    expect((await response.json()).error.code).toBe("payload_too_large");
    expect(await service.value(ns, "k")).toBe(0n);
  });

  it("refuses an Idempotency-Key sent empty, which is not one left out", async () => {
    // fetch leaves a header with an empty value out, so this one is sent over a socket.
    const served = await startService({ listen: true });
    try {
      const ns = freshNamespace();
      const incr = (header: string) =>
        sendHead(
          served.url ?? "",
          `POST /v1/counters/${ns}/k/incr HTTP/1.1\r\nHost: edgecount.test${header}`,
        );
      expect(await incr("\r\nIdempotency-Key:")).toBe(400);
      expect(await incr("")).toBe(200);
      const read = await served.fetch(`/v1/counters/${ns}/k`);
      expect(((await read.json()) as { value: number }).value).toBe(1);
    } finally {
      await served.stop();
    }
  });

  it("answers a 405 with the methods the route accepts", async () => {
    const response = await service.fetch("/v1/counters/ns/k", {
      method: "POST",
    });
    expect(response.headers.get("allow")).toBe("GET, PUT, DELETE, OPTIONS");
  });
});
