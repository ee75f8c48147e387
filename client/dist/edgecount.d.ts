// edgecount browser client, built from client/src by client/build.mjs.
/**
 * Makes a client for the edgecount service at `options.baseUrl`.
 *
 * - **Exact values.** Counter values come back as a `number` when they are safe integers
 *   (`Number.isSafeInteger`) and as a `bigint` otherwise, read from the answer's digits, never
 *   rounded. Amounts and values may be given as either; a `number` must be an integer.
 * - **Automatic batching.** Calls made in the same tick (see `batchDelayMs`) go out together
 *   as one `POST /v1/batch` (split past 1000 ops, sent in call order); each call resolves with
 *   its own op's result or rejects with its own op's error. A call alone in its window goes to
 *   its single-key route instead, where hot counter reads can be answered from the edge cache.
 * - **Retries.** A 429, a 503 or a network failure is retried up to `maxRetries` times, with
 *   exponential backoff and jitter, never sooner than `Retry-After`; so is a batched op whose
 *   own error is one of those (`rate_limited`, `shard_unavailable`, `shard_overloaded`,
 *   `storage_unavailable`, and `outcome_unknown`, which is a write that may have been applied
 *   and is retried only because it carries its idempotency key). Other errors are not retried.
 * - **Idempotency.** Every write carries an idempotency key made once per call and sent with
 *   every retry of it (the `Idempotency-Key` header, or the op's `idempotency_key` in a batch),
 *   so a retried write is applied once; except `incr` and `decr`, which go without one (one
 *   row written instead of two) unless asked with `{ exactlyOnce: true }`, and are then never
 *   sent again after an outcome they cannot know.
 * - **One-way counts.** `incr` and `decr` with `{ async: true }` are answered 202 by the
 *   service and applied within its flush interval; they are sent at once with `keepalive` (or
 *   as a beacon while the page is hidden), so a count made just before navigating away lands.
 * - **Leaving the page.** When the page is hidden or unloads, calls waiting for the automatic
 *   batch are sent at once, and small requests go out with `keepalive`.
 * - **Timeouts.** A request that takes longer than `timeoutMs` (10 s) is abandoned and
 *   handled as a network failure.
 * - **Errors.** Calls reject with {@link EdgecountError}, whose `code` is the API's.
 *
 * @example
 * const edgecount = createClient({ baseUrl: "https://edgecount.example.workers.dev" });
 * const views = await edgecount.incr("pages", pathKey(location.pathname));
 */
export declare function createClient(options: ClientOptions): Client;

/**
 * A counter value or amount. Answers are a `number` when the value is a safe integer
 * (`Number.isSafeInteger`), else an exact `bigint`; inputs may be either (a `number` must be
 * an integer).
 */
export type Int = number | bigint;

/**
 * The `fetch` the client calls: the global one by default, or any function with its shape
 * (a test double, a wrapper adding headers, a service binding).
 */
export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

/** Options of {@link createClient}. */
export interface ClientOptions {
  /** Where the service is, e.g. `"https://edgecount.example.workers.dev"`; `/v1/...` goes after it. */
  baseUrl: string;
  /** A token sent as `Authorization: Bearer <token>`; needed for writes when tokens are configured. */
  token?: string;
  /** The `fetch` to call; default the global `fetch`. */
  fetch?: FetchLike;
  /**
   * How often one request is sent again after a 429, a 503 or a network failure, and a batched
   * op after a per-op error of those kinds (`rate_limited`, `shard_unavailable`,
   * `shard_overloaded`, `storage_unavailable`); default 3, 0 turns retries off.
   */
  maxRetries?: number;
  /**
   * The first retry waits about this many milliseconds, each later one twice as long, with
   * random jitter; default 100.
   */
  retryBaseMs?: number;
  /**
   * The longest wait before a retry, in milliseconds; default 30000. A `Retry-After` longer
   * than this is not waited for: the call fails at once with `retryAfter` set.
   */
  maxRetryDelayMs?: number;
  /**
   * Automatic batching. `0` (default): calls made in the same tick, before the client's
   * queued microtask runs, go out together. A positive number: calls made within that many
   * milliseconds of the first go out together (timers in background tabs may fire late).
   * `false`: every call is its own request.
   */
  batchDelayMs?: number | false;
  /**
   * Milliseconds one request may take before it is abandoned (`AbortSignal.timeout`) and
   * handled as a network failure; default 10000, 0 for no limit.
   */
  timeoutMs?: number;
}

/** Options of the counter writes `incr`, `decr` and `set`. */
export interface WriteOptions {
  /** Seconds after this write at which the counter expires (1 to 315,360,000). */
  ttl?: number;
  /**
   * The write's idempotency key (1 to 128 visible ASCII characters); by default a random one
   * per call. Give your own to make a write once-only across page loads, e.g.
   * `like-post42-user7`.
   */
  idempotencyKey?: string;
}

/** Options of `incr` and `decr`. */
export interface CountOptions extends WriteOptions {
  /**
   * Send the count with an idempotency key, so that it is retried safely when its outcome is
   * unknown (a lost answer, `outcome_unknown`) and applied once. Off by default: a page view
   * then costs one row written instead of two, and a count whose outcome is unknown is
   * reported (`outcome_unknown`, `network_error`), never sent again. Giving an
   * `idempotencyKey` turns it on.
   */
  exactlyOnce?: boolean;
  /**
   * A one-way write (`incr` and `decr` only, `?async=1`): sent at once with
   * `fetch(..., { keepalive: true })`
   * (or `navigator.sendBeacon` while the page is hidden and no token is set), so it is sent
   * even when the page unloads right after; the call resolves `undefined` once the service
   * accepted it (202), and the service applies it within its flush interval. It carries no
   * idempotency key: it is retried only after a 429 or 503 that says nothing was accepted, never
   * after a network failure, which it reports instead.
   */
  async?: boolean;
  /**
   * `incr` only: count the visitor (the client's address and user agent, which the service
   * hashes with a salt of the day and never stores) in the day's unique visitors too; read
   * them with {@link Client.days}.
   */
  unique?: boolean;
}

/** What {@link Client.days} asks for: a `period`, or the dates `from` to `to`. */
export interface DaysOptions {
  /** `today`, `yesterday`, `7d`, `30d`, any `Nd`, or `total` (the default). */
  period?: string;
  /** The first date of a series, `yyyy-mm-dd`, with `to`. */
  from?: string;
  /** The last date of a series, `yyyy-mm-dd`, with `from`. */
  to?: string;
  /** Also the unique visitors, of the period and of each day. */
  unique?: boolean;
}

/** A counter's days, as {@link Client.days} answers them. */
export interface Days {
  /** The counter's total. */
  readonly value: Int;
  readonly exists: boolean;
  /** The period's first and last dates, `yyyy-mm-dd`, in {@link Days.timeZone}. */
  readonly from: string;
  readonly to: string;
  /** The IANA zone the namespace counts its days in. */
  readonly timeZone: string;
  /** The period's count (the total for `total`). */
  readonly count: Int;
  /** With `unique`: the period's visitors, each counted once a day they came. */
  readonly uniques?: number;
  /** Each day of the period, oldest first, zeros included (none for `total`). */
  readonly days: readonly {
    date: string;
    count: Int;
    uniques?: number;
  }[];
}

/** Options of `del` and `cacheDelete`. */
export interface DeleteOptions {
  /** As in {@link WriteOptions}. */
  idempotencyKey?: string;
}

/** Options of `cachePut`. */
export interface CachePutOptions extends WriteOptions {
  /**
   * The value's `Content-Type`; default `text/plain; charset=utf-8` for a string body,
   * `application/octet-stream` (or the `Blob`'s own type) for bytes.
   */
  contentType?: string;
}

/** A cache entry as read. */
export interface CacheEntry {
  /** The `Content-Type` it was stored with. */
  readonly contentType: string;
  /** The stored bytes. */
  readonly bytes: Uint8Array;
  /** The bytes decoded as UTF-8 (bytes that are not UTF-8 become U+FFFD). */
  readonly text: string;
}

/** A cache value: text, or bytes. Only text can travel inside a batch. */
export type CacheBody = string | Uint8Array | ArrayBuffer | Blob;

/** One op of an explicit {@link Client.batch}. */
export type BatchOp =
  | {
      op: "get" | "cache_get";
      ns: string;
      key: string;
    }
  | {
      op: "delete" | "cache_delete";
      ns: string;
      key: string;
      idempotencyKey?: string;
    }
  | {
      op: "incr" | "decr";
      ns: string;
      key: string;
      by?: Int;
      ttl?: number;
      idempotencyKey?: string;
    }
  | {
      op: "set";
      ns: string;
      key: string;
      value: Int;
      ttl?: number;
      idempotencyKey?: string;
    }
  | {
      op: "cache_put";
      ns: string;
      key: string;
      value: string;
      contentType?: string;
      ttl?: number;
      idempotencyKey?: string;
    };

/** What one op of a batch answers: what the method of the same name resolves with. */
export type BatchResult<T extends BatchOp> = T extends {
  op: "delete" | "cache_delete";
}
  ? boolean
  : T extends {
        op: "cache_get";
      }
    ? CacheEntry | null
    : T extends {
          op: "cache_put";
        }
      ? undefined
      : Int;

/** A batch's answers in op order: each op's result, or its own error in its place. */
export type BatchResults<T extends readonly BatchOp[]> = {
  -readonly [I in keyof T]: BatchResult<T[I]> | EdgecountError;
};

/** An edgecount client; see {@link createClient}. */
export interface Client {
  /** A counter's value (0 if it was never written or has expired). */
  get(ns: string, key: string): Promise<Int>;
  /** A counter's counts by day, and its unique visitors with `unique` (see docs/days.md). */
  days(ns: string, key: string, options?: DaysOptions): Promise<Days>;
  /** Adds `by` (default 1, may be negative) and answers the new value. */
  incr(ns: string, key: string, by?: Int, options?: CountOptions): Promise<Int>;
  /** Adds `by` one-way: resolves once the service accepted it (see {@link CountOptions.async}). */
  incr(
    ns: string,
    key: string,
    by: Int | undefined,
    options: CountOptions & {
      async: true;
    },
  ): Promise<undefined>;
  incr(
    ns: string,
    key: string,
    by?: Int,
    options?: CountOptions,
  ): Promise<Int | undefined>;
  /** Subtracts `by` (default 1) and answers the new value. */
  decr(ns: string, key: string, by?: Int, options?: CountOptions): Promise<Int>;
  /** Subtracts `by` one-way (see {@link CountOptions.async}). */
  decr(
    ns: string,
    key: string,
    by: Int | undefined,
    options: CountOptions & {
      async: true;
    },
  ): Promise<undefined>;
  decr(
    ns: string,
    key: string,
    by?: Int,
    options?: CountOptions,
  ): Promise<Int | undefined>;
  /** Sets the counter and answers its value. */
  set(
    ns: string,
    key: string,
    value: Int,
    options?: WriteOptions,
  ): Promise<Int>;
  /** Deletes a counter; answers whether it existed. */
  del(ns: string, key: string, options?: DeleteOptions): Promise<boolean>;
  /** A cache entry, or `null` when there is none (never stored, expired, evicted or deleted). */
  cacheGet(ns: string, key: string): Promise<CacheEntry | null>;
  /** Stores a cache value (up to 1 MiB) with its content type and optional TTL in seconds. */
  cachePut(
    ns: string,
    key: string,
    body: CacheBody,
    options?: CachePutOptions,
  ): Promise<void>;
  /** Deletes a cache entry; answers whether it existed. */
  cacheDelete(
    ns: string,
    key: string,
    options?: DeleteOptions,
  ): Promise<boolean>;
  /**
   * Sends these ops now as `POST /v1/batch` requests of at most 1000 ops, one after another
   * (not through the automatic batch). Answers, in op order, each op's result or, in its
   * place, the {@link EdgecountError} that op ended with: its own per-op error, or the error of
   * the whole request it was in (a network failure after the retries, say). Never rejects.
   */
  batch<const T extends readonly BatchOp[]>(ops: T): Promise<BatchResults<T>>;
  /** Sends the calls waiting for the automatic batch now. */
  flush(): void;
}

/** The API's error codes (its OpenAPI document's `ErrorCode`). */
export type ApiErrorCode =
  | "invalid_namespace"
  | "invalid_key"
  | "invalid_number"
  | "invalid_ttl"
  | "invalid_parameter"
  | "duplicate_parameter"
  | "invalid_body"
  | "invalid_op"
  | "invalid_content_type"
  | "invalid_idempotency_key"
  | "unauthorized"
  | "forbidden"
  | "not_open"
  | "not_found"
  | "method_not_allowed"
  | "payload_too_large"
  | "request_timeout"
  | "too_many_ops"
  | "unsupported_media_type"
  | "overflow"
  | "idempotency_mismatch"
  | "rate_limited"
  | "misconfigured"
  | "internal"
  | "shard_unavailable"
  | "storage_unavailable"
  | "shard_overloaded"
  | "outcome_unknown"
  | "one_way_buffer_full"
  | "change_under_way";

/** The client's own codes: no answer after the retries, or one that is not the API's JSON. */
export type ClientErrorCode = "network_error" | "bad_response";

/** Every `code` an {@link EdgecountError} may carry. */
export type ErrorCode = ApiErrorCode | ClientErrorCode;

/**
 * An error from edgecount, or from the client on its way there.
 *
 * - `status`: the HTTP status (for an op answered inside a batch, the status its single-key
 *   route gives for the same code); `0` when there was no HTTP answer: a network failure, or an
 *   input the client refused before sending.
 * - `code`: the API's error code (`invalid_key`, `overflow`, `rate_limited`, `not_found`, ...),
 *   or one of the client's own: `network_error` (no answer after the retries), `bad_response`
 *   (an answer that is not the API's JSON), and `invalid_number`, `invalid_ttl`,
 *   `invalid_namespace`, `invalid_key` for inputs that cannot be sent.
 * - `retryAfter`: seconds the service asked to wait (`Retry-After`), when it said.
 */
export declare class EdgecountError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly retryAfter?: number;
  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    retryAfter?: number,
    cause?: unknown,
  );
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
export declare function pathKey(pathname: string): string;
