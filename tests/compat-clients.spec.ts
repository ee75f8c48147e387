// Published CountAPI clients against the compatible routes, each changed only in its base URL:
// countapi-js (npm) runs its own mocha suite, and the PyPI `countapi` client makes every call
// it has (tests/clients/countapi_py_calls.py). Both are installed by `make test`'s set-up.
import { execFile } from "node:child_process";
import {
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const run = promisify(execFile);
const clients = resolve("tests/clients");
let service: Service;
let url: string;
const scratch = mkdtempSync(join(tmpdir(), "edgecount-countapi-js-"));

beforeAll(async () => {
  service = await startService({ listen: true });
  url = service.url!;
});
afterAll(async () => {
  await service.stop();
  rmSync(scratch, { recursive: true, force: true });
});

it("countapi-js passes its own test suite", async () => {
  // The suite expects these counters to exist, as they did on countapi.xyz.
  const seed = [
    "/hit/default/test",
    "/hit/test/test",
    "/create?key=d7b97e5f-69a4-4933-8928-b9ee92f6b6ca",
    "/create?key=c23ce4fa-4b78-4cbb-b53a-da3c2c38bb18&enable_reset=1",
    "/create?key=ce420ebf-369c-4a19-92b1-8b02fb6e72ba&update_upperbound=100",
  ];
  for (const path of seed)
    expect((await fetch(url + path)).status, path).toBe(200);

  const packageDir = join(scratch, "countapi-js");
  cpSync(join(clients, "node_modules/countapi-js"), packageDir, {
    recursive: true,
  });
  const library = join(packageDir, "lib/index.js");
  const original = readFileSync(library, "utf8");
  const pointed = original.replace(
    '"https://api.countapi.xyz"',
    JSON.stringify(url),
  );
  expect(pointed).not.toBe(original);
  writeFileSync(library, pointed);

  const mocha = join(clients, "node_modules/mocha/bin/mocha");
  const { stdout } = await run(
    process.execPath,
    [mocha, "--reporter", "json", "test/index.js"],
    {
      cwd: packageDir,
      env: { ...process.env, NODE_PATH: join(clients, "node_modules") },
      timeout: 120_000,
      maxBuffer: 8 * 1024 * 1024,
    },
  ).catch((error) => {
    throw new Error(
      `countapi-js suite failed:\n${error.stdout}\n${error.stderr}`,
    );
  });
  const report = JSON.parse(stdout);
  expect(report.failures).toEqual([]);
  expect(report.stats.passes).toBe(30);
});

it("the PyPI countapi client's every call works", async () => {
  const python = resolve(".tools/countapi-venv/bin/python");
  const ns = freshNamespace("py");
  const { stdout } = await run(
    python,
    [join(clients, "countapi_py_calls.py"), url, ns],
    {
      timeout: 120_000,
    },
  ).catch((error) => {
    throw new Error(
      `countapi (PyPI) calls failed:\n${error.stdout}\n${error.stderr}`,
    );
  });
  expect(stdout).toContain("countapi (PyPI) calls: ok");
  expect(await service.value(ns, "views")).toBe(100n);
});
