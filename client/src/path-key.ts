// The key of a page's path: what `/v1/count.js` counts a page under by default, and what
// `pathKey` gives a page that counts through the client, so both count one page under one key.
// worker/static/count.js writes the same rule out again (it is a script of its own, not built
// from here); tests/browser-count-script.spec.ts checks that the two agree.

/** Longest key, in UTF-8 bytes (core/src/names.rs, `MAX_KEY_LEN`). */
const MAX_KEY_BYTES = 256;
/** What a cut path is followed by: `~` and 16 hex digits. */
const HASH_SUFFIX_BYTES = 17;

/**
 * FNV-1a, 64 bits, over `bytes`, as 16 hex digits. Chosen over SHA-256 because `crypto.subtle`
 * exists only in secure contexts: on an `http:` page it is missing, and a page must get the
 * same key whichever scheme it is served over. The hash only tells apart paths that share
 * their first 239 bytes; it guards nothing.
 */
export function fnv1a64(bytes: Uint8Array): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of bytes)
    hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return hash.toString(16).padStart(16, "0");
}

/**
 * The key of a page's path (`location.pathname`), as `/v1/count.js` counts the page:
 *
 * - The path is percent-decoded, so `/%E6%96%87` is counted, read and exported as `/文`. A
 *   path that does not decode (`/100%`, a cut UTF-8 sequence) or that decodes to a control
 *   character, which no key may hold, is kept as it is.
 * - A path longer than a key's 256 bytes keeps its first 239 bytes, cut between two
 *   characters, followed by `~` and the FNV-1a 64-bit hash of the whole path's UTF-8 bytes in
 *   16 hex digits: `/` and 300 `a`s is counted as `/` and 238 `a`s, then `~1fd0dee1f84411d2`.
 *   Two paths that differ only past the cut get two keys.
 *
 * @example
 * const views = await edgecount.incr("pages", pathKey(location.pathname));
 */
export function pathKey(pathname: string): string {
  let name = pathname;
  try {
    name = decodeURIComponent(pathname);
  } catch {
    // Not percent-encoding as a URL writes it: the path is its own name.
  }
  // The control characters of the key rule: Unicode's general category Cc.
  if (/[\0-\x1f\x7f-\x9f]/.test(name)) name = pathname;
  const bytes = new TextEncoder().encode(name);
  if (bytes.length <= MAX_KEY_BYTES) return name;
  // Decoded as a stream, a character cut in two at the end is held back, not replaced.
  const cut = new TextDecoder().decode(
    bytes.subarray(0, MAX_KEY_BYTES - HASH_SUFFIX_BYTES),
    { stream: true },
  );
  return `${cut}~${fnv1a64(bytes)}`;
}
