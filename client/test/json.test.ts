// The exact JSON reader: JSON.parse's answers, except integers past 2^53 stay exact.
import { describe, expect, it } from "vitest";
import { parseJson } from "../src/json";

describe("parseJson", () => {
  it("reads what JSON.parse reads", () => {
    const samples = [
      '{"a":[1,-2,3.5,-1e3,0,true,false,null,"x"],"b":{},"c":[]}',
      '  {"s":"quote \\" backslash \\\\ unicode \\u00e9 \\ud83d\\ude00 digits 12345678901234567890"} ',
      '"text"',
      "[[[]]]",
      '{"results":[{"value":"{\\"value\\":1}","content_type":"application/json"}]}',
    ];
    for (const text of samples)
      expect(parseJson(text)).toEqual(JSON.parse(text));
  });

  it("keeps integers past 2^53 exact, anywhere", () => {
    expect(
      parseJson(
        '{"results":[{"value":9223372036854775807},{"value":-9007199254740993}]}',
      ),
    ).toEqual({
      results: [{ value: 9223372036854775807n }, { value: -9007199254740993n }],
    });
    expect(parseJson("9007199254740991")).toBe(9007199254740991);
    expect(parseJson("9007199254740992")).toBe(9007199254740992n);
  });

  it("keeps a __proto__ key a plain key", () => {
    const parsed = parseJson('{"__proto__":{"polluted":1}}') as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(["__proto__"]);
  });

  it("refuses what is not JSON", () => {
    for (const bad of [
      "",
      "{",
      '{"a":1,}',
      "[1,]",
      "[,1]",
      '{"a" 1}',
      "01",
      "1 2",
      '"open',
      "{a:1}",
      "[1]x",
    ]) {
      expect(() => parseJson(bad), bad).toThrow(SyntaxError);
    }
  });

  it("reads a 1 MiB string in far less than quadratic time", () => {
    const text = JSON.stringify({ value: "x\\".repeat(512 * 1024) });
    const started = Date.now();
    expect(parseJson(text)).toEqual(JSON.parse(text));
    // It takes some 20 ms; a reader that copied the rest of the text per character would
    // take minutes. The bound leaves a loaded machine a wide margin and still tells them apart.
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
