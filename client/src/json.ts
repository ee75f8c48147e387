// Exact JSON for counters: edgecount writes signed 64-bit values with every digit, and
// JSON.parse would round those past 2^53, so answers are read with a small parser that keeps
// integers exact, and ops are written without JSON.stringify, which cannot write a bigint.
import type { Int } from "./types";

/** One token: punctuation, a string, an integer, or another literal (checked by JSON.parse). */
const TOKEN =
  /\s*(?:([{}[\],:])|("[^"\\]*(?:\\.[^"\\]*)*")|(-?(?:0|[1-9]\d*))(?![.eE\d])|(-?\d[\d.eE+-]*|true|false|null))/y;

/** Integer digits as a `number` when that is exact, else as a `bigint`. */
export function toInt(digits: string): Int {
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : BigInt(digits);
}

/**
 * Parses JSON like `JSON.parse`, except that integers outside the safe range come back as
 * exact `bigint`s instead of rounded numbers.
 *
 * @throws SyntaxError on text that is not JSON.
 */
export function parseJson(text: string): unknown {
  const fail = (): never => {
    throw new SyntaxError("edgecount: malformed JSON answer");
  };
  const next = (): RegExpExecArray => TOKEN.exec(text) ?? fail();
  TOKEN.lastIndex = 0;
  const value = (token: RegExpExecArray): unknown => {
    const [, punct, string, integer, literal] = token;
    if (string) return JSON.parse(string);
    if (integer) return toInt(integer);
    if (literal) return JSON.parse(literal);
    const close = punct === "[" ? "]" : punct === "{" ? "}" : "";
    if (!close) fail();
    const items: unknown[] = [];
    const entries: [string, unknown][] = [];
    let t = next();
    while (t[1] !== close) {
      if (items.length + entries.length) {
        if (t[1] !== ",") fail();
        t = next();
      }
      if (close === "]") {
        items.push(value(t));
      } else {
        if (!t[2] || next()[1] !== ":") fail();
        entries.push([JSON.parse(t[2]), value(next())]);
      }
      t = next();
    }
    // fromEntries defines own properties, so a `__proto__` key stays a plain key.
    return close === "]" ? items : Object.fromEntries(entries);
  };
  const result = value(next());
  if (/\S/.test(text.slice(TOKEN.lastIndex))) fail();
  return result;
}

/** An integer input as a `bigint`, or `undefined` when it is not an integer. */
export function toBigInt(value: Int): bigint | undefined {
  if (typeof value === "bigint") return value;
  return Number.isInteger(value) ? BigInt(value) : undefined;
}

/**
 * A flat JSON object: strings are quoted, `bigint`s written with every digit, booleans as
 * themselves, `undefined` fields left out.
 */
export function jsonObject(
  fields: Record<string, string | bigint | boolean | undefined>,
): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined) {
      parts.push(
        `"${name}":${typeof value === "string" ? JSON.stringify(value) : value}`,
      );
    }
  }
  return `{${parts.join(",")}}`;
}
