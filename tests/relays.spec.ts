// Relays (EDGECOUNT_RELAYS): one-way counts go from the isolate to one of its shard's relays,
// which merges them and forwards their sums. Each count arrives once, whatever answers are lost
// on either hop; visitors arrive once each; a relay with no room refuses a flush whole, and the
// isolate sends it again until it is taken.
import { afterAll, describe, expect, it } from "vitest";
import {
  edgeStats,
  freshNamespace,
  startService,
  type Service,
} from "./service";

const ASYNC = { prefer: "respond-async" };

/** Waits until `check` holds (at most `ms`), then answers its last reading. */
async function until<T>(
  read: () => Promise<T>,
  check: (value: T) => boolean,
  ms = 30_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (check(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Sends `paths` one-way, `width` at a time; every one must be accepted. */
async function sendAll(
  service: Service,
  paths: string[],
  headers: (i: number) => Record<string, string> = () => ({}),
  width = 16,
): Promise<void> {
  for (let i = 0; i < paths.length; i += width) {
    const statuses = await Promise.all(
      paths.slice(i, i + width).map(async (path, j) => {
        const response = await service.fetch(path, {
          method: "POST",
          headers: { ...ASYNC, ...headers(i + j) },
        });
        await response.arrayBuffer();
        return response.status;
      }),
    );
    expect(statuses.every((status) => status === 202)).toBe(true);
  }
}

describe("relays", () => {
  const services: Service[] = [];
  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
  });
  /** A service of this spec's own with `vars`, stopped when the spec ends. */
  const started = async (vars: Record<string, string>): Promise<Service> => {
    const service = await startService({ vars });
    services.push(service);
    return service;
  };

  it("apply each count once when answers are lost on either hop", async () => {
    const service = await started({
      EDGECOUNT_RELAYS: "2",
      EDGECOUNT_RELAY_INTERVAL_MS: "200",
      EDGECOUNT_ONE_WAY_INTERVAL_MS: "50",
      // The first four flush answers, the isolate's or a relay's, are lost on the way back.
      EDGECOUNT_DRILL_LOST_FLUSH_ANSWERS: "4",
    });
    const ns = freshNamespace("relayed");
    const keys = ["home", "about", "blog", "shop", "faq", "contact"];
    const paths = Array.from(
      { length: 300 },
      (_, i) => `/v1/counters/${ns}/${keys[i % keys.length]}/incr`,
    );
    paths.push(`/v1/counters/${ns}/home/decr?by=7`);
    await sendAll(service, paths);
    const expected = keys.map((key) => (key === "home" ? 50n - 7n : 50n));
    const values = () => Promise.all(keys.map((key) => service.value(ns, key)));
    expect(
      await until(values, (v) => v.every((x, i) => x === expected[i])),
    ).toEqual(expected);
    // Nothing arrives twice later: resends still under way are replays.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await values()).toEqual(expected);
    const oneWay = (await edgeStats(service)).one_way as unknown as Record<
      string,
      number
    >;
    expect(oneWay.retried).toBeGreaterThan(0);
    expect(oneWay.dropped).toBe(0);
  });

  it("count each visitor once through them", async () => {
    const service = await started({
      EDGECOUNT_RELAYS: "3",
      EDGECOUNT_RELAY_INTERVAL_MS: "200",
      EDGECOUNT_ONE_WAY_INTERVAL_MS: "50",
    });
    const ns = freshNamespace("relayed-uniq");
    const paths = Array.from(
      { length: 120 },
      () => `/v1/counters/${ns}/home/incr?unique=1`,
    );
    // 40 visitors, three views each.
    await sendAll(service, paths, (i) => ({
      "cf-connecting-ip": `192.0.2.${i % 40}`,
      "user-agent": "Relay-spec/1.0",
    }));
    const read = async () =>
      (
        await service.fetch(
          `/v1/counters/${ns}/home/days?period=today&unique=1`,
        )
      ).json();
    const body = await until(read, (b) => b.value === 120);
    expect([body.value, body.uniques]).toEqual([120, 40]);
  });

  it("refuse a flush that does not fit whole, and take it when there is room", async () => {
    // One shard, one relay of 1,000 keys whose first forward to its shard goes unanswered
    // (15 s, then sent again): the keys it took stay charged meanwhile, so 1,500 keys cannot
    // all be taken, a flush is refused and sent again, and everything arrives in the end.
    const service = await started({
      EDGECOUNT_SHARDS: "1",
      EDGECOUNT_RELAYS: "1",
      EDGECOUNT_RELAY_KEYS: "1000",
      EDGECOUNT_RELAY_INTERVAL_MS: "200",
      EDGECOUNT_ONE_WAY_INTERVAL_MS: "50",
      EDGECOUNT_DRILL_STALLED_CALLS: "1",
    });
    const ns = freshNamespace("relay-full");
    const paths = Array.from(
      { length: 1_500 },
      (_, i) => `/v1/counters/${ns}/k${i}/incr`,
    );
    await sendAll(service, paths, () => ({}), 32);
    const oneWay = async () =>
      (await edgeStats(service)).one_way as unknown as Record<string, number>;
    const drained = await until(oneWay, (s) => s.pending === 0, 45_000);
    expect(drained.pending).toBe(0);
    expect(drained.retried).toBeGreaterThan(0);
    expect(drained.dropped).toBe(0);
    // Taken by the relay is not yet applied: the last sums arrive with its next window.
    const sample = () =>
      Promise.all(
        [0, 499, 999, 1_000, 1_499].map((i) => service.value(ns, `k${i}`)),
      );
    expect(
      await until(sample, (v) => v.every((x) => x === 1n), 60_000),
    ).toEqual([1n, 1n, 1n, 1n, 1n]);
  }, 150_000);

  it("are refused as settings out of range, or that a flush could not fit", async () => {
    const cases: [Record<string, string>, string][] = [
      [{ EDGECOUNT_RELAY_KEYS: "999" }, "EDGECOUNT_RELAY_KEYS"],
      [
        { EDGECOUNT_RELAY_BYTES: String(16 * 1024 * 1024 + 1) },
        "EDGECOUNT_RELAY_BYTES",
      ],
      // An empty relay must take any flush: not smaller than the isolate's buffer.
      [
        {
          EDGECOUNT_RELAYS: "1",
          EDGECOUNT_ONE_WAY_BYTES: "4194304",
          EDGECOUNT_RELAY_BYTES: "2097152",
        },
        "EDGECOUNT_RELAY_BYTES",
      ],
    ];
    for (const [vars, named] of cases) {
      const service = await started(vars);
      const response = await service.fetch(`/v1/counters/x/y`);
      expect(response.status).toBe(500);
      expect((await response.json()).error.message).toContain(named);
    }
  });
});
