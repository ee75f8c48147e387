// An op queued behind its shard's call in flight belongs to the request waiting for it. If that
// request's client hangs up before the op is sent, the op is taken back: left queued, it would
// go out with whichever request next calls the shard, at any later time, applying a write that
// nobody waits for (over writes acknowledged since). The call in flight is held with
// EDGECOUNT_DRILL_STALLED_CALLS (the isolate's first call is sent and its answer never awaited)
// so that the second op has to queue.
import { afterAll, expect, it } from "vitest";
import { sendAndReset } from "./raw-http";
import { freshNamespace } from "./service";
import { startScratchWorkerd, type ScratchRuntime } from "./workerd";

let runtime: ScratchRuntime | undefined;
afterAll(() => runtime?.stop());

it("takes back a queued op whose client hung up: it is never applied", async () => {
  runtime = await startScratchWorkerd("reset-queued", {
    EDGECOUNT_DRILL_STALLED_CALLS: "1",
  });
  const url = runtime.url;
  const ns = freshNamespace("reset-queued");
  // Two keys of one shard, found without calling any shard: a refused method still names it.
  const byShard = new Map<string, string>();
  let keys: [string, string] | undefined;
  for (let i = 0; !keys; i++) {
    const response = await fetch(`${url}/v1/counters/${ns}/k${i}`, {
      method: "PATCH",
    });
    await response.arrayBuffer();
    expect(response.status).toBe(405);
    const shard = response.headers.get("x-edgecount-shard")!;
    const other = byShard.get(shard);
    if (other) keys = [other, `k${i}`];
    byShard.set(shard, `k${i}`);
  }
  const [first, second] = keys;
  /** Waits until the isolate's edge figures say `done` (asking sends no op to a shard). */
  const until = async (done: (edge: Record<string, number>) => boolean) => {
    for (let i = 0; i < 200; i++) {
      const stats = await (await fetch(`${url}/v1/stats`)).json();
      if (done(stats.edge)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error("the isolate's figures never got there");
  };
  // The first increment's call is sent and stalls; it is answered outcome_unknown after 15 s.
  const stalled = fetch(`${url}/v1/counters/${ns}/${first}/incr`, {
    method: "POST",
  });
  stalled.catch(() => {}); // awaited below
  await until((edge) => edge.shard_calls === 1);
  // The second queues behind it (submitted, no second call), and its client then resets the
  // connection; the op is taken back.
  await sendAndReset(url, "POST", `/v1/counters/${ns}/${second}/incr`, () =>
    until((edge) => edge.ops_submitted === 2),
  );
  await until((edge) => edge.ops_withdrawn === 1);
  const answer = await stalled;
  expect(answer.status).toBe(503);
  expect((await answer.json()).error.code).toBe("outcome_unknown");
  // Past the stalled call's lease: an op left queued would have gone out by now, or with the
  // next write to the shard at the latest.
  expect((await (await fetch(`${url}/v1/stats`)).json()).edge.shard_calls).toBe(
    1,
  );
  const next = await fetch(`${url}/v1/counters/${ns}/${first}/incr`, {
    method: "POST",
  });
  expect(next.status).toBe(200);
  const edge = (await (await fetch(`${url}/v1/stats`)).json()).edge;
  expect(edge.shard_calls).toBe(2);
  expect(edge.coalesced_ops).toBe(0);
  const read = async (key: string) =>
    (
      await (
        await fetch(`${url}/v1/counters/${ns}/${key}?consistency=strong`)
      ).json()
    ).value;
  expect(await read(first)).toBe(2); // the stalled one was applied: "unknown" was the truth
  expect(await read(second)).toBe(0); // taken back, never sent
});
