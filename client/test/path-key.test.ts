// The key of a page's path (client/src/path-key.ts): decoded, kept as it is when it does not
// decode to a key, and cut with a hash past a key's 256 bytes.
import { describe, expect, it } from "vitest";
import { fnv1a64, pathKey } from "../src/path-key";

const bytes = (text: string) => Buffer.byteLength(text);

describe("fnv1a64", () => {
  it("gives FNV-1a's published 64-bit values", () => {
    const utf8 = new TextEncoder();
    expect(fnv1a64(utf8.encode(""))).toBe("cbf29ce484222325");
    expect(fnv1a64(utf8.encode("a"))).toBe("af63dc4c8601ec8c");
    expect(fnv1a64(utf8.encode("foobar"))).toBe("85944171f73967e8");
  });
});

describe("pathKey", () => {
  it("decodes the path", () => {
    expect(pathKey("/blog/post-1")).toBe("/blog/post-1");
    expect(pathKey("/%E6%96%87%E7%AB%A0/a%20b")).toBe("/文章/a b");
    // 40 CJK characters: 361 bytes encoded, 121 decoded.
    const cjk = `/${"東京の春と桜の花".repeat(5)}`;
    expect(pathKey(encodeURI(cjk))).toBe(cjk);
  });

  it("keeps a path that does not decode, or decodes to a control character, as it is", () => {
    expect(pathKey("/100%")).toBe("/100%");
    expect(pathKey("/%E6%96")).toBe("/%E6%96");
    expect(pathKey("/a%0Ab")).toBe("/a%0Ab");
    expect(pathKey("/a%C2%85b")).toBe("/a%C2%85b");
  });

  it("keeps a path of 256 bytes whole", () => {
    const path = `/${"a".repeat(255)}`;
    expect(pathKey(path)).toBe(path);
  });

  it("cuts a longer path to 239 bytes and adds the hash of all of it", () => {
    // The example of docs/browser.md.
    const path = `/${"a".repeat(300)}`;
    expect(pathKey(path)).toBe(`/${"a".repeat(238)}~1fd0dee1f84411d2`);
    // Paths that differ only past the cut get keys of their own.
    expect(pathKey(`${path}b`)).not.toBe(pathKey(path));
  });

  it("cuts between characters, and hashes the decoded path", () => {
    const path = `/${"桜".repeat(100)}`;
    const key = pathKey(encodeURI(path));
    // 1 + 79 * 3 = 238 bytes fit before the suffix; an 80th character would not.
    expect(key).toBe(
      `/${"桜".repeat(79)}~${fnv1a64(new TextEncoder().encode(path))}`,
    );
    expect(bytes(key)).toBe(255);
    const emoji = pathKey(`/${"😀".repeat(100)}`);
    expect(emoji.startsWith(`/${"😀".repeat(59)}~`)).toBe(true);
    expect(bytes(emoji)).toBeLessThanOrEqual(256);
    expect(emoji).not.toMatch(/\uFFFD/);
  });
});
