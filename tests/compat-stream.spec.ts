// Abacus's /stream/:ns/:key: server-sent events of a counter's value from its shard, over real
// HTTP (the test client buffers bodies, so streams are read through the listening port).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

// One shard, so every stream here counts against the same shard's bound; a keepalive every
// second, so a reader that hangs up is noticed within a second or so.
const MAX_WATCHERS_PER_SHARD = 256;
let service: Service;
const options = {
  listen: true,
  vars: { EDGECOUNT_SHARDS: "1", EDGECOUNT_STREAM_KEEPALIVE: "1" },
};
beforeAll(async () => {
  service = await startService(options);
});
afterAll(() => service.stop());

const decoder = new TextDecoder();

async function open(path: string, on: Service = service, address?: string) {
  const headers: Record<string, string> = address
    ? { "cf-connecting-ip": address }
    : {};
  const response = await fetch(on.url + path, { headers });
  return { response, reader: response.body!.getReader() };
}

/** The next chunk as sent, keepalives included. */
async function nextChunk(
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<string | null> {
  const { value, done } = await reader.read();
  return done ? null : decoder.decode(value);
}

/** The next data event, keepalive comments skipped; `null` at the end of the stream. */
async function nextEvent(
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<string | null> {
  for (;;) {
    const chunk = await nextChunk(reader);
    if (chunk === null) return null;
    const data = chunk.replaceAll(": keepalive\n\n", "");
    if (data !== "") return data;
  }
}

describe("/stream", () => {
  it("sends the value now and after each write, by any route, and ends when the counter is deleted", async () => {
    const ns = freshNamespace("stream");
    const made = await service.fetch(`/create/${ns}/live`, { method: "POST" });
    const { admin_key } = await made.json();
    const { response, reader } = await open(`/stream/${ns}/live`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("x-path")).toBe(`${ns}/live`);
    expect(await nextEvent(reader)).toBe('data: {"value":0}\n\n');
    await service.fetch(`/hit/${ns}/live`);
    expect(await nextEvent(reader)).toBe('data: {"value":1}\n\n');
    await service.fetch(`/v1/counters/${ns}/live/incr?by=41`, {
      method: "POST",
    });
    expect(await nextEvent(reader)).toBe('data: {"value":42}\n\n');
    await service.fetch(`/delete/${ns}/live?token=${admin_key}`, {
      method: "POST",
    });
    expect(await nextEvent(reader)).toBeNull();
  });

  it("sends a keepalive comment while the counter is quiet", async () => {
    const ns = freshNamespace("quiet");
    await service.fetch(`/hit/${ns}/calm`);
    const { reader } = await open(`/stream/${ns}/calm`);
    expect(await nextEvent(reader)).toBe('data: {"value":1}\n\n');
    expect(await nextChunk(reader)).toBe(": keepalive\n\n");
    await reader.cancel();
  });

  it("answers 404 for a counter that does not exist", async () => {
    const missing = await fetch(
      `${service.url}/stream/${freshNamespace("none")}/none`,
    );
    expect([missing.status, await missing.json()]).toEqual([
      404,
      { error: "Key not found" },
    ]);
  });

  it("serves at most its bound of streams per shard, and a reader that leaves frees its place", async () => {
    // A runtime of its own, so no reader of an earlier test holds a place.
    const own = await startService(options);
    const ns = freshNamespace("bound");
    await own.fetch(`/hit/${ns}/many`);
    const readers = [];
    for (let i = 0; i < MAX_WATCHERS_PER_SHARD; i++) {
      // Each from an address of its own: one client may hold only a few streams.
      const address = `10.0.${i >> 8}.${i & 255}`;
      const { response, reader } = await open(
        `/stream/${ns}/many`,
        own,
        address,
      );
      expect(response.status, `stream ${i}`).toBe(200);
      expect(await nextEvent(reader)).toBe('data: {"value":1}\n\n');
      readers.push(reader);
    }
    const refused = await fetch(`${own.url}/stream/${ns}/many`, {
      headers: { "cf-connecting-ip": "10.9.9.9" },
    });
    expect([refused.status, await refused.json()]).toEqual([
      429,
      { error: "Too many open streams; try again later." },
    ]);
    // Every open stream hears the next write.
    await own.fetch(`/hit/${ns}/many`);
    for (const reader of readers.slice(0, 5))
      expect(await nextEvent(reader)).toBe('data: {"value":2}\n\n');
    // A reader that hangs up is noticed at the stream's next write, a keepalive at the latest,
    // and its place is then free.
    await readers.pop()!.cancel();
    let reopened: Response | undefined;
    for (let attempt = 0; attempt < 100; attempt++) {
      reopened = await fetch(`${own.url}/stream/${ns}/many`, {
        headers: { "cf-connecting-ip": "10.9.9.9" },
      });
      if (reopened.status === 200) break;
      await reopened.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(reopened!.status).toBe(200);
    await reopened!.body!.cancel();
    await Promise.all(readers.map((reader) => reader.cancel()));
    await own.stop();
  }, 60_000);

  it("serves one client at most 8 streams of a shard, and another client still gets one", async () => {
    const own = await startService(options);
    const ns = freshNamespace("client");
    await own.fetch(`/hit/${ns}/kkk`);
    const readers = [];
    for (let i = 0; i < 8; i++) {
      const { response, reader } = await open(
        `/stream/${ns}/kkk`,
        own,
        "192.0.2.50",
      );
      expect(response.status, `stream ${i}`).toBe(200);
      readers.push(reader);
    }
    const ninth = await fetch(`${own.url}/stream/${ns}/kkk`, {
      headers: { "cf-connecting-ip": "192.0.2.50" },
    });
    expect([ninth.status, await ninth.json()]).toEqual([
      429,
      { error: "Too many open streams; try again later." },
    ]);
    // Another address is another client, with places of its own.
    const neighbour = await open(`/stream/${ns}/kkk`, own, "192.0.2.51");
    expect(neighbour.response.status).toBe(200);
    readers.push(neighbour.reader);
    await Promise.all(readers.map((reader) => reader.cancel()));
    await own.stop();
  });

  it("lets one client hold at most 32 streams through an isolate, over all shards", async () => {
    const many = await startService({
      ...options,
      vars: { ...options.vars, EDGECOUNT_SHARDS: "16" },
    });
    const ns = freshNamespace("spread");
    // Five keys on five shards: the shard's bound of 8 a client never binds here.
    const keys: string[] = [];
    const shards = new Set<string>();
    for (let i = 0; keys.length < 5; i++) {
      const hit = await many.fetch(`/v1/counters/${ns}/key${i}/incr`, {
        method: "POST",
      });
      const shard = hit.headers.get("x-edgecount-shard")!;
      if (!shards.has(shard)) {
        shards.add(shard);
        keys.push(`key${i}`);
      }
    }
    const readers = [];
    for (let i = 0; i < 32; i++) {
      const { response, reader } = await open(
        `/stream/${ns}/${keys[i % 4]}`,
        many,
        "192.0.2.60",
      );
      expect(response.status, `stream ${i}`).toBe(200);
      readers.push(reader);
    }
    const past = await fetch(`${many.url}/stream/${ns}/${keys[4]}`, {
      headers: { "cf-connecting-ip": "192.0.2.60" },
    });
    expect(past.status).toBe(429);
    await past.body?.cancel();
    await Promise.all(readers.map((reader) => reader.cancel()));
    await many.stop();
  });
});
