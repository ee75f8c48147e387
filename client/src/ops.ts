// Ops as the client holds them: checked once when a call is made, then written either as a
// batch entry or as a request to the op's single-key route, and their answers decoded into
// what the call resolves with.
import { clientError, EdgecountError, type ErrorCode } from "./errors";
import { jsonObject, toBigInt } from "./json";
import type { BatchOp, CacheBody, CacheEntry, Int } from "./types";

/** The op names of `POST /v1/batch`. */
export type OpName = BatchOp["op"];

/** A checked op: integers as `bigint`, writes with their idempotency key. */
export interface Op {
  op: OpName;
  ns: string;
  key: string;
  by?: bigint;
  /** `set`: the new value; `cache_put`: the value as text. */
  value?: bigint | string;
  /** `cache_put` of bytes, which only the single-key route can carry. */
  bytes?: Uint8Array | ArrayBuffer | Blob;
  ttl?: bigint;
  contentType?: string;
  idempotencyKey?: string;
  /** `incr`: count the visitor in the day's unique visitors too. */
  unique?: boolean;
}

/** A single-key request: method, path and query, body and its content type. */
export interface Route {
  method: string;
  path: string;
  body?: BodyInit;
  contentType?: string;
}

const READS: readonly OpName[] = ["get", "cache_get"];
const TEXT = "text/plain; charset=utf-8";

/** A fresh idempotency key: a random UUID (from random bytes where randomUUID is missing, as on plain-HTTP pages). */
function newIdempotencyKey(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) =>
    b.toString(16).padStart(2, "0"),
  ).join("");
}

/** An integer input as a `bigint`, or the client error `code` for anything else. */
function integer(code: ErrorCode, name: string, value: Int): bigint {
  const exact = toBigInt(value);
  if (exact === undefined)
    throw clientError(
      code,
      `\`${name}\` must be an integer, not ${String(value)}.`,
    );
  return exact;
}

/** An op as a caller gives it (a {@link BatchOp}, or a `cache_put` of bytes). */
export interface OpInput {
  op: OpName;
  ns: string;
  key: string;
  by?: Int;
  value?: Int | CacheBody;
  ttl?: number;
  contentType?: string;
  idempotencyKey?: string;
  /** A count sent without an idempotency key (see `CountOptions.exactlyOnce`). */
  keyless?: boolean;
  /** `incr` only: count the visitor too (see `CountOptions.unique`). */
  unique?: boolean;
}

/**
 * Checks an op's inputs and gives a write its idempotency key (a keyless count none).
 *
 * @throws EdgecountError (status 0) for a non-integer amount, value or TTL.
 */
export function checkOp(input: OpInput): Op {
  const { op: name, ns, key, by, value, ttl, contentType } = input;
  const op: Op = { op: name, ns, key };
  if (by !== undefined) op.by = integer("invalid_number", "by", by);
  if (ttl !== undefined) op.ttl = integer("invalid_ttl", "ttl", ttl);
  if (input.unique) {
    if (name !== "incr")
      throw clientError(
        "invalid_op",
        "`unique` counts a visitor on `incr` alone.",
      );
    op.unique = true;
  }
  if (name === "set")
    op.value = integer("invalid_number", "value", value as Int);
  if (name === "cache_put") {
    if (typeof value === "string") {
      op.value = value;
      op.contentType = contentType ?? TEXT;
    } else {
      op.bytes = value as Uint8Array | ArrayBuffer | Blob;
      op.contentType =
        contentType ??
        ((value instanceof Blob && value.type) || "application/octet-stream");
    }
  }
  if (!READS.includes(name) && !input.keyless) {
    const given = input.idempotencyKey;
    // The service's rule: 1 to 128 printable ASCII characters. Checked here, since a key that
    // did not reach the service would leave a retried write unprotected.
    if (given !== undefined && !/^[\x21-\x7e]{1,128}$/.test(given))
      throw clientError(
        "invalid_idempotency_key",
        "An idempotency key is 1 to 128 printable ASCII characters, without spaces.",
      );
    op.idempotencyKey = given ?? newIdempotencyKey();
  }
  return op;
}

/** Whether sending `op` again after a lost answer could apply it twice: a write without its
 * idempotency key. */
export const mayHaveApplied = (op: Op): boolean =>
  !READS.includes(op.op) && op.idempotencyKey === undefined;

/** Whether a name cannot be a URL path segment: URL parsers drop `.` and `..` segments. */
export const isDotSegment = (name: string): boolean =>
  name === "." || name === "..";

/** Whether the op can go to its single-key route (a name `.` or `..` cannot: it goes in a batch). */
export function hasRoute(op: Op): boolean {
  return !isDotSegment(op.ns) && !isDotSegment(op.key);
}

/** Whether the op can go in a batch (bytes cannot: batch values are text). */
export function batchable(op: Op): boolean {
  return op.bytes === undefined;
}

/** The op as one entry of a batch's `ops`. */
export function batchEntry(op: Op): string {
  return jsonObject({
    op: op.op,
    ns: op.ns,
    key: op.key,
    by: op.by,
    value: op.value,
    ttl: op.ttl,
    content_type: op.contentType,
    idempotency_key: op.idempotencyKey,
    unique: op.unique,
  });
}

/** The op's single-key request. */
export function route(op: Op): Route {
  const kind = op.op.startsWith("cache_") ? "cache" : "counters";
  let path = `/v1/${kind}/${encodeURIComponent(op.ns)}/${encodeURIComponent(op.key)}`;
  const query: string[] = [];
  if (op.by !== undefined) query.push(`by=${op.by}`);
  if (op.ttl !== undefined) query.push(`ttl=${op.ttl}`);
  if (op.unique) query.push("unique=1");
  const result: Route = { method: "GET", path };
  switch (op.op) {
    case "incr":
    case "decr":
      result.method = "POST";
      result.path += `/${op.op}`;
      break;
    case "set":
      result.method = "PUT";
      result.body = jsonObject({ value: op.value });
      result.contentType = "application/json";
      break;
    case "cache_put":
      result.method = "PUT";
      result.body = (op.bytes ?? op.value) as BodyInit;
      result.contentType = op.contentType;
      break;
    case "delete":
    case "cache_delete":
      result.method = "DELETE";
  }
  if (query.length) result.path += `?${query.join("&")}`;
  return result;
}

/** A malformed answer. */
export function badResponse(detail: string): EdgecountError {
  return clientError(
    "bad_response",
    `edgecount answered unexpectedly: ${detail}`,
  );
}

/** A cache entry from its bytes and content type. */
export function cacheEntry(bytes: Uint8Array, contentType: string): CacheEntry {
  return {
    contentType,
    bytes,
    get text() {
      return new TextDecoder().decode(bytes);
    },
  };
}

/**
 * What a call resolves with, from its op's answer in the batch form: `{"value","exists"}`,
 * `{"deleted"}`, `{"stored"}`, or a cache entry's `{"value" | "value_base64", "content_type"}`
 * (the single-key route's bytes come as `bytes`).
 *
 * @throws EdgecountError `bad_response` when the answer lacks what the op needs.
 */
export function decode(op: Op, answer: Record<string, unknown>): unknown {
  switch (op.op) {
    case "delete":
    case "cache_delete":
      if (typeof answer.deleted !== "boolean")
        throw badResponse("no `deleted`");
      return answer.deleted;
    case "cache_put":
      return undefined;
    case "cache_get": {
      const {
        value,
        value_base64: base64,
        bytes,
        content_type: contentType,
      } = answer;
      if (typeof contentType !== "string")
        throw badResponse("no `content_type`");
      if (bytes instanceof Uint8Array) return cacheEntry(bytes, contentType);
      if (typeof value === "string")
        return cacheEntry(new TextEncoder().encode(value), contentType);
      if (typeof base64 !== "string") throw badResponse("no cache value");
      return cacheEntry(
        Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)),
        contentType,
      );
    }
    default:
      if (
        typeof answer.value !== "number" &&
        typeof answer.value !== "bigint"
      ) {
        throw badResponse("no counter `value`");
      }
      return answer.value;
  }
}
