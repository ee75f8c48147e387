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
  // The first increment's call is sent and stalls; it is answered outcome_unknown after 15 s.
  const stalled = fetch(`${url}/v1/counters/${ns}/${first}/incr`, {
    method: "POST",
  });
  await new Promise((r) => setTimeout(r, 300));
  // The second queues behind it, and its client resets the connection 300 ms later.
  await sendAndReset(url, "POST", `/v1/counters/${ns}/${second}/incr`, 300);
  const answer = await stalled;
  expect(answer.status).toBe(503);
  expect((await answer.json()).error.code).toBe("outcome_unknown");
  await new Promise((r) => setTimeout(r, 1_000));
  const read = async (key: string) =>
    (
      await (
        await fetch(`${url}/v1/counters/${ns}/${key}?consistency=strong`)
      ).json()
    ).value;
  expect(await read(first)).toBe(1); // it was applied: "unknown" was the truth
  expect(await read(second)).toBe(0); // taken back, never sent
});
