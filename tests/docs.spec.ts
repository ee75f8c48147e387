// The docs cannot drift: every shell example of the README and docs/ runs against the built
// worker, and each curl call's status and answer are checked against what the page shows
// (the conventions are in tests/doc-examples.ts). Also the README's size and the pages'.
// Links and #anchors are checked by remark-validate-links in `make lint-js`.
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  mismatch,
  parseShown,
  shellBlocks,
  textMatches,
  type ShellBlock,
} from "./doc-examples";
import { startScratchWorkerd } from "./workerd";

const run = promisify(execFile);
const PAGES = [
  "README.md",
  ...readdirSync("docs")
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
];
/** Addresses the examples use for a worker; each becomes the test's own. */
const SHOWN_ADDRESSES = [
  "http://127.0.0.1:8787",
  "https://counter.example.com",
];

// Each curl call leaves its headers and answer in files named after the command that made it.
const CURL_WRAPPER = `
curl() {
  local f; f=$(mktemp "$DOCTEST_DIR/call.XXXXXX")
  echo "$DOCTEST_COMMAND $f" >> "$DOCTEST_DIR/calls"
  command curl --max-time 20 -D "$f.headers" "$@" | tee "$f.body"
  return "\${PIPESTATUS[0]}"
}
`;

interface Call {
  status: number;
  answer: string;
}

/** Runs `blocks` in one bash against `url`; the calls each command made, by command index. */
async function runBlocks(
  url: string,
  blocks: ShellBlock[],
): Promise<Map<number, Call[]>> {
  const dir = mkdtempSync(join(tmpdir(), "edgecount-docs-"));
  try {
    let script = CURL_WRAPPER;
    let index = 0;
    for (const block of blocks)
      for (const command of block.commands) {
        let text = command.text;
        for (const shown of SHOWN_ADDRESSES) text = text.split(shown).join(url);
        script += `DOCTEST_COMMAND=${index++}\n${text}\n`;
      }
    await run("bash", ["-c", script], {
      cwd: dir,
      env: { ...process.env, B: url, BASE: url, DOCTEST_DIR: dir },
      timeout: 120_000,
      maxBuffer: 64 * 1024 * 1024,
    }).catch((error) => {
      // A command's own failure shows in its calls; only a killed run is the harness's.
      if (error.killed) throw error;
    });
    const calls = new Map<number, Call[]>();
    let log = "";
    try {
      log = readFileSync(join(dir, "calls"), "utf8");
    } catch {
      // no curl call was made
    }
    for (const line of log.split("\n").filter(Boolean)) {
      const [command, file] = line.split(" ");
      const headers = readFileSync(`${file}.headers`, "utf8");
      const statusLines = [...headers.matchAll(/^HTTP\/[\d.]+ (\d{3})/gm)];
      const status = statusLines.length
        ? Number(statusLines[statusLines.length - 1][1])
        : 0;
      let answer = readFileSync(`${file}.body`, "utf8");
      // `curl -i` writes the head into the answer too.
      if (/^HTTP\/[\d.]+ \d{3}/.test(answer))
        answer = answer.slice(answer.indexOf("\r\n\r\n") + 4);
      const list = calls.get(Number(command)) ?? [];
      list.push({ status, answer });
      calls.set(Number(command), list);
    }
    return calls;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What is wrong with the calls a command made, against what its page shows. */
function problems(
  command: ShellBlock["commands"][number],
  calls: Call[],
): string[] {
  const where = `${command.where}: ${command.text.split("\n")[0].trim()}`;
  if (!command.callsCurl) {
    return calls
      .filter((call) => call.status < 200 || call.status > 299)
      .map((call) => `${where}: a captured call answered ${call.status}`);
  }
  if (command.statuses.length === 0)
    return [`${where}: shows no status (# 200 ...)`];
  const got = calls.map((call) => call.status);
  if (got.join(" ") !== command.statuses.join(" "))
    return [
      `${where}: shows ${command.statuses.join(" ")}, answered ${got.join(" ") || "nothing"}`,
    ];
  if (command.answer === undefined) return [];
  if (calls.length !== 1)
    return [`${where}: an answer is shown for ${calls.length} calls`];
  const actual = calls[0].answer;
  // Several lines each a JSON value of its own: NDJSON, each line checked against the line
  // answered. Otherwise the lines are one answer shown over several.
  const shownLines = command.answer.split("\n").map((line) => line.trim());
  const perLine = shownLines.length > 1 ? shownLines.map(tryParseShown) : [];
  if (perLine.length > 0 && perLine.every((line) => line !== undefined)) {
    const lines = actual.split("\n").filter((line) => line.trim() !== "");
    if (lines.length !== perLine.length)
      return [
        `${where}: shows ${perLine.length} lines, answered ${lines.length}`,
      ];
    for (const [i, line] of lines.entries()) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        return [`${where}: line ${i + 1} is not JSON: ${line.slice(0, 200)}`];
      }
      const why = mismatch(perLine[i], parsed);
      if (why) return [`${where}: line ${i + 1}: ${why}`];
    }
    return [];
  }
  const answer = shownLines.join(" ");
  if (/^[[{]/.test(answer)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(actual);
    } catch {
      return [`${where}: the answer is not JSON: ${actual.slice(0, 200)}`];
    }
    const why = mismatch(parseShown(answer), parsed);
    return why ? [`${where}: ${why}`] : [];
  }
  return textMatches(answer, actual)
    ? []
    : [`${where}: shows ${answer}, answered ${actual.slice(0, 200)}`];
}

/** A shown line as {@link parseShown} reads it, or undefined when it is no JSON of its own. */
function tryParseShown(line: string): unknown {
  if (!/^[[{]/.test(line)) return undefined;
  try {
    return parseShown(line);
  } catch {
    return undefined;
  }
}

describe("every shell example in the README and docs/ answers as shown", () => {
  for (const page of PAGES) {
    const blocks = shellBlocks(page, readFileSync(page, "utf8"));
    const groups = new Map<string, ShellBlock[]>();
    for (const block of blocks) {
      const key = JSON.stringify(block.vars);
      groups.set(key, [...(groups.get(key) ?? []), block]);
    }
    for (const [vars, group] of groups) {
      const label = vars === "{}" ? page : `${page} with ${vars}`;
      it(label, async () => {
        const runtime = await startScratchWorkerd("docs", group[0].vars);
        try {
          const calls = await runBlocks(runtime.url, group);
          const found = group
            .flatMap((block) => block.commands)
            .flatMap((command, index) =>
              problems(command, calls.get(index) ?? []),
            );
          expect(found).toEqual([]);
        } finally {
          runtime.stop();
        }
      });
    }
  }
});

describe("the README stays a user's guide", () => {
  const readme = readFileSync("README.md", "utf8");
  it("is at most 250 lines and 16 KB", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(250);
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(16 * 1024);
  });
  it("shows the page snippet within its first 60 lines", () => {
    const snippet = readme
      .split("\n")
      .findIndex((line) => line.includes("createClient("));
    expect(snippet).toBeGreaterThan(0);
    expect(snippet).toBeLessThan(60);
  });
  it("leaves no docs page over 600 lines", () => {
    for (const page of PAGES.slice(1))
      expect(
        readFileSync(page, "utf8").split("\n").length,
        page,
      ).toBeLessThanOrEqual(600);
  });
});

it("lists every EDGECOUNT_ var the worker reads in the operations table", () => {
  const table = readFileSync("docs/operations.md", "utf8")
    .split("\n")
    .filter((line) => line.startsWith("| `EDGECOUNT_"))
    .join("\n");
  const read = new Set<string>();
  for (const dir of ["worker/src", "core/src"])
    for (const file of readdirSync(dir, { recursive: true }) as string[])
      if (file.endsWith(".rs"))
        for (const [name] of readFileSync(join(dir, file), "utf8").matchAll(
          /EDGECOUNT_[A-Z_]*[A-Z]/g,
        ))
          read.add(name);
  expect(read.size).toBeGreaterThan(10);
  const missing = [...read].filter((name) => !table.includes(`\`${name}\``));
  // `EDGECOUNT_ONE_WAY_` is the prefix the one-way vars share in a message.
  expect(missing.filter((name) => name !== "EDGECOUNT_ONE_WAY")).toEqual([]);
});

it("names every period a read of days takes in the API table's days row", () => {
  const row = readFileSync("docs/api.md", "utf8")
    .split("\n")
    .find((line) => line.startsWith("| `GET /v1/counters/:ns/:key/days`"));
  // The words core/src/visits/day.rs's Period::parse takes, and the series' two dates.
  for (const word of ["today", "yesterday", "Nd", "total", "from=", "to="])
    expect(row, word).toContain(word);
});

describe("the example checker itself", () => {
  it("finds a shown status and answer, and a command that shows none", () => {
    const [block] = shellBlocks(
      "x.md",
      '```sh\ncurl -s "$B/a"   # 200 {"v":1,...}\ncurl -s \\\n  "$B/b"\n```\n',
    );
    expect(
      block.commands.map((c) => [c.statuses, c.answer, c.callsCurl]),
    ).toEqual([
      [[200], '{"v":1,...}', true],
      [[], undefined, true],
    ]);
  });
  it("skips blocks marked norun and reads vars", () => {
    const blocks = shellBlocks(
      "x.md",
      "```sh norun\ncurl x\n```\n```sh vars=A=1;B=x=y\nls\n```\n",
    );
    expect(blocks).toHaveLength(1);
    expect(blocks[0].vars).toEqual({ A: "1", B: "x=y" });
  });
  it("checks shapes: keys, values, and `...` for any value or more members", () => {
    expect(
      mismatch(parseShown('{"a":1,"b":...}'), { a: 1, b: "x" }),
    ).toBeUndefined();
    expect(mismatch(parseShown('{"a":1}'), { a: 1, b: 2 })).toMatch(
      /field "b"/,
    );
    expect(mismatch(parseShown('{"a":1,...}'), { a: 1, b: 2 })).toBeUndefined();
    expect(mismatch(parseShown('{"a":1}'), { a: 2 })).toMatch(/expected 1/);
    expect(
      mismatch(parseShown('{"a":[1,...]}'), { a: [1, 2] }),
    ).toBeUndefined();
    expect(mismatch(parseShown('{"a":[1]}'), { a: [1, 2] })).toMatch(/items/);
    expect(mismatch(parseShown('{"s":"..."}'), { s: "x" })).toMatch(
      /expected "..."/,
    );
  });
  it("matches text with `...` as anything", () => {
    expect(textMatches("<svg ...", "<svg xmlns='x'>1</svg>")).toBe(true);
    expect(textMatches("1", "12")).toBe(false);
  });
});
