// The CountAPI- and Abacus-compatible routes: every route, every error text, JSONP and
// `X-Path`, each mode's shapes, the rules a counter was created with, and that these routes and
// API v1 see one counter.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

let service: Service;
let abacus: Service;
let tokened: Service;
beforeAll(async () => {
  service = await startService();
  abacus = await startService({ vars: { EDGECOUNT_COMPAT: "abacus" } });
  tokened = await startService({
    vars: { EDGECOUNT_WRITE_TOKENS: "operator-token-1" },
  });
});
afterAll(async () => {
  await Promise.all([service.stop(), abacus.stop(), tokened.stop()]);
});

async function call(
  path: string,
  init?: RequestInit,
  on: Service = service,
): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await on.fetch(path, init);
  const text = await response.text();
  const json = response.headers
    .get("content-type")
    ?.startsWith("application/json");
  return {
    status: response.status,
    body: json ? JSON.parse(text) : text,
    headers: response.headers,
  };
}

const post = { method: "POST" };

describe("CountAPI routes", () => {
  it("hit and get see the counter API v1 sees, with X-Path", async () => {
    const ns = freshNamespace("hit");
    for (const expected of [1, 2, 3]) {
      const hit = await call(`/hit/${ns}/home`);
      expect([hit.status, hit.body]).toEqual([200, { value: expected }]);
      expect(hit.headers.get("x-path")).toBe(`${ns}/home`);
      expect(hit.headers.get("cache-control")).toBe("no-store");
    }
    await service.fetch(`/v1/counters/${ns}/home/incr?by=10`, post);
    expect((await call(`/get/${ns}/home`)).body).toEqual({ value: 13 });
    expect(await service.value(ns, "home")).toBe(13n);
  });

  it("a path without a namespace means `default`, and a missing key is 404 {value: null}", async () => {
    const key = freshNamespace("k");
    expect((await call(`/hit/${key}`)).headers.get("x-path")).toBe(
      `default/${key}`,
    );
    expect(await service.value("default", key)).toBe(1n);
    const missing = await call(`/get/${freshNamespace("none")}`);
    expect([missing.status, missing.body]).toEqual([404, { value: null }]);
  });

  it("names outside ^[A-Za-z0-9_\\-.]{3,64}$ are refused and change nothing", async () => {
    for (const path of [
      "/hit/ab",
      "/hit/ns-ok/a%2Fb",
      `/hit/${"x".repeat(65)}`,
      "/get/a%20b/key",
    ]) {
      const refused = await call(path);
      expect([refused.status, refused.body]).toEqual([
        400,
        { error: "Malformed Namespace/Key" },
      ]);
    }
    const stats = await call("/stats");
    expect(stats.status).toBe(200);
  });

  it("reserved words take the page's host and path, and still name a counter without headers", async () => {
    const host = `${freshNamespace("h")}.example`;
    const page = {
      origin: `https://${host}`,
      referer: `https://${host}/blog/post-1?x=2`,
    };
    const hit = await call("/hit/:HOST:/:PATHNAME:", { headers: page });
    expect(hit.headers.get("x-path")).toBe(`${host}/blog.post-1`);
    const again = await call("/get/%3AHOST%3A/:PATH:", { headers: page });
    expect(again.body).toEqual({ value: 1 });
    const bare = await call("/hit/:HOST:/:PATHNAME:");
    expect([bare.status, bare.headers.get("x-path")]).toEqual([200, ".../..."]);
  });

  it("create takes CountAPI's parameters, defaults and error messages", async () => {
    const ns = freshNamespace("create");
    const made = await call(
      `/create?namespace=${ns}&key=page&value=5&enable_reset=1&update_lowerbound=-2&update_upperbound=10`,
    );
    expect([made.status, made.body]).toEqual([
      200,
      { namespace: ns, key: "page", value: 5 },
    ]);
    expect(made.headers.get("x-path")).toBe(`${ns}/page`);
    const twice = await call(`/create?namespace=${ns}&key=page`);
    expect([twice.status, twice.body]).toEqual([
      409,
      { error: "Key already exists, please use a different key." },
    ]);
    const random = await call("/create");
    expect(random.status).toBe(200);
    expect(random.body.namespace).toBe("default");
    expect(random.body.key).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(random.body.value).toBe(0);
    const errors: [string, string][] = [
      ["/create?key=aa", "Malformed Namespace/Key"],
      ["/create?namespace=aa", "Malformed Namespace/Key"],
      ["/create?update_upperbound=-1", "update_upperbound must be positive"],
      ["/create?update_lowerbound=1", "update_lowerbound must be negative"],
    ];
    for (const [path, error] of errors) {
      const refused = await call(path);
      expect([refused.status, refused.body], path).toEqual([400, { error }]);
    }
    expect((await call("/create?value=ten")).status).toBe(400);
  });

  it("set needs enable_reset, update keeps within the bounds, and both answer 404 when missing", async () => {
    const ns = freshNamespace("rules");
    await call(
      `/create?namespace=${ns}&key=open&enable_reset=true&update_lowerbound=-5&update_upperbound=100`,
    );
    await call(`/hit/${ns}/plain`);
    const set = await call(`/set/${ns}/open?value=42`);
    expect([set.status, set.body]).toEqual([200, { old_value: 0, value: 42 }]);
    const refused = await call(`/set/${ns}/plain?value=42`);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toContain("enable_reset");
    expect((await call(`/update/${ns}/open?amount=100`)).body).toEqual({
      value: 142,
    });
    const outside = await call(`/update/${ns}/open?amount=101`);
    expect(outside.status).toBe(403);
    expect(outside.body.error).toBe(
      "The amount must lie from -5 to 100, the update bounds this counter was created with.",
    );
    expect((await call(`/update/${ns}/plain?amount=2`)).status).toBe(403);
    expect((await call(`/update/${ns}/plain?amount=-1`)).body).toEqual({
      value: 0,
    });
    expect(await service.value(ns, "open")).toBe(142n);
    expect(await service.value(ns, "plain")).toBe(0n);
    for (const path of [
      `/set/${ns}/missing?value=1`,
      `/update/${ns}/missing?amount=1`,
    ]) {
      const missing = await call(path);
      expect([missing.status, missing.body]).toEqual([
        404,
        { error: "Key not found" },
      ]);
    }
    expect((await call(`/set/${ns}/open`)).body).toEqual({
      error: "`value` is required",
    });
    expect((await call(`/update/${ns}/open?amount=1.5`)).status).toBe(400);
  });

  it("info answers exactly CountAPI's fields, and stats its four", async () => {
    const ns = freshNamespace("info");
    const before = Date.now();
    await call(`/create?namespace=${ns}&key=key1&value=7&enable_reset=1`);
    const info = await call(`/info/${ns}/key1`);
    expect(info.status).toBe(200);
    expect(Object.keys(info.body).sort()).toEqual([
      "created",
      "enable_reset",
      "key",
      "namespace",
      "ttl",
      "update_lowerbound",
      "update_upperbound",
      "value",
    ]);
    expect(info.body).toMatchObject({
      namespace: ns,
      key: "key1",
      value: 7,
      enable_reset: true,
      update_lowerbound: -1,
      update_upperbound: 1,
    });
    expect(info.body.created).toBeGreaterThanOrEqual(before - 1000);
    // Six months of 183 days, counted from the last write.
    expect(info.body.ttl).toBeGreaterThan(183 * 86_400_000 - 60_000);
    expect(info.body.ttl).toBeLessThanOrEqual(183 * 86_400_000);
    expect((await call(`/info/${ns}/nope`)).status).toBe(404);
    const stats = await call("/stats");
    expect(Object.keys(stats.body).sort()).toEqual([
      "keys_created",
      "keys_updated",
      "requests",
      "version",
    ]);
    expect(stats.body.keys_created).toBeGreaterThan(0);
  });

  it("answers JSONP with ?callback= and refuses a callback that is not a function name", async () => {
    const ns = freshNamespace("jsonp");
    const hit = await call(`/hit/${ns}/key1?callback=window.counted`);
    expect(hit.status).toBe(200);
    expect(hit.headers.get("content-type")).toBe(
      "application/javascript; charset=utf-8",
    );
    expect(hit.body).toBe(
      `/**/ typeof window.counted === 'function' && window.counted({"value":1});`,
    );
    const error = await call(`/get/${ns}/nope?callback=cb`);
    expect([error.status, error.body]).toEqual([
      404,
      `/**/ typeof cb === 'function' && cb({"value":null});`,
    ]);
    const refused = await call(`/hit/${ns}/key1?callback=alert(1)`);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain("callback");
    expect(await service.value(ns, "key1")).toBe(1n);
  });

  it("is open to any origin and lets scripts read X-Path; other methods are 405", async () => {
    const ns = freshNamespace("cors");
    const hit = await call(`/hit/${ns}/key1`, {
      headers: { origin: "https://page.example" },
    });
    expect(hit.headers.get("access-control-allow-origin")).toBe("*");
    expect(hit.headers.get("access-control-expose-headers")).toContain(
      "X-Path",
    );
    const preflight = await service.fetch(`/set/${ns}/key1`, {
      method: "OPTIONS",
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("allow")).toBe("GET, POST, OPTIONS");
    const wrong = await call(`/hit/${ns}/key1`, { method: "DELETE" });
    expect([wrong.status, wrong.body]).toEqual([
      405,
      { error: "This route only accepts GET, OPTIONS." },
    ]);
    expect(await service.value(ns, "key1")).toBe(1n);
  });
});

describe("Abacus routes", () => {
  it("create shows an admin key once; the token routes need it, by header or query", async () => {
    const ns = freshNamespace("abacus");
    const made = await call(`/create/${ns}/key1?initializer=10`, post);
    expect(made.status).toBe(201);
    expect(Object.keys(made.body).sort()).toEqual([
      "admin_key",
      "key",
      "namespace",
      "value",
    ]);
    expect(made.body).toMatchObject({ namespace: ns, key: "key1", value: 10 });
    const admin = made.body.admin_key as string;
    expect((await call(`/create/${ns}/key1`, post)).status).toBe(409);
    const noToken = await call(`/set/${ns}/key1?value=1`, post);
    expect([noToken.status, noToken.body.error]).toEqual([
      400,
      "Token is required, please provide a token in the format of a Bearer token header or ?token=ADMIN_TOKEN",
    ]);
    const wrong = await call(
      `/set/${ns}/key1?value=1&token=${admin.replace(/.$/, "x")}`,
      post,
    );
    expect([wrong.status, wrong.body]).toEqual([
      401,
      { error: "token is invalid" },
    ]);
    const set = await call(`/set/${ns}/key1?value=50&token=${admin}`, post);
    expect([set.status, set.body]).toEqual([
      200,
      { status: "ok", message: `${ns}/key1 is now 50`, value: 50 },
    ]);
    const bearer = {
      method: "POST",
      headers: { authorization: `Bearer ${admin}` },
    };
    expect((await call(`/update/${ns}/key1?value=-8`, bearer)).body.value).toBe(
      42,
    );
    const zero = await call(`/update/${ns}/key1?value=0`, bearer);
    expect(zero.status).toBe(400);
    expect(zero.body.error).toMatch(/^changing value by 0 does nothing/);
    expect((await call(`/reset/${ns}/key1`, bearer)).body.value).toBe(0);
    expect(await service.value(ns, "key1")).toBe(0n);
    const deleted = await call(`/delete/${ns}/key1`, bearer);
    expect([deleted.status, deleted.body]).toEqual([
      200,
      { status: "ok", message: `Deleted key: ${ns}/key1` },
    ]);
    expect((await call(`/get/${ns}/key1`)).status).toBe(404);
    // A new counter under the old name is a new one: the old admin key does nothing there.
    await call(`/hit/${ns}/key1`);
    expect((await call(`/reset/${ns}/key1`, bearer)).status).toBe(400);
  });

  it("a create retried with its Idempotency-Key is answered the same admin key", async () => {
    const ns = freshNamespace("recreate");
    const once = {
      method: "POST",
      headers: { "idempotency-key": crypto.randomUUID() },
    };
    const made = await call(`/create/${ns}/key1?initializer=4`, once);
    const again = await call(`/create/${ns}/key1?initializer=4`, once);
    expect([made.status, again.status]).toEqual([201, 201]);
    // Had the retry created again, it would have found the name taken (409).
    expect(again.body).toEqual(made.body);
    const reset = await call(
      `/reset/${ns}/key1?token=${made.body.admin_key}`,
      post,
    );
    expect([reset.status, reset.body.value]).toEqual([200, 0]);
    // Another create under that key is refused; one without a key finds the name taken.
    const other = await call(`/create/${ns}/key1?initializer=5`, once);
    expect([other.status, other.body.error]).toEqual([
      400,
      "This Idempotency-Key was already used for a different request.",
    ]);
    expect((await call(`/create/${ns}/key1`, post)).status).toBe(409);
    // A short key could be guessed, and its replay would hand out the admin key.
    const short = await call(`/create/${ns}/key2`, {
      method: "POST",
      headers: { "idempotency-key": "retry-1" },
    });
    expect(short.status).toBe(400);
    expect(short.body.error).toMatch(/at least 16 characters/);
    expect((await call(`/get/${ns}/key2`)).status).toBe(404);
  });

  it("a counter created without an admin key refuses the token routes with 400", async () => {
    const ns = freshNamespace("genuine");
    await call(`/hit/${ns}/key1`);
    const refused = await call(`/delete/${ns}/key1?token=anything`, post);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain("without an admin key");
    expect(await service.value(ns, "key1")).toBe(1n);
    expect((await call(`/reset/${ns}/key1`, { method: "GET" })).status).toBe(
      405,
    );
  });

  it("/create/ picks random names", async () => {
    const made = await call("/create/", post);
    expect(made.status).toBe(201);
    expect(made.body.namespace).toMatch(/^[0-9a-f]{16}$/);
    expect(made.body.key).toMatch(/^[0-9a-f]{16}$/);
    expect(made.headers.get("x-path")).toBe(
      `${made.body.namespace}/${made.body.key}`,
    );
  });

  it("a configured write token acts as an admin key; without it the names are guarded", async () => {
    const ns = freshNamespace("operator");
    const operator = { authorization: "Bearer operator-token-1" };
    expect((await call(`/hit/${ns}/key1`, undefined, tokened)).status).toBe(
      401,
    );
    expect(
      (await call(`/hit/${ns}/key1`, { headers: operator }, tokened)).body,
    ).toEqual({ value: 1 });
    const reset = await call(
      `/reset/${ns}/key1`,
      { method: "POST", headers: operator },
      tokened,
    );
    expect([reset.status, reset.body.value]).toEqual([200, 0]);
  });

  it("an operator's token binds no owner key on the CountAPI routes either", async () => {
    const ns = freshNamespace("operator-owned");
    const operator = { authorization: "Bearer operator-token-1" };
    const made = await call(
      `/create/${ns}/stars?initializer=10`,
      { method: "POST", headers: operator },
      tokened,
    );
    expect(made.status).toBe(201);
    const lowered = await call(
      `/update/${ns}/stars?amount=-1`,
      { headers: operator },
      tokened,
    );
    expect([lowered.status, lowered.body.value]).toEqual([200, 9]);
  });

  it("shields draw the badge, counting or not, with Abacus's parameters", async () => {
    const ns = freshNamespace("shield");
    const counted = await call(
      `/hit/${ns}/key1/shield?text=visits&bgcolor=ff0000&textcolor=000`,
    );
    expect(counted.status).toBe(200);
    expect(counted.headers.get("content-type")).toBe(
      "image/svg+xml; charset=utf-8",
    );
    expect(counted.body).toContain("<title>visits: 1</title>");
    expect(counted.body).toContain('fill="#ff0000"');
    expect(counted.body).toContain('<g fill="#000"');
    const read = await call(`/get/${ns}/key1/shield`);
    expect(read.body).toContain("<title>counter: 1</title>");
    expect((await call(`/get/${ns}/none/shield`)).status).toBe(404);
    expect((await call(`/get/${ns}/key1/shield?bgcolor=url(x)`)).status).toBe(
      400,
    );
  });

  it("in abacus mode, info and stats answer Abacus's fields and a missing key is exists: false", async () => {
    const ns = freshNamespace("mode");
    const made = await call(`/create/${ns}/key1?initializer=3`, post, abacus);
    expect(made.status).toBe(201);
    const info = await call(`/info/${ns}/key1`, undefined, abacus);
    expect(Object.keys(info.body).sort()).toEqual([
      "exists",
      "expires_in",
      "expires_str",
      "full_key",
      "is_genuine",
      "value",
    ]);
    expect(info.body).toMatchObject({
      value: 3,
      full_key: `K:${ns}:key1`,
      is_genuine: false,
      exists: true,
    });
    expect(info.body.expires_str).toMatch(/^439[12]h\d+m[\d.]+s$/);
    const missing = await call(`/info/${ns}/none`, undefined, abacus);
    expect([missing.status, missing.body.exists, missing.body.value]).toEqual([
      200,
      false,
      -1,
    ]);
    const get = await call(`/get/${ns}/none`, undefined, abacus);
    expect([get.status, get.body]).toEqual([404, { error: "Key not found" }]);
    const stats = await call("/stats", undefined, abacus);
    expect(stats.body).toHaveProperty("total_keys");
    expect(stats.body).not.toHaveProperty("keys_created");
    expect(stats.body.uptime).toMatch(/^(\d+h)?(\d+m)?[\d.]+m?s$/);
    // The commands count what the shards ran: one create, a hit and a get of it add their own.
    await call(`/hit/${ns}/key1`, undefined, abacus);
    await call(`/get/${ns}/key1`, undefined, abacus);
    const { commands } = (await call("/stats", undefined, abacus)).body;
    expect(Object.keys(commands).sort()).toEqual([
      "create",
      "get",
      "hit",
      "total",
    ]);
    expect(commands.create).toBeGreaterThanOrEqual(1);
    expect(commands.hit).toBeGreaterThanOrEqual(1);
    expect(commands.total).toBeGreaterThanOrEqual(
      commands.create + commands.hit + commands.get,
    );
  });

  it("answers Abacus's healthcheck in every mode", async () => {
    for (const on of [abacus, service]) {
      const health = await call("/healthcheck", undefined, on);
      expect(health.status).toBe(200);
      expect(Object.keys(health.body).sort()).toEqual(["status", "uptime"]);
      expect(health.body.status).toBe("ok");
      expect(health.body.uptime).toMatch(/^(\d+h)?(\d+m)?[\d.]+m?s$/);
    }
  });
});

describe("a counter's rules", () => {
  it("are stored with it: a restarted runtime keeps its rules, creation time and admin key", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-compat-restart-"));
    try {
      const first = await startService({ persistDir });
      const ns = freshNamespace("kept");
      await first.fetch(
        `/create?namespace=${ns}&key=rules&value=3&enable_reset=1&update_upperbound=50`,
      );
      const made = await first.fetch(`/create/${ns}/admin`, { method: "POST" });
      const { admin_key } = await made.json();
      const before = await (await first.fetch(`/info/${ns}/rules`)).json();
      await first.stop();

      const second = await startService({ persistDir });
      const after = await call(`/info/${ns}/rules`, undefined, second);
      expect(after.body).toEqual({ ...before, ttl: after.body.ttl });
      expect(after.body).toMatchObject({
        enable_reset: true,
        update_upperbound: 50,
        value: 3,
      });
      expect(
        (await call(`/update/${ns}/rules?amount=50`, undefined, second)).body,
      ).toEqual({ value: 53 });
      const reset = await call(
        `/reset/${ns}/admin?token=${admin_key}`,
        post,
        second,
      );
      expect([reset.status, reset.body.value]).toEqual([200, 0]);
      expect(
        (await call(`/reset/${ns}/admin?token=other`, post, second)).status,
      ).toBe(401);
      await second.stop();
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });

  it("a retried write with its Idempotency-Key is applied once", async () => {
    const ns = freshNamespace("once");
    const headers = { "idempotency-key": `hit-${ns}` };
    expect((await call(`/hit/${ns}/page`, { headers })).body).toEqual({
      value: 1,
    });
    expect((await call(`/hit/${ns}/page`, { headers })).body).toEqual({
      value: 1,
    });
    expect(await service.value(ns, "page")).toBe(1n);
  });
});

describe("upgrading a shard stored before counters kept rules", () => {
  it("adds the columns at start-up and keeps every counter, which then follows the defaults", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), "edgecount-compat-upgrade-"));
    try {
      const ns = freshNamespace("old");
      const first = await startService({ persistDir });
      for (const key of ["one", "two", "six"]) {
        await first.fetch(
          `/v1/counters/${ns}/${key}/incr?by=${key.length}`,
          post,
        );
      }
      await first.stop();
      // Take the shards back to the schema of the release before: no created_ms, no settings.
      const shards = join(persistDir, "do");
      const files = readdirSync(shards, {
        recursive: true,
        encoding: "utf8",
      }).filter((f) => f.endsWith(".sqlite"));
      let downgraded = 0;
      for (const file of files) {
        const db = new DatabaseSync(join(shards, file));
        const tables = db
          .prepare("SELECT name FROM sqlite_master WHERE name = 'counters'")
          .all();
        if (tables.length > 0) {
          db.exec("ALTER TABLE counters DROP COLUMN settings");
          db.exec("ALTER TABLE counters DROP COLUMN created_ms");
          downgraded += 1;
        }
        db.close();
      }
      expect(downgraded).toBeGreaterThan(0);

      const upgraded = await startService({ persistDir });
      for (const key of ["one", "two", "six"])
        expect(await upgraded.value(ns, key)).toBe(3n);
      const info = await call(`/info/${ns}/one`, undefined, upgraded);
      expect(info.body).toMatchObject({
        value: 3,
        created: 0,
        ttl: -1,
        enable_reset: false,
      });
      expect((await call(`/hit/${ns}/one`, undefined, upgraded)).body).toEqual({
        value: 4,
      });
      expect(
        (await call(`/set/${ns}/two?value=1`, undefined, upgraded)).status,
      ).toBe(403);
      const made = await call(
        `/create?namespace=${ns}&key=new&enable_reset=1`,
        undefined,
        upgraded,
      );
      expect(made.status).toBe(200);
      expect(
        (await call(`/set/${ns}/new?value=9`, undefined, upgraded)).body,
      ).toEqual({ old_value: 0, value: 9 });
      await upgraded.stop();
    } finally {
      rmSync(persistDir, { recursive: true, force: true });
    }
  });
});
