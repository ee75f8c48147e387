// `make deploy`'s preflight (scripts/deploy-preflight.mjs): it refuses to deploy open writes
// unless asked for by name, and says what a deployment makes public.
import { execFile } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "edgecount-preflight-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The preflight over wrangler.toml with `extraVars` added and `edit` made, and the secrets
 * named. */
async function preflight(
  extraVars: string,
  secrets: string,
  env: Record<string, string> = {},
  extraArgs: string[] = [],
  edit: (toml: string) => string = (toml) => toml,
) {
  const config = join(
    dir,
    `wrangler-${Math.random().toString(36).slice(2)}.toml`,
  );
  const toml = edit(readFileSync("wrangler.toml", "utf8"));
  writeFileSync(
    config,
    toml
      .replace(
        'main = "build/entry.js"',
        `main = ${JSON.stringify(resolve("build/entry.js"))}`,
      )
      .replace("[vars]\n", `[vars]\n${extraVars}`),
  );
  try {
    const { stdout } = await run(
      process.execPath,
      [
        "scripts/deploy-preflight.mjs",
        "--config",
        config,
        "--secrets",
        secrets,
        ...extraArgs,
      ],
      { env: { ...process.env, EDGECOUNT_OPEN: "", ...env } },
    );
    return { code: 0, out: stdout };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, out: failed.stdout + failed.stderr };
  }
}

it("refuses the committed config, which has no token, with what to do", async () => {
  const { code, out } = await preflight("", "");
  expect(code).toBe(1);
  expect(out).toContain("the deployment would answer reads only");
  expect(out).toContain("anyone could set, reset and delete every counter");
  expect(out).toContain("wrangler secret put EDGECOUNT_ADMIN_TOKENS");
  expect(out).toContain("EDGECOUNT_OPEN=1 make deploy");
});

it("passes with an admin token set as a secret, and says what is public", async () => {
  const { code, out } = await preflight(
    'EDGECOUNT_PUBLIC_NAMESPACES = "pages,likes"\n',
    "EDGECOUNT_ADMIN_TOKENS",
  );
  expect(code).toBe(0);
  expect(out).toContain(
    "public counting (anyone may add 1 and read): pages, likes",
  );
  expect(out).toContain("/v1/stats and /metrics: need an admin token");
  expect(out).toContain("demo page at /: not served");
  expect(out).toMatch(
    /bundle: [\d.]+ MiB, [\d.]+ MiB gzipped \(limits: 3 MiB on Workers Free/,
  );
  expect(out).not.toContain("secrets still to set");
});

it("passes open writes only when asked for by name, and says so", async () => {
  const { code, out } = await preflight("", "", { EDGECOUNT_OPEN: "1" });
  expect(code).toBe(0);
  expect(out).toContain("OPEN: anyone may set, reset and delete every counter");
  expect(out).toContain("secrets still to set: EDGECOUNT_ADMIN_TOKENS");
});

it("warns of tokens written into the committed [vars]", async () => {
  const { code, out } = await preflight(
    'EDGECOUNT_WRITE_TOKENS = "a-token-in-the-open"\n',
    "",
  );
  expect(code).toBe(0);
  expect(out).toContain("EDGECOUNT_WRITE_TOKENS in [vars] are committed");
  expect(out).not.toContain("a-token-in-the-open");
});

it("takes no token from a list with no entry, nor open writes from the committed [vars]", async () => {
  const empty = await preflight('EDGECOUNT_ADMIN_TOKENS = " , "\n', "");
  expect(empty.code).toBe(1);
  const committed = await preflight('EDGECOUNT_OPEN = "1"\n', "");
  expect(committed.code).toBe(1);
});

it("names the per-visitor limit public namespaces bring", async () => {
  const { out } = await preflight(
    'EDGECOUNT_PUBLIC_NAMESPACES = "pages"\n',
    "EDGECOUNT_ADMIN_TOKENS",
  );
  expect(out).toContain("rate limit per client: 10/s");
  expect(out).toContain(
    "reads of over 40 days' visitors: 10/s, a bucket of their own",
  );
  const off = await preflight(
    'EDGECOUNT_PUBLIC_NAMESPACES = "pages"\nEDGECOUNT_RATE_LIMIT = "0"\n',
    "EDGECOUNT_ADMIN_TOKENS",
  );
  expect(off.out).toContain(
    "rate limit per client: off; reads of over 40 days' visitors: off",
  );
});

it("deploys with EDGECOUNT_OPEN passed on only to a deployment with nothing else configured", async () => {
  // A stand-in wrangler on the PATH, which prints what it was asked to do.
  const bin = join(dir, "bin");
  mkdirSync(bin, { recursive: true });
  const fake = join(bin, "wrangler");
  writeFileSync(fake, '#!/bin/sh\necho "wrangler-was-run: $*"\n');
  chmodSync(fake, 0o755);
  const path = `${bin}:${process.env.PATH}`;
  const deploy = (extraVars: string, secrets: string) =>
    preflight(extraVars, secrets, { EDGECOUNT_OPEN: "1", PATH: path }, [
      "--deploy",
    ]);

  const open = await deploy("", "");
  expect(open.code).toBe(0);
  expect(open.out).toMatch(/wrangler-was-run: deploy .*--var EDGECOUNT_OPEN:1/);

  const tokened = await deploy("", "EDGECOUNT_ADMIN_TOKENS");
  expect(tokened.code).toBe(0);
  expect(tokened.out).toContain("EDGECOUNT_OPEN=1 is not passed on");
  expect(tokened.out).toMatch(/wrangler-was-run: deploy /);
  expect(tokened.out).not.toContain("EDGECOUNT_OPEN:1");

  const refused = await preflight("", "", { PATH: path }, ["--deploy"]);
  expect(refused.code).toBe(1);
  expect(refused.out).not.toContain("wrangler-was-run");
});

it("reports reads and the demo from what is deployed, not from the shell", async () => {
  // `make deploy` passes on EDGECOUNT_OPEN alone: these in the shell never reach the worker.
  const shell = await preflight("", "EDGECOUNT_ADMIN_TOKENS", {
    EDGECOUNT_PRIVATE_READS: "1",
    EDGECOUNT_DEMO: "1",
  });
  expect(shell.code).toBe(0);
  expect(shell.out).toContain("reads: public, in every namespace");
  expect(shell.out).toContain("/stream: public, as reads are");
  expect(shell.out).toContain("demo page at /: not served");
  expect(shell.out).not.toMatch(/reads: need a token|served \(/);
  expect(shell.out).toContain(
    "EDGECOUNT_PRIVATE_READS, EDGECOUNT_DEMO in the environment are not deployed",
  );

  const committed = await preflight(
    'EDGECOUNT_PRIVATE_READS = "1"\nEDGECOUNT_DEMO = "true"\n',
    "EDGECOUNT_ADMIN_TOKENS",
    { EDGECOUNT_PRIVATE_READS: "0", EDGECOUNT_DEMO: "" },
  );
  expect(committed.out).toContain("reads: need a token");
  expect(committed.out).toContain("/stream: needs a token");
  expect(committed.out).toContain("demo page at /: served");

  // A secret's value cannot be read back: the report names it instead of guessing.
  const secret = await preflight(
    "",
    "EDGECOUNT_ADMIN_TOKENS,EDGECOUNT_PRIVATE_READS",
  );
  expect(secret.out).toContain(
    "reads: as the secret EDGECOUNT_PRIVATE_READS says (its value is not shown to this check)",
  );
});

it("says the committed config keeps no request logs, and names those another turns on", async () => {
  const committed = await preflight("", "EDGECOUNT_ADMIN_TOKENS");
  expect(committed.out).toContain(
    "worker request logs: none ([observability] enabled = false, no Logpush, no tail consumers;",
  );
  const logged = await preflight("", "EDGECOUNT_ADMIN_TOKENS", {}, [], (toml) =>
    toml
      .replace(
        "[observability]\nenabled = false",
        "[observability]\nenabled = true",
      )
      .replace('name = "edgecount"', 'name = "edgecount"\nlogpush = true'),
  );
  expect(logged.out).toContain(
    "request logs: Workers Logs, Logpush keep each request's URL and headers",
  );
  const unsaid = await preflight("", "EDGECOUNT_ADMIN_TOKENS", {}, [], (toml) =>
    toml.replace("[observability]\nenabled = false\n", ""),
  );
  expect(unsaid.out).toContain(
    "request logs: as the Worker's settings on the account say",
  );
});
