// The shell examples of the README and docs/, read out of the Markdown so that
// tests/docs.spec.ts can run each against the worker and check what it shows.
//
// A fenced block whose language is `sh` or `bash` is run, in order with the page's other blocks,
// by bash against one worker per page. Its info string may add words:
//   `norun`                 shown only (deploying, logging in): never run;
//   `vars=NAME=VALUE;...`   run against a worker of its own with these vars (blocks with the
//                           same vars on one page share it).
// Every command that calls `curl` shows what it answers in a trailing comment: the status of
// each call it makes, then optionally the answer, `# 200 {"value":1}`. A JSON answer is checked
// for its shape: the same keys (`...` as the last member allows more) holding the same values,
// where `...` as a value takes any. Any other answer is text, where `...` stands for anything.
// A command whose curl calls only capture answers (`X=$(curl ...)`) shows nothing, and each
// of those calls must get a 2xx.

export interface ShellBlock {
  /** Where the block starts, `README.md:42`. */
  where: string;
  vars: Record<string, string>;
  commands: ShellCommand[];
}

export interface ShellCommand {
  /** Where the command starts, `docs/api.md:120`. */
  where: string;
  /** The command as written, continuation lines joined. */
  text: string;
  /** Statuses shown, one per curl call it makes; empty when nothing is shown. */
  statuses: number[];
  /** The answer shown after the status, if any. */
  answer?: string;
  /** True when the command calls curl and must show what it answers. */
  callsCurl: boolean;
}

const FENCE = /^(`{3,})(.*)$/;

/** The runnable shell blocks of one Markdown page (`path` is for messages only). */
export function shellBlocks(path: string, markdown: string): ShellBlock[] {
  const lines = markdown.split("\n");
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i].trimStart());
    if (!open) continue;
    const [, ticks, info] = open;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i].trimStart().startsWith(ticks); i++)
      body.push(lines[i]);
    const words = info.trim().split(/\s+/);
    if (!["sh", "bash"].includes(words[0]) || words.includes("norun")) continue;
    const vars: Record<string, string> = {};
    for (const word of words.slice(1)) {
      if (!word.startsWith("vars="))
        throw new Error(`${path}:${start + 1}: unknown word ${word}`);
      for (const pair of word.slice(5).split(";").filter(Boolean)) {
        const eq = pair.indexOf("=");
        vars[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
    }
    blocks.push({
      where: `${path}:${start + 1}`,
      vars,
      commands: commands(path, start + 2, body),
    });
  }
  return blocks;
}

function commands(
  path: string,
  firstLine: number,
  body: string[],
): ShellCommand[] {
  const out: ShellCommand[] = [];
  for (let i = 0; i < body.length; i++) {
    const start = i;
    const parts = [body[i]];
    // A command goes on past a line ending in `\` or inside a quote left open.
    while (
      i + 1 < body.length &&
      (/\\\s*$/.test(parts[parts.length - 1]) || openQuote(parts.join("\n")))
    )
      parts.push(body[++i]);
    const text = parts.join("\n");
    if (!text.trim() || text.trim().startsWith("#")) continue;
    let comment = trailingComment(parts[parts.length - 1]);
    // A long answer may be shown on the comment lines right after its command, its lines
    // after the first indented (`#   {...}`) or closing (`# ]}`).
    if (comment === undefined && /^\s*#\s*\d{3}\b/.test(body[i + 1] ?? "")) {
      comment = body[++i].trim().slice(1).trim();
      while (/^\s*#( {2,}|\s*[\]}])/.test(body[i + 1] ?? ""))
        comment += "\n" + body[++i].trim().slice(1).trim();
    }
    const shown = comment ? /^((?:\d{3}\s*)+)(.*)$/s.exec(comment) : null;
    const statuses = shown ? shown[1].trim().split(/\s+/).map(Number) : [];
    const answer = shown && shown[2].trim() ? shown[2].trim() : undefined;

    out.push({
      where: `${path}:${firstLine + start}`,
      text,
      statuses,
      answer,
      // A curl inside `$(...)` only captures an answer for what follows: it shows nothing.
      callsCurl: /(^|[\s;|&])curl\s/.test(text),
    });
  }
  return out;
}

/** What a shell scan of `text` finds: whether it leaves a quote open, and the text of the
 * `#` comment it ends with, if any (quotes respected; a comment runs to the end of its line). */
function scanShell(text: string): { openQuote: boolean; comment?: string } {
  let quote = "";
  let comment: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = "";
      else if (c === "\\" && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "#" && (i === 0 || /\s/.test(text[i - 1]))) {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      comment = text.slice(i + 1, stop).trim();
      i = stop;
    } else if (c === "\n") comment = undefined;
  }
  return { openQuote: quote !== "", comment };
}

/** Whether `text` leaves a shell quote open. */
function openQuote(text: string): boolean {
  return scanShell(text).openQuote;
}

/** The text after a line's `#` comment mark, quotes respected; undefined without one. */
function trailingComment(line: string): string | undefined {
  return scanShell(line).comment;
}

const ANY = "\u0000any";
const REST = "\u0000rest";

/** Parses a shown JSON answer, its `...` turned into markers that {@link matches} reads. */
export function parseShown(shown: string): unknown {
  let out = "";
  let inString = false;
  for (let i = 0; i < shown.length; i++) {
    const c = shown[i];
    if (inString) {
      out += c;
      if (c === "\\") out += shown[++i];
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (shown.startsWith("...", i)) {
      const before = out.trimEnd().slice(-1);
      const after = shown.slice(i + 3).trimStart()[0];
      if (after === "}" && (before === "," || before === "{"))
        out += `"\\u0000rest":true`;
      else if (after === "]" && (before === "," || before === "["))
        out += `"\\u0000rest"`;
      else out += `"\\u0000any"`;
      i += 2;
    } else out += c;
  }
  return JSON.parse(out);
}

/** Why `actual` does not have the shown shape, or undefined when it does. */
export function mismatch(
  shown: unknown,
  actual: unknown,
  at = "answer",
): string | undefined {
  if (shown === ANY) return undefined;
  if (Array.isArray(shown)) {
    if (!Array.isArray(actual))
      return `${at}: expected an array, got ${JSON.stringify(actual)}`;
    const rest = shown[shown.length - 1] === REST;
    const items = rest ? shown.slice(0, -1) : shown;
    if (rest ? actual.length < items.length : actual.length !== items.length)
      return `${at}: expected ${items.length}${rest ? " or more" : ""} items, got ${actual.length}`;
    for (let i = 0; i < items.length; i++) {
      const why = mismatch(items[i], actual[i], `${at}[${i}]`);
      if (why) return why;
    }
    return undefined;
  }
  if (shown !== null && typeof shown === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual))
      return `${at}: expected an object, got ${JSON.stringify(actual)}`;
    const expected = shown as Record<string, unknown>;
    const got = actual as Record<string, unknown>;
    for (const key of Object.keys(expected)) {
      if (key === REST) continue;
      if (!(key in got))
        return `${at}: no field "${key}" in ${JSON.stringify(actual)}`;
      const why = mismatch(expected[key], got[key], `${at}.${key}`);
      if (why) return why;
    }
    if (!(REST in expected))
      for (const key of Object.keys(got))
        if (!(key in expected))
          return `${at}: field "${key}" is not shown in the docs`;
    return undefined;
  }
  return Object.is(shown, actual)
    ? undefined
    : `${at}: expected ${JSON.stringify(shown)}, got ${JSON.stringify(actual)}`;
}

/** Whether a text answer fits a shown one, where `...` stands for anything. */
export function textMatches(shown: string, actual: string): boolean {
  const pattern = shown
    .split("...")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[\\s\\S]*");
  return new RegExp(`^${pattern}$`).test(actual.trim());
}
