#!/usr/bin/env node
// Moves a deployment's counters and cache entries out and in (`make export`, `make import`):
//
//   node scripts/transfer.mjs export <url> [--ns NS] [--token T] [--out FILE]
//   node scripts/transfer.mjs import <url> [--token T] [--in FILE]
//
// Export follows `GET /v1/export` page by page (its `next` cursor) and writes NDJSON, one line
// per name; import sends a file in parts of at most 1,000 lines and 8 MiB to `POST
// /v1/import` and reports every line refused. The token (an admin token; also read from
// EDGECOUNT_TOKEN) is needed once tokens are configured. Progress goes to standard error.
import { createReadStream, createWriteStream } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    ns: { type: "string" },
    token: { type: "string", default: process.env.EDGECOUNT_TOKEN ?? "" },
    out: { type: "string" },
    in: { type: "string" },
  },
});
const [command, base] = positionals;
if (!["export", "import"].includes(command) || !base) {
  console.error(
    "usage: transfer.mjs export <url> [--ns NS] [--token T] [--out FILE]\n" +
      "       transfer.mjs import <url> [--token T] [--in FILE]",
  );
  process.exit(2);
}
const headers = options.token
  ? { authorization: `Bearer ${options.token}` }
  : {};
const say = (line) => process.stderr.write(`[${command}] ${line}\n`);

async function call(path, init = {}) {
  const url = new URL(path, base);
  for (let attempt = 1; ; attempt++) {
    let response;
    try {
      response = await fetch(url, {
        ...init,
        headers: { ...headers, ...init.headers },
      });
    } catch (error) {
      response = { ok: false, status: 0, text: async () => String(error) };
    }
    if (response.ok) return response.text();
    const body = await response.text();
    // Both requests are safe to repeat: an export page is a read, an import line stores the
    // same thing twice.
    if ((response.status === 0 || response.status >= 500) && attempt < 5) {
      say(`${response.status || "no answer"}; trying again (${attempt} of 4)`);
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
      continue;
    }
    throw new Error(`${url.pathname}: ${response.status} ${body}`);
  }
}

async function exportAll() {
  const out = options.out ? createWriteStream(options.out) : process.stdout;
  let cursor = null;
  let lines = 0;
  let pages = 0;
  do {
    const query = new URLSearchParams();
    if (options.ns) query.set("ns", options.ns);
    if (cursor) query.set("cursor", cursor);
    const text = await call(`/v1/export?${query}`);
    const rows = text.split("\n").filter(Boolean);
    cursor = JSON.parse(rows.pop()).next;
    for (const row of rows) out.write(`${row}\n`);
    lines += rows.length;
    pages += 1;
    say(`${lines} lines in ${pages} pages${cursor ? "…" : ", done"}`);
  } while (cursor);
  if (out !== process.stdout) await new Promise((resolve) => out.end(resolve));
}

const MAX_LINES = 1000;
const MAX_BYTES = 8 * 1024 * 1024;

async function importAll() {
  const input = options.in ? createReadStream(options.in) : process.stdin;
  const lines = createInterface({ input, crlfDelay: Infinity });
  let part = [];
  let bytes = 0;
  let sent = 0;
  let refused = 0;
  const send = async () => {
    if (part.length === 0) return;
    const answers = (
      await call("/v1/import", { method: "POST", body: `${part.join("\n")}\n` })
    )
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    for (const answer of answers) {
      if (answer.error) {
        refused += 1;
        say(
          `line ${sent + answer.line}: ${answer.error.code}: ${answer.error.message}`,
        );
      }
    }
    sent += part.length;
    say(`${sent} lines sent, ${refused} refused`);
    part = [];
    bytes = 0;
  };
  for await (const line of lines) {
    const size = Buffer.byteLength(line) + 1;
    if (part.length === MAX_LINES || bytes + size > MAX_BYTES) await send();
    part.push(line);
    bytes += size;
  }
  await send();
  if (refused > 0) process.exitCode = 1;
}

try {
  await (command === "export" ? exportAll() : importAll());
} catch (error) {
  say(error.message);
  process.exit(1);
}
