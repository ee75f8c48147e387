// Moving in and out: `make export` / `make import` (scripts/transfer.mjs over GET /v1/export
// and POST /v1/import) carry every counter with its value, TTL, creation time and rules (an
// owner's key included), and every cache entry, from one deployment to another; importing
// twice changes nothing, a bad line is answered and the others land, and both are admin-only.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "edgecount-transfer-"));
let from: Service;
let to: Service;
beforeAll(async () => {
  // More shards than one export page reads, so the export takes several pages.
  [from, to] = await Promise.all([
    startService({ listen: true, vars: { EDGECOUNT_SHARDS: "40" } }),
    startService({ listen: true }),
  ]);
});
afterAll(async () => {
  await Promise.all([from.stop(), to.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

async function transfer(...args: string[]): Promise<string> {
  const { stderr } = await run(process.execPath, [
    "scripts/transfer.mjs",
    ...args,
  ]);
  return stderr;
}

const json = async (service: Service, path: string, init?: RequestInit) =>
  (await service.fetch(path, init)).json();

it("carries every value, TTL, rule and cache entry to another deployment, and again changes nothing", async () => {
  const ns = freshNamespace("moving");
  const post = { method: "POST" };
  for (let i = 0; i < 40; i++) {
    await from.fetch(`/v1/counters/${ns}/page-${i}/incr?by=${i + 1}`, post);
  }
  await from.fetch(`/v1/counters/${ns}/short-lived/incr?by=7&ttl=3600`, post);
  await from.fetch(
    `/create?namespace=${ns}&key=ruled&value=3&enable_reset=1&update_upperbound=50`,
  );
  const owner = (await json(from, `/create/${ns}/owned?initializer=10`, post))
    .admin_key;
  await from.fetch(`/v1/cache/${ns}/note`, {
    method: "PUT",
    headers: { "content-type": "text/plain" },
    body: "hello",
  });
  const bytes = new Uint8Array([0, 1, 2, 255]);
  await from.fetch(`/v1/cache/${ns}/blob?ttl=3600`, {
    method: "PUT",
    headers: { "content-type": "application/octet-stream" },
    body: bytes,
  });

  const file = join(dir, "export.ndjson");
  const progress = await transfer("export", from.url!, "--out", file);
  expect(progress).toMatch(/in 3 pages, done/);
  const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
  expect(lines.filter((l) => l.includes(`"${ns}"`))).toHaveLength(45);
  // Only this namespace: the same lines.
  const narrowed = join(dir, "narrowed.ndjson");
  await transfer("export", from.url!, "--ns", ns, "--out", narrowed);
  expect(readFileSync(narrowed, "utf8").split("\n").filter(Boolean)).toEqual(
    lines.filter((l) => l.includes(`"${ns}"`)),
  );

  for (let round = 0; round < 2; round++) {
    // Again, the same values; but an open service has no operator, and no line may replace a
    // counter its admin key owns (the first round created it): that line is refused by name.
    const imported = await transfer("import", to.url!, "--in", narrowed).then(
      (progress) => ({ failed: false, progress }),
      (error) => ({ failed: true, progress: String(error.stderr) }),
    );
    expect(imported.failed).toBe(round === 1);
    expect(imported.progress).toMatch(
      round === 1 ? /, 1 refused/ : /, 0 refused/,
    );
    if (round === 1) expect(imported.progress).toMatch(/line \d+: forbidden/);
    for (let i = 0; i < 40; i++) {
      expect(await to.value(ns, `page-${i}`)).toBe(BigInt(i + 1));
    }
    expect(await to.value(ns, "short-lived")).toBe(7n);
  }
  const [infoFrom, infoTo] = await Promise.all(
    [from, to].map((service) => json(service, `/info/${ns}/ruled`)),
  );
  expect(infoTo).toEqual({ ...infoFrom, ttl: infoTo.ttl });
  const ttl = await json(to, `/info/${ns}/short-lived`);
  expect(ttl.ttl).toBeGreaterThan(3_500_000);
  // The owner's key came along, and binds there as it did here.
  expect(
    (await to.fetch(`/v1/counters/${ns}/owned`, { method: "DELETE" })).status,
  ).toBe(403);
  const reset = await json(to, `/reset/${ns}/owned?token=${owner}`, post);
  expect(reset.value).toBe(0);
  // An open service has no operator: an import may not take an owned counter from its key.
  const takeover = JSON.stringify({
    ns,
    key: "owned",
    counter: {
      value: 99,
      version: 1,
      ttl_seconds: null,
      expires_at_ms: null,
      created_ms: 1,
      settings: null,
    },
  });
  const refusedTakeover = (
    await (
      await to.fetch("/v1/import", { method: "POST", body: takeover })
    ).text()
  ).trim();
  expect(JSON.parse(refusedTakeover).error.code).toBe("forbidden");
  expect(await to.value(ns, "owned")).toBe(0n);
  // Nor with the owner's hash, which its export shows to anyone: not a new value, nor a TTL
  // that would have the alarm delete it.
  const exported = JSON.parse(
    (await (await to.fetch(`/v1/export?ns=${ns}`)).text())
      .split("\n")
      .find((line) => line.includes('"key":"owned"'))!,
  );
  expect(exported.counter.settings.admin_key_hash).toEqual(expect.any(String));
  for (const edit of [
    { value: 99 },
    { ttl_seconds: 1, expires_at_ms: Date.now() - 1000 },
  ]) {
    const line = JSON.stringify({
      ...exported,
      counter: { ...exported.counter, ...edit },
    });
    const answer = (
      await (
        await to.fetch("/v1/import", { method: "POST", body: line })
      ).text()
    ).trim();
    expect(JSON.parse(answer).error.code).toBe("forbidden");
  }
  expect(await json(to, `/v1/counters/${ns}/owned`)).toMatchObject({
    value: 0,
    exists: true,
  });
  // A cursor made under another shard count is refused, not followed.
  const firstPage = (await (await from.fetch("/v1/export")).text())
    .trim()
    .split("\n");
  const next = JSON.parse(firstPage[firstPage.length - 1]).next;
  expect(next).toEqual(expect.any(String));
  const elsewhere = await to.fetch(`/v1/export?cursor=${next}`);
  expect(elsewhere.status).toBe(409);
  expect((await elsewhere.json()).error.code).toBe("change_under_way");
  const note = await to.fetch(`/v1/cache/${ns}/note`);
  expect([note.status, await note.text()]).toEqual([200, "hello"]);
  const blob = await to.fetch(`/v1/cache/${ns}/blob`);
  expect(new Uint8Array(await blob.arrayBuffer())).toEqual(bytes);
});

it("stores the good lines of a file with bad ones, and answers each line", async () => {
  const ns = freshNamespace("listed");
  const body = [
    JSON.stringify({ namespace: ns, key: "visits", value: 4242 }),
    "not json",
    JSON.stringify({ namespace: "bad name", key: "x", value: 1 }),
    "",
    JSON.stringify({ namespace: ns, key: "likes", value: -3 }),
    JSON.stringify({ next: null }),
  ].join("\n");
  const answers = (
    await (await to.fetch("/v1/import", { method: "POST", body })).text()
  )
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  expect(answers.map((a) => a.ok ?? a.skipped ?? a.error.code)).toEqual([
    true,
    "invalid_body",
    "invalid_body",
    true,
    true,
    true,
  ]);
  expect(answers.map((a) => a.line)).toEqual([1, 2, 3, 4, 5, 6]);
  expect(await to.value(ns, "visits")).toBe(4242n);
  expect(await to.value(ns, "likes")).toBe(-3n);

  // Through the command, the bad lines are named and the exit status says so.
  const file = join(dir, "listed.ndjson");
  writeFileSync(file, body);
  const failed = await transfer("import", to.url!, "--in", file).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  expect(failed?.code).toBe(1);
  expect(failed?.stderr).toMatch(/line 2: invalid_body/);
});

it("is for admins once tokens are configured, and bounded per request", async () => {
  const guarded = await startService({
    vars: {
      EDGECOUNT_ADMIN_TOKENS: "transfer-admin-1",
      EDGECOUNT_SHARD_CACHE_BYTES: "4096",
    },
  });
  try {
    expect((await guarded.fetch("/v1/export")).status).toBe(401);
    const post = { method: "POST", body: "" };
    expect((await guarded.fetch("/v1/import", post)).status).toBe(401);
    const admin = { authorization: "Bearer transfer-admin-1" };
    const page = await guarded.fetch("/v1/export", { headers: admin });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/ndjson/);
    const tooMany = "\n".repeat(1_001);
    const refused = await guarded.fetch("/v1/import", {
      method: "POST",
      headers: admin,
      body: tooMany,
    });
    expect(refused.status).toBe(413);
    const badCursor = await guarded.fetch("/v1/export?cursor=%%", {
      headers: admin,
    });
    expect(badCursor.status).toBe(400);
    // A cache entry the shard could not hold whole is refused, not stored and then evicted.
    const big = JSON.stringify({
      ns: "big",
      key: "entry",
      cache: {
        value: Buffer.alloc(8192).toString("base64"),
        content_type: "application/octet-stream",
        expires_at_ms: null,
        written_at_ms: 1,
      },
    });
    const answer = (
      await (
        await guarded.fetch("/v1/import", {
          method: "POST",
          headers: admin,
          body: big,
        })
      ).text()
    ).trim();
    expect(JSON.parse(answer).error.code).toBe("payload_too_large");
    const entry = await guarded.fetch("/v1/cache/big/entry", {
      headers: admin,
    });
    expect(entry.status).toBe(404);
  } finally {
    await guarded.stop();
  }
});

it("exports every counter once over pages where names holding only records sit between them", async () => {
  // One shard, so that a page of names is full of counters, and the names that hold only
  // idempotency records (their counters deleted since) fall between them: a page's names come
  // from the counters and from the records tables, merged and cut at the page's last name.
  const single = await startService({ vars: { EDGECOUNT_SHARDS: "1" } });
  try {
    const ns = freshNamespace("paged");
    const name = (i: number) => `k-${String(i).padStart(4, "0")}`;
    const names = Array.from({ length: 1500 }, (_, i) => name(i));
    const batch = async (ops: object[]) => {
      const answer = await single.fetch("/v1/batch", {
        method: "POST",
        body: JSON.stringify({ ops }),
      });
      expect(answer.status).toBe(200);
    };
    for (let i = 0; i < names.length; i += 750) {
      await batch(
        names.slice(i, i + 750).map((key) => ({
          op: "incr",
          ns,
          key,
          idempotency_key: `first-${key}`,
        })),
      );
    }
    const gone = names.filter((_, i) => i % 5 === 2);
    await batch(gone.map((key) => ({ op: "delete", ns, key })));
    const exported: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor ? `&cursor=${cursor}` : "";
      const lines = (
        await (await single.fetch(`/v1/export?ns=${ns}${query}`)).text()
      )
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      cursor = lines.pop().next;
      exported.push(...lines.map((line) => line.key));
      pages += 1;
    } while (cursor && pages < 10);
    expect(pages).toBeGreaterThan(1);
    expect(exported).toEqual(names.filter((key) => !gone.includes(key)));
  } finally {
    await single.stop();
  }
});
