// The client as a package: `npm pack` of client/ holds the module, its types and README and
// nothing else; installed from the tarball into a scratch app, bundled with esbuild and run,
// it counts against the worker, and its types check. The module stays within 5 KB gzipped,
// and the worker serves its types beside it.
import { execFile } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, expect, it } from "vitest";
import { hostPage, launchBrowser } from "./browser";
import { freshNamespace, startService, type Service } from "./service";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "edgecount-package-"));
const bin = (name: string) => resolve("node_modules/.bin", name);
let service: Service;
beforeAll(async () => {
  service = await startService({ listen: true });
});
afterAll(async () => {
  await service.stop();
  rmSync(dir, { recursive: true, force: true });
});

it("stays within its size budget", () => {
  const gzipped = gzipSync(readFileSync("client/dist/edgecount.js")).length;
  console.log(`client/dist/edgecount.js: ${gzipped} bytes gzipped`);
  expect(gzipped).toBeLessThanOrEqual(5 * 1024);
});

it("packs, installs, bundles and counts, with its types", async () => {
  const { stdout } = await run(
    "npm",
    ["pack", "./client", "--json", "--pack-destination", dir],
    { env: { ...process.env, npm_config_update_notifier: "false" } },
  );
  const [packed] = JSON.parse(stdout);
  expect(
    packed.files.map((file: { path: string }) => file.path).sort(),
  ).toEqual([
    "README.md",
    "dist/edgecount.d.ts",
    "dist/edgecount.js",
    "package.json",
  ]);

  const app = join(dir, "app");
  mkdirSync(app);
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({
      name: "scratch-app",
      private: true,
      type: "module",
      dependencies: { "edgecount-client": `file:../${packed.filename}` },
    }),
  );
  await run(
    "npm",
    ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"],
    { cwd: app },
  );
  // One app, run by Node and by Chromium: it counts and shows the value it got.
  writeFileSync(
    join(app, "main.js"),
    `import { createClient } from "edgecount-client";
const where = globalThis.process?.env ?? globalThis.APP;
const edgecount = createClient({ baseUrl: where.BASE });
const value = await edgecount.incr(where.NS, "packed", 41);
globalThis.document ? (document.title = String(value)) : console.log(String(value));`,
  );
  await run(
    bin("esbuild"),
    [
      "main.js",
      "--bundle",
      "--platform=browser",
      "--format=esm",
      "--outfile=out.js",
    ],
    { cwd: app },
  );
  const ns = freshNamespace("packed");
  const counted = await run(process.execPath, ["out.js"], {
    cwd: app,
    env: { ...process.env, BASE: service.url!, NS: ns },
  });
  expect(counted.stdout.trim()).toBe("41");
  expect(await service.value(ns, "packed")).toBe(41n);

  const bundle = readFileSync(join(app, "out.js"), "utf8");
  const site = await hostPage(
    `<!doctype html><title>…</title><script>window.APP = ${JSON.stringify({ BASE: service.url, NS: ns })};</script><script type="module">${bundle.replaceAll("</script", "<\\/script")}</script>`,
  );
  const browser = await launchBrowser();
  try {
    const page = await browser.browser.newPage();
    await page.goto(site.origin);
    await page.waitForFunction(() => document.title === "82");
  } finally {
    await browser.close();
    await site.close();
  }
  expect(await service.value(ns, "packed")).toBe(82n);

  writeFileSync(
    join(app, "check.ts"),
    `import { createClient, EdgecountError } from "edgecount-client";
const edgecount = createClient({ baseUrl: "https://counter.example.com" });
export async function views(): Promise<bigint | number> {
  try {
    return await edgecount.incr("pages", "home");
  } catch (error) {
    if (error instanceof EdgecountError && error.code === "rate_limited") return 0;
    throw error;
  }
}`,
  );
  const tsc = (file: string) =>
    run(
      bin("tsc"),
      [
        "--noEmit",
        "--strict",
        "--module",
        "esnext",
        "--moduleResolution",
        "bundler",
        "--target",
        "es2022",
        "--lib",
        "es2022,dom",
        file,
      ],
      { cwd: app },
    );
  await tsc("check.ts");
  // The codes are a union: a code the API never answers does not compile.
  writeFileSync(
    join(app, "wrong.ts"),
    readFileSync(join(app, "check.ts"), "utf8").replace(
      "rate_limited",
      "rate_limted",
    ),
  );
  const wrong = await tsc("wrong.ts").then(
    () => "",
    (error: { stdout: string }) => error.stdout,
  );
  expect(wrong).toMatch(/rate_limted/);
}, 120_000);

it("types every error code the API documents", () => {
  const types = readFileSync("client/dist/edgecount.d.ts", "utf8");
  const union = /export type ApiErrorCode =([^;]+);/.exec(types)![1];
  const openapi = JSON.parse(
    readFileSync("worker/static/openapi.json", "utf8"),
  );
  const codes: string[] = openapi.components.schemas.ErrorCode.enum;
  expect([...union.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]).sort()).toEqual(
    [...codes].sort(),
  );
});

it("is served with its types beside it", async () => {
  const client = await service.fetch("/v1/client.js");
  expect(client.headers.get("x-typescript-types")).toBe("/v1/client.d.ts");
  const types = await service.fetch("/v1/client.d.ts");
  expect(types.status).toBe(200);
  expect(await types.text()).toBe(
    readFileSync("client/dist/edgecount.d.ts", "utf8"),
  );
});
