// What reading a whole namespace costs (docs/dashboard.md): the release build under `workerd
// serve` on core 1 (16 shards), filled through /v1/import with a namespace of many keys and
// days; each read is timed on its first ask (nothing kept) with the rows the shards read, and
// the dashboard is opened in headless Chromium and timed until it shows its first figures.
//
// Usage: node loadtest/namespace-reads.mjs [--out DIR] [--keys N] [--days N] [--wide-keys N]
//   [--wide-days N]
//   --keys, --days            the dashboard's namespace (default 10,000 keys, 400 days each)
//   --wide-keys, --wide-days  the top keys' namespace (default 100,000 keys, 7 days each)
// Writes namespace-reads.json in DIR (default build/namespace-reads) and prints a table.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";

const { values: args } = parseArgs({
  options: {
    out: { type: "string", default: "build/namespace-reads" },
    keys: { type: "string", default: "10000" },
    days: { type: "string", default: "400" },
    "wide-keys": { type: "string", default: "100000" },
    "wide-days": { type: "string", default: "7" },
  },
});
const OUT = resolve(args.out);
const PORT = 8831;
const BASE = `http://127.0.0.1:${PORT}`;
const CHROMIUM = process.env.EDGECOUNT_CHROMIUM ?? "/usr/bin/chromium";
const log = (line) => console.log(`[namespace-reads] ${line}`);

rmSync(OUT, { recursive: true, force: true });
mkdirSync(join(OUT, "state"), { recursive: true });
const config = join(OUT, "workerd.capnp");
const made = spawnSync(
  process.execPath,
  ["scripts/workerd-config.mjs", String(PORT), join(OUT, "state"), config],
  { stdio: "inherit" },
);
if (made.status !== 0) process.exit(1);
const workerd = spawn(
  "taskset",
  ["-c", "1", "node_modules/.bin/workerd", "serve", config],
  { stdio: ["ignore", "ignore", "inherit"], detached: true },
);
const stop = () => {
  try {
    process.kill(-workerd.pid, "SIGTERM");
  } catch {}
};
process.on("exit", stop);

async function up() {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${BASE}/v1/health`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("workerd did not come up");
}

/** Today in UTC (the default zone) as days since 1970-01-01. */
const todayDay = Math.floor(Date.now() / 86_400_000);

/** Imports `keys` keys of `ns`, each with `days` days (today's in its counter row). */
async function fill(ns, keys, days) {
  const started = Date.now();
  let batch = [];
  let bytes = 0;
  const send = async () => {
    const response = await fetch(`${BASE}/v1/import`, {
      method: "POST",
      body: `${batch.join("\n")}\n`,
    });
    const text = await response.text();
    if (!response.ok || text.includes('"ok":false'))
      throw new Error(`import: ${response.status} ${text.slice(0, 300)}`);
    batch = [];
    bytes = 0;
  };
  for (let k = 0; k < keys; k++) {
    // A page's daily views fall with its rank, as a site's do.
    const daily = Math.max(1, Math.round(1000 / (k + 1)));
    const line = JSON.stringify({
      ns,
      key: `page-${k}`,
      counter: {
        value: daily * days,
        version: 1,
        today: { day: todayDay, count: daily },
      },
      days: Array.from({ length: days - 1 }, (_, back) => ({
        day: todayDay - back - 1,
        count: daily,
      })),
    });
    if (batch.length === 1000 || bytes + line.length > 7 * 1024 * 1024)
      await send();
    batch.push(line);
    bytes += line.length + 1;
    if ((k + 1) % 10_000 === 0) log(`${ns}: ${k + 1} of ${keys} keys`);
  }
  if (batch.length) await send();
  log(
    `${ns}: ${keys} keys of ${days} days imported in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
}

/** One read, timed, with what the shards read for it. */
async function timed(path) {
  const started = performance.now();
  const response = await fetch(`${BASE}${path}`);
  const body = await response.json();
  const ms = performance.now() - started;
  if (!response.ok)
    throw new Error(`${path}: ${response.status} ${JSON.stringify(body)}`);
  return {
    path,
    ms: Math.round(ms * 10) / 10,
    rows_read: Number(response.headers.get("x-edgecount-rows-read")),
    kept: response.headers.get("x-edgecount-kept") === "true",
    count: body.count,
  };
}

/** The first reads of `ns` for each period: each period is a read of its own, never one kept. */
async function reads(ns, periods, route) {
  const rows = [];
  for (const period of periods) {
    rows.push(
      await timed(`/v1/namespaces/${ns}/${route}?period=${period}&limit=10`),
    );
    log(JSON.stringify(rows.at(-1)));
  }
  return rows;
}

/** Opens the dashboard on `ns` and times it until it shows the period's views and top keys,
 * once what the isolate kept of the reads before has lapsed. */
async function dashboard(ns) {
  await new Promise((r) => setTimeout(r, 10_500));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    await page.goto("about:blank");
    const started = performance.now();
    await page.goto(`${BASE}/dashboard?ns=${ns}`);
    await page.waitForFunction(
      () => document.getElementById("views")?.textContent !== "–",
      undefined,
      { timeout: 30_000, polling: 10 },
    );
    const firstFigures = performance.now() - started;
    await page.waitForFunction(
      () => document.querySelectorAll("#top tr").length > 0,
      undefined,
      { timeout: 30_000, polling: 10 },
    );
    const topShown = performance.now() - started;
    const views = await page.locator("#views").textContent();
    return {
      first_figures_ms: Math.round(firstFigures),
      top_keys_ms: Math.round(topShown),
      views_shown: views,
    };
  } finally {
    await browser.close();
  }
}

try {
  await up();
  const keys = Number(args.keys);
  const days = Number(args.days);
  const wideKeys = Number(args["wide-keys"]);
  const wideDays = Number(args["wide-days"]);
  await fill("dash", keys, days);
  const dashReads = await reads(
    "dash",
    ["today", "7d", "30d", `${days}d`],
    "days",
  );
  const opened = await dashboard("dash");
  log(`dashboard: ${JSON.stringify(opened)}`);
  await fill("wide", wideKeys, wideDays);
  const wideReads = await reads("wide", ["today", `${wideDays}d`], "top");
  const summary = {
    date: new Date().toISOString(),
    commit: spawnSync("git", ["rev-parse", "--short", "HEAD"], {
      encoding: "utf8",
    }).stdout.trim(),
    shards: 16,
    dashboard_namespace: { keys, days, reads: dashReads, dashboard: opened },
    wide_namespace: { keys: wideKeys, days: wideDays, reads: wideReads },
  };
  writeFileSync(
    join(OUT, "namespace-reads.json"),
    `${JSON.stringify(summary, null, 2)}\n`,
  );
  console.log(`\n| namespace | read | ms | rows read |\n|---|---|---:|---:|`);
  for (const [name, part] of [
    [`${keys} keys x ${days} days`, summary.dashboard_namespace],
    [`${wideKeys} keys x ${wideDays} days`, summary.wide_namespace],
  ])
    for (const row of part.reads)
      console.log(
        `| ${name} | ${row.path.split("/").slice(-1)[0]} | ${row.ms} | ${row.rows_read} |`,
      );
  console.log(
    `\ndashboard on ${keys} keys: first figures ${opened.first_figures_ms} ms, top keys ${opened.top_keys_ms} ms after the address was opened`,
  );
} finally {
  stop();
}
