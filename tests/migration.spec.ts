// Changing the number of shards online: keys written under one count are moved to their homes
// under another while writers keep counting, through this deployment's isolates and the
// previous deployment's (which still place keys under the old count). Afterwards every counter
// is exact and every key is stored in exactly one shard.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { startService, type Service } from "./service";

const persistDir = mkdtempSync(join(tmpdir(), "edgecount-migration-"));
afterAll(() => rmSync(persistDir, { recursive: true, force: true }));

const NS = "moving";
const RULED_NS = "moving-ruled";
const RULED = 10;
const KEYS = 5000;
const key = (i: number) => `key-${i}`;
/** One-way increments go to counters `0..ONE_WAY_KEYS`. */
const ONE_WAY_KEYS = 97;

/** Runs `ops` through `/v1/batch` 1,000 at a time and answers every result. */
async function batch(
  send: (path: string, init: RequestInit) => Promise<Response>,
  ops: object[],
): Promise<{ value?: number; error?: { code: string } }[]> {
  const results = [];
  for (let i = 0; i < ops.length; i += 1000) {
    const response = await send("/v1/batch", {
      method: "POST",
      body: JSON.stringify({ ops: ops.slice(i, i + 1000) }),
    });
    expect(response.status).toBe(200);
    results.push(...(await response.json()).results);
  }
  return results;
}

/** The values of counters `0..count` (every counter by default), read from the current
 * deployment. */
async function values(service: Service, count = KEYS): Promise<number[]> {
  const reads = Array.from({ length: count }, (_, i) => ({
    op: "get",
    ns: NS,
    key: key(i),
  }));
  return (await batch(service.fetch, reads)).map((r) => r.value ?? NaN);
}

interface Totals {
  keys: number;
  stored_counters: number;
  cache_entries: number;
  keys_to_move: number;
}

async function totals(service: Service): Promise<Totals> {
  const response = await service.fetch("/v1/stats");
  expect(response.status).toBe(200);
  return (await response.json()).totals;
}

const ENTRIES = 100;
/** Cache entry `i`: `i * 37` bytes (the first empty), its own content type. */
const entry = (i: number) => ({
  path: `/v1/cache/${NS}/entry-${i}`,
  bytes: Uint8Array.from({ length: i * 37 }, (_, b) => (b * 7 + i) % 256),
  type: `application/x-entry-${i}`,
});

/** Every cache entry reads back with its bytes and content type. */
async function expectEntries(service: Service): Promise<void> {
  for (let i = 0; i < ENTRIES; i++) {
    const { path, bytes, type } = entry(i);
    const read = await service.fetch(path);
    expect(read.status, path).toBe(200);
    expect(read.headers.get("content-type")).toBe(type);
    expect(new Uint8Array(await read.arrayBuffer())).toEqual(bytes);
  }
}

/** Waits (at most a minute) until no shard holds a key that belongs elsewhere. */
async function settled(service: Service): Promise<Totals> {
  for (let i = 0; i < 600; i++) {
    const now = await totals(service);
    if (now.keys_to_move === 0) return now;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("keys were still moving after a minute");
}

/** Runs `body` over a state folder of its own, removed afterwards. */
async function withStateDir(
  name: string,
  body: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), `edgecount-migration-${name}-`));
  try {
    await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Writes `ops` through a deployment of 4 shards over `dir`'s state, then stops it. */
async function writeUnder4(dir: string, ops: object[]): Promise<void> {
  const under4 = await startService({
    persistDir: dir,
    vars: { EDGECOUNT_SHARDS: "4" },
  });
  await batch(under4.fetch, ops);
  await under4.stop();
}

/**
 * 20 writers, each sending `rounds` single increments to random keys: through the current
 * deployment or the previous one, some with an Idempotency-Key and sent twice. Answers the
 * increments acknowledged per key (a repeat of a keyed write counts once). Meanwhile 4 readers
 * read random keys and check that none reads less than `before` (each counter's value when
 * the writers started) and the increments acknowledged before the read was sent.
 */
async function writers(
  service: Service,
  rounds: number,
  change: string,
  before: number[],
): Promise<number[]> {
  const acknowledged = new Array<number>(KEYS).fill(0);
  let writing = true;
  const reader = async () => {
    while (writing) {
      const i = Math.floor(Math.random() * KEYS);
      const least = before[i] + acknowledged[i];
      const read = await service.fetch(
        `/v1/counters/${NS}/${key(i)}?consistency=strong`,
      );
      expect(read.status).toBe(200);
      expect((await read.json()).value, key(i)).toBeGreaterThanOrEqual(least);
    }
  };
  const reading = Array.from({ length: 4 }, reader);
  const writer = async (w: number) => {
    for (let round = 0; round < rounds; round++) {
      const i = Math.floor(Math.random() * KEYS);
      const previous = (w + round) % 3 === 0;
      const send = previous ? service.fetchPrevious : service.fetch;
      const keyed = round % 4 === 0;
      const init: RequestInit = {
        method: "POST",
        // Unique across both changes: a key used again on the same counter is a replay.
        headers: keyed
          ? { "idempotency-key": `${change}-w${w}-r${round}` }
          : {},
      };
      const path = `/v1/counters/${NS}/${key(i)}/incr`;
      const first = await send(path, init);
      expect(first.status, await first.clone().text()).toBe(200);
      if (keyed) {
        // The retry of a client that lost the answer, possibly through the other deployment.
        const retry = await (previous ? service.fetch : service.fetchPrevious)(
          path,
          init,
        );
        expect(retry.status).toBe(200);
        expect(retry.headers.get("idempotent-replayed")).toBe("true");
      }
      acknowledged[i] += 1;
    }
  };
  await Promise.all(Array.from({ length: 20 }, (_, w) => writer(w)));
  writing = false;
  await Promise.all(reading);
  return acknowledged;
}

it("grows 4 -> 7 and shrinks back to 4 online, every counter exact and every key in one shard", async () => {
  const expected = Array.from({ length: KEYS }, (_, i) => (i % 7) + 1);
  const under4 = await startService({
    persistDir,
    vars: { EDGECOUNT_SHARDS: "4" },
  });
  const writes = expected.map((by, i) => ({
    op: "incr",
    ns: NS,
    key: key(i),
    by,
  }));
  expect((await batch(under4.fetch, writes)).every((r) => r.value)).toBe(true);
  for (let i = 0; i < ENTRIES; i++) {
    const { path, bytes, type } = entry(i);
    const put = await under4.fetch(path, {
      method: "PUT",
      body: bytes,
      headers: { "content-type": type, "idempotency-key": `put-${i}` },
    });
    expect(put.status).toBe(204);
  }
  // Counters with rules of their own (CountAPI's /create): their rules, creation time and
  // expiry travel with them.
  const ruledInfo = async (service: Service) => {
    const infos = [];
    for (let i = 0; i < RULED; i++) {
      const info = await service.fetch(`/info/${RULED_NS}/ruled-${i}`);
      expect(info.status).toBe(200);
      infos.push(await info.json());
    }
    return infos;
  };
  for (let i = 0; i < RULED; i++) {
    const made = await under4.fetch(
      `/create?namespace=${RULED_NS}&key=ruled-${i}&value=${i}&enable_reset=1&update_lowerbound=-3&update_upperbound=9`,
    );
    expect(made.status).toBe(200);
  }
  const ruled = await ruledInfo(under4);
  await under4.stop();

  for (const [from, to] of [
    [4, 7],
    [7, 4],
  ]) {
    const moving = await startService({
      persistDir,
      vars: {
        EDGECOUNT_SHARDS: String(to),
        EDGECOUNT_SHARDS_FROM: String(from),
      },
      previousDeployment: { EDGECOUNT_SHARDS: String(from) },
    });
    const before = await totals(moving);
    expect(before.keys_to_move).toBeGreaterThan(KEYS / 10);
    const acknowledged = await writers(moving, 60, `${from}-${to}`, expected);
    acknowledged.forEach((n, i) => (expected[i] += n));
    // One-way increments through both deployments: each isolate flushes its sums under a
    // receipt, which the previous deployment's shards forward to the keys' new homes.
    for (let n = 0; n < 200; n++) {
      const i = (n * 37) % ONE_WAY_KEYS;
      const send = n % 2 ? moving.fetch : moving.fetchPrevious;
      const path = `/v1/counters/${NS}/${key(i)}/incr?async=1`;
      expect((await send(path, { method: "POST" })).status).toBe(202);
      expected[i] += 1;
    }
    const after = await settled(moving);
    // Until the one-way sums are applied (within the flush interval, 1 s, once they reach
    // their shards: waited for up to 15 s, as a loaded machine may take a while).
    for (let wait = 0; wait < 150; wait++) {
      const oneWay = await values(moving, ONE_WAY_KEYS);
      if (oneWay.every((v, i) => v === expected[i])) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // Each key stored once: as many stored counters as keys, none left to move.
    expect(after.stored_counters).toBe(KEYS + RULED);
    expect(after.cache_entries).toBe(ENTRIES);
    expect(await values(moving)).toEqual(expected);
    await expectEntries(moving);
    const ruledNow = await ruledInfo(moving);
    ruledNow.forEach((info, i) => {
      const { ttl, ...rest } = info;
      const { ttl: ttlBefore, ...restBefore } = ruled[i];
      expect(rest).toEqual(restBefore);
      expect(ttl).toBeLessThanOrEqual(ttlBefore);
      expect(ttl).toBeGreaterThan(ttlBefore - 120_000);
    });
    // A keyed put sent again after its entry moved is a replay, not a second write.
    const { path, bytes, type } = entry(5);
    const again = await moving.fetch(path, {
      method: "PUT",
      body: bytes,
      headers: { "content-type": type, "idempotency-key": "put-5" },
    });
    expect(again.status).toBe(204);
    expect(again.headers.get("idempotent-replayed")).toBe("true");

    // A late write of the previous deployment, after its key moved, counts once; so does
    // its keyed retry.
    const late = `/v1/counters/${NS}/${key(1)}/incr`;
    const keyed = {
      method: "POST",
      headers: { "idempotency-key": `late-${to}` },
    };
    expect((await moving.fetchPrevious(late, keyed)).status).toBe(200);
    expect((await moving.fetchPrevious(late, keyed)).status).toBe(200);
    expected[1] += 1;
    expect(await moving.value(NS, key(1))).toBe(BigInt(expected[1]));
    await moving.stop();

    // The change declared over: the new count alone reads the same.
    const settledCount = await startService({
      persistDir,
      vars: { EDGECOUNT_SHARDS: String(to) },
    });
    expect(await values(settledCount)).toEqual(expected);
    expect((await totals(settledCount)).stored_counters).toBe(KEYS + RULED);
    await settledCount.stop();
  }
}, 240_000);

it("refuses to declare a change over while keys are still to move", async () => {
  await withStateDir("early", async (dir) => {
    const ops = Array.from({ length: 2500 }, (_, i) => ({
      op: "incr",
      ns: NS,
      key: key(i),
    }));
    await writeUnder4(dir, ops);
    // One key per alarm: the change is far from done when this deployment goes.
    const slow = {
      EDGECOUNT_SHARDS: "7",
      EDGECOUNT_SHARDS_FROM: "4",
      EDGECOUNT_HAND_OVER_KEYS: "1",
    };
    const started = await startService({ persistDir: dir, vars: slow });
    expect((await totals(started)).keys_to_move).toBeGreaterThan(500);
    await started.stop();

    // The deployment that declared the change is still rolling out beside it.
    const early = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7" },
      previousDeployment: slow,
    });
    const refused = await early.fetch(`/v1/counters/${NS}/${key(0)}`);
    expect(refused.status).toBe(500);
    const error = (await refused.json()).error;
    expect(error.code).toBe("misconfigured");
    expect(error.message).toContain("Keep EDGECOUNT_SHARDS_FROM=4");
    // Its isolates pass their own check, but the shards, no longer under the change, refuse
    // their ops: a key not yet moved would read 0 at its new home, and its writes be lost.
    for (let i = 0; i < 20; i++) {
      const write = await early.fetchPrevious(
        `/v1/counters/${NS}/${key(i)}/incr`,
        {
          method: "POST",
        },
      );
      expect(write.status).toBe(500);
      const refusal = (await write.json()).error;
      expect(refusal.code).toBe("misconfigured");
      expect(refusal.message).toContain(
        "Set EDGECOUNT_SHARDS=7 and EDGECOUNT_SHARDS_FROM=4 back",
      );
    }
    await early.stop();

    const resumed = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7", EDGECOUNT_SHARDS_FROM: "4" },
    });
    await settled(resumed);
    await resumed.stop();
    const over = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7" },
    });
    const reads = ops.map(({ key }) => ({ op: "get", ns: NS, key }));
    expect((await batch(over.fetch, reads)).every((r) => r.value === 1)).toBe(
      true,
    );
    await over.stop();
  });
});

/** The shard a deployment of `shards` shards places each of `keys` under. */
async function homesUnder(shards: number, keys: string[]): Promise<number[]> {
  const probe = await startService({
    vars: { EDGECOUNT_SHARDS: String(shards) },
  });
  const homes = [];
  for (const name of keys) {
    const read = await probe.fetch(`/v1/counters/${NS}/${name}`);
    await read.text();
    homes.push(Number(read.headers.get("x-edgecount-shard")));
  }
  await probe.stop();
  return homes;
}

it("keeps a change's arrivals while a deployment declaring another runs: a key deleted at its new home stays deleted", async () => {
  await withStateDir("reversed", async (dir) => {
    // Names that move to shard 0 when 7 shards become 4: shard-0 is the shard any deployment
    // opens first (it keeps the count), whatever the count it declares.
    const names = Array.from({ length: 400 }, (_, i) => `zz-${i}`);
    const under7 = await homesUnder(7, names);
    const leaving = names.filter((_, i) => under7[i] >= 4);
    const under4 = await homesUnder(4, leaving);
    const targets = leaving.filter((_, i) => under4[i] === 0);
    expect(targets.length).toBeGreaterThan(10);
    // Many more keys sort before them, so the old homes' sweeps (a key an alarm) are far
    // from reaching them: the old homes still hold their copies when the change is left.
    const FILLERS = 4000;
    const fillers = Array.from({ length: FILLERS }, (_, i) => key(i));
    const writes = [...fillers, ...targets].map((name) => ({
      op: "incr",
      ns: NS,
      key: name,
    }));
    const first = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7" },
    });
    expect((await batch(first.fetch, writes)).every((r) => r.value)).toBe(true);
    await first.stop();

    const shrinking = {
      EDGECOUNT_SHARDS: "4",
      EDGECOUNT_SHARDS_FROM: "7",
      EDGECOUNT_HAND_OVER_KEYS: "1",
    };
    const moving = await startService({ persistDir: dir, vars: shrinking });
    // Each delete takes its key over at shard-0, then deletes it there.
    const deletes = targets.map((name) => ({
      op: "delete",
      ns: NS,
      key: name,
    }));
    const deleted = await batch(moving.fetch, deletes);
    expect(deleted.every((r) => !r.error)).toBe(true);
    await moving.stop();

    // The change declared the other way round, the deployment that declared it still rolling
    // out beside it: the keeper of the count refuses the new one, and the shards, under a
    // change this deployment does not declare, refuse the previous one's ops.
    const reversed = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7", EDGECOUNT_SHARDS_FROM: "4" },
      previousDeployment: shrinking,
    });
    const refused = await reversed.fetch(`/v1/counters/${NS}/${targets[0]}`);
    expect(refused.status).toBe(500);
    expect((await refused.json()).error.code).toBe("misconfigured");
    for (const name of targets) {
      const read = await reversed.fetchPrevious(
        `/v1/counters/${NS}/${name}?consistency=strong`,
      );
      expect(read.status).toBe(500);
      expect((await read.json()).error.message).toContain(
        "Set EDGECOUNT_SHARDS=4 and EDGECOUNT_SHARDS_FROM=7 back",
      );
    }
    await reversed.stop();

    // Declared again, the change goes on where it was left: shard-0 still knows the deleted
    // keys arrived, and takes neither its old homes' stale copies nor their hand-overs.
    const resumed = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "4", EDGECOUNT_SHARDS_FROM: "7" },
    });
    const reads = targets.map((name) => ({ op: "get", ns: NS, key: name }));
    const zeros = targets.map(() => 0);
    expect((await batch(resumed.fetch, reads)).map((r) => r.value)).toEqual(
      zeros,
    );
    expect((await settled(resumed)).stored_counters).toBe(FILLERS);
    expect((await batch(resumed.fetch, reads)).map((r) => r.value)).toEqual(
      zeros,
    );
    await resumed.stop();
  });
}, 120_000);

it("refuses a change declared from a count the keys are not under", async () => {
  await withStateDir("guard", async (dir) => {
    const first = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "4" },
    });
    expect(
      (await first.fetch(`/v1/counters/${NS}/a/incr`, { method: "POST" }))
        .status,
    ).toBe(200);
    await first.stop();
    const wrong = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7", EDGECOUNT_SHARDS_FROM: "5" },
    });
    const refused = await wrong.fetch(`/v1/counters/${NS}/a`);
    expect(refused.status).toBe(500);
    const error = (await refused.json()).error;
    expect(error.code).toBe("misconfigured");
    expect(error.message).toContain("EDGECOUNT_SHARDS_FROM=4");
    await wrong.stop();
    const same = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7", EDGECOUNT_SHARDS_FROM: "7" },
    });
    const malformed = await same.fetch(`/v1/counters/${NS}/a`);
    expect(malformed.status).toBe(500);
    expect((await malformed.json()).error.message).toContain(
      "EDGECOUNT_SHARDS_FROM",
    );
    await same.stop();
  });
});

it("streams a counter that has not reached its new home yet", async () => {
  await withStateDir("stream", async (dir) => {
    const decoder = new TextDecoder();
    // Each stream from an address of its own: one client may hold only 8 at a time, and a
    // closed one's place is freed when the runtime notices (at the next write or keepalive).
    let clients = 0;
    const firstEvent = async (url: string) => {
      const response = await fetch(url, {
        headers: { "cf-connecting-ip": `10.2.0.${++clients}` },
      });
      expect(response.status, url).toBe(200);
      const reader = response.body!.getReader();
      const { value } = await reader.read();
      return { reader, event: decoder.decode(value) };
    };
    const ops = Array.from({ length: 40 }, (_, i) => ({
      op: "incr",
      ns: NS,
      key: key(i),
      by: i + 1,
    }));
    await writeUnder4(dir, ops);

    // One key per alarm: most keys have not moved when their streams open.
    const moving = await startService({
      persistDir: dir,
      vars: {
        EDGECOUNT_SHARDS: "7",
        EDGECOUNT_SHARDS_FROM: "4",
        EDGECOUNT_HAND_OVER_KEYS: "1",
      },
      listen: true,
    });
    for (let i = 0; i < 40; i++) {
      const { reader, event } = await firstEvent(
        `${moving.url}/stream/${NS}/${key(i)}`,
      );
      expect(event).toBe(`data: {"value":${i + 1}}\n\n`);
      await reader.cancel();
    }
    const live = await firstEvent(`${moving.url}/stream/${NS}/${key(7)}`);
    await moving.fetch(`/v1/counters/${NS}/${key(7)}/incr`, { method: "POST" });
    const { value } = await live.reader.read();
    expect(decoder.decode(value)).toBe('data: {"value":9}\n\n');
    await live.reader.cancel();
    await settled(moving);
    await moving.stop();
  });
});

it("reads keys that have not arrived where they are, without taking them over", async () => {
  await withStateDir("reads", async (dir) => {
    const ops = Array.from({ length: 300 }, (_, i) => ({
      op: "incr",
      ns: NS,
      key: key(i),
      by: i + 1,
    }));
    await writeUnder4(dir, ops);
    // One key per alarm: most keys have not moved when they are read.
    const moving = await startService({
      persistDir: dir,
      vars: {
        EDGECOUNT_SHARDS: "7",
        EDGECOUNT_SHARDS_FROM: "4",
        EDGECOUNT_HAND_OVER_KEYS: "1",
      },
    });
    const reads = ops.map(({ key }) => ({ op: "get", ns: NS, key }));
    const absent = { op: "get", ns: NS, key: "never-written" };
    const read = await batch(moving.fetch, [...reads, absent]);
    expect(read.map((r) => r.value)).toEqual([...ops.map((op) => op.by), 0]);
    // Each key stored once still, bar the few the alarm is handing over: a read took none over.
    expect((await totals(moving)).stored_counters).toBeLessThan(300 + 10);
    // A write takes its key over, and the key is read here from then on.
    const write = await moving.fetch(`/v1/counters/${NS}/${key(7)}/incr`, {
      method: "POST",
    });
    expect((await write.json()).value).toBe(9);
    expect(await moving.value(NS, key(7))).toBe(9n);
    await settled(moving);
    expect((await batch(moving.fetch, reads)).map((r) => r.value)).toEqual(
      ops.map((op, i) => op.by + (i === 7 ? 1 : 0)),
    );
    await moving.stop();
  });
});

it("hands over cache entries of the largest size, several calls' worth, intact", async () => {
  await withStateDir("large", async (dir) => {
    // 16 entries of the 1 MiB most, all on one shard, then about half of them moving to a second:
    // 1.4 MB each as parcels, where one hand-over carries 4 MiB.
    const MAX_VALUE_BYTES = 1024 * 1024;
    const large = (i: number) => ({
      path: `/v1/cache/${NS}/large-${i}`,
      bytes: Uint8Array.from(
        { length: MAX_VALUE_BYTES },
        (_, b) => (b * 31 + i) % 251,
      ),
    });
    const underOne = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "1" },
    });
    for (let i = 0; i < 16; i++) {
      const { path, bytes } = large(i);
      const put = await underOne.fetch(path, { method: "PUT", body: bytes });
      expect(put.status).toBe(204);
    }
    await underOne.stop();
    const moving = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "2", EDGECOUNT_SHARDS_FROM: "1" },
      previousDeployment: { EDGECOUNT_SHARDS: "1" },
    });
    const before = await totals(moving);
    // More than one call's worth leaves for the same shard.
    expect(before.keys_to_move).toBeGreaterThanOrEqual(4);
    const after = await settled(moving);
    expect(after.cache_entries).toBe(16);
    // A batch of the previous deployment, forwarded to both homes, still answers within the
    // batch answer budget (8 MiB, `MAX_BATCH_ANSWER_BYTES`): the reads past it are refused.
    const reads = Array.from({ length: 16 }, (_, i) => ({
      op: "cache_get",
      ns: NS,
      key: `large-${i}`,
    }));
    const answer = await moving.fetchPrevious("/v1/batch", {
      method: "POST",
      body: JSON.stringify({ ops: reads }),
    });
    expect(answer.status).toBe(200);
    const text = await answer.text();
    expect(text.length).toBeLessThanOrEqual(8 * 1024 * 1024 + 64 * 1024);
    const results: { value_base64?: string; error?: { code: string } }[] =
      JSON.parse(text).results;
    const read = results.filter((r) => r.value_base64 !== undefined).length;
    const refused = results.filter(
      (r) => r.error?.code === "payload_too_large",
    ).length;
    expect(read).toBeGreaterThanOrEqual(1);
    expect(read + refused).toBe(16);
    // The reads that fit come first, whole.
    expect(
      Buffer.from(results[0].value_base64!, "base64").equals(
        Buffer.from(large(0).bytes),
      ),
    ).toBe(true);
    expect(results.findIndex((r) => r.error)).toBe(read);
    for (let i = 0; i < 16; i++) {
      const { path, bytes } = large(i);
      const read = await moving.fetch(path);
      expect(read.status, path).toBe(200);
      expect(
        Buffer.from(await read.arrayBuffer()).equals(Buffer.from(bytes)),
        path,
      ).toBe(true);
    }
    await moving.stop();
  });
});

it("reclaims what keys bring to their new home when it lapses, with no other traffic there", async () => {
  await withStateDir("lapse", async (dir) => {
    const ops = Array.from({ length: 300 }, (_, i) => ({
      op: "incr",
      ns: NS,
      key: key(i),
      ttl: 2,
    }));
    await writeUnder4(dir, ops);
    const changed = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7", EDGECOUNT_SHARDS_FROM: "4" },
    });
    try {
      await settled(changed);
      // Every counter has lapsed by now; each shard's alarm reclaims what it stores, the keys
      // that arrived by hand-over included (nothing else writes to their new homes).
      let stored = Infinity;
      for (let i = 0; i < 100 && stored > 0; i++) {
        await new Promise((r) => setTimeout(r, 200));
        stored = (await totals(changed)).stored_counters;
      }
      expect(stored).toBe(0);
    } finally {
      await changed.stop();
    }
  });
});

it("keeps moved counters when a change already declared over is declared again (a rollback), and lets it be declared over again", async () => {
  await withStateDir("again", async (dir) => {
    const ops = Array.from({ length: 300 }, (_, i) => ({
      op: "incr",
      ns: NS,
      key: key(i),
    }));
    const reads = ops.map(({ key }) => ({ op: "get", ns: NS, key }));
    const declaring = { EDGECOUNT_SHARDS: "7", EDGECOUNT_SHARDS_FROM: "4" };
    await writeUnder4(dir, ops);
    const changing = await startService({ persistDir: dir, vars: declaring });
    await settled(changing);
    await changing.stop();
    const over = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7" },
    });
    expect((await batch(over.fetch, reads)).every((r) => r.value === 1)).toBe(
      true,
    );
    await over.stop();
    // The release that declared the change, deployed again: the moved keys' new homes have
    // forgotten their arrival, and their old homes hold nothing of them any more.
    const again = await startService({ persistDir: dir, vars: declaring });
    const values = (await batch(again.fetch, reads)).map((r) => r.value);
    expect(values.filter((v) => v !== 1)).toEqual([]);
    await again.stop();
    // Declared over again: every counter reads as before, and nothing is refused.
    const overAgain = await startService({
      persistDir: dir,
      vars: { EDGECOUNT_SHARDS: "7" },
    });
    expect(
      (await batch(overAgain.fetch, reads)).every((r) => r.value === 1),
    ).toBe(true);
    expect((await totals(overAgain)).keys_to_move).toBe(0);
    await overAgain.stop();
  });
});
