// The edgecount browser client: counters and cache entries over edgecount's HTTP API, with
// calls of one tick batched into one request, retries that never apply a write twice, and
// counter values exact over the whole signed 64-bit range.
import { createQueue, runBatches, type Call } from "./batcher";
import { readDays } from "./days";
import { sendOneWay } from "./one-way";
import { checkOp, type OpInput } from "./ops";
import type { Transport } from "./transport";
import type {
  BatchOp,
  BatchResults,
  Client,
  ClientOptions,
  CountOptions,
  Int,
} from "./types";

export { EdgecountError } from "./errors";
export { pathKey } from "./path-key";
export type { ApiErrorCode, ClientErrorCode, ErrorCode } from "./errors";
export type {
  BatchOp,
  BatchResult,
  BatchResults,
  CacheBody,
  CacheEntry,
  CachePutOptions,
  Client,
  ClientOptions,
  CountOptions,
  Days,
  DaysOptions,
  DeleteOptions,
  FetchLike,
  Int,
  WriteOptions,
} from "./types";

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
export function createClient(options: ClientOptions): Client {
  const globalFetch = (url: string, init: RequestInit): Promise<Response> =>
    fetch(url, init);
  const t: Transport = {
    fetch: options.fetch ?? globalFetch,
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    token: options.token,
    maxRetries: Math.max(0, options.maxRetries ?? 3),
    retryBaseMs: options.retryBaseMs ?? 100,
    maxRetryDelayMs: options.maxRetryDelayMs ?? 30_000,
    timeoutMs: Math.max(0, options.timeoutMs ?? 10_000),
    customFetch: options.fetch !== undefined,
    leaving: false,
  };
  const queue = createQueue(t, options.batchDelayMs ?? 0);
  if (
    typeof document !== "undefined" &&
    typeof addEventListener === "function"
  ) {
    // What waits for the automatic batch leaves before the page does.
    addEventListener("pagehide", () => {
      t.leaving = true;
      queue.flush();
    });
    // Back from the back/forward cache: answers can be read again.
    addEventListener("pageshow", () => {
      t.leaving = false;
    });
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") queue.flush();
    });
  }
  const call = <T>(input: OpInput): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      // checkOp throws for bad inputs, which rejects this promise.
      queue.add({
        op: checkOp(input),
        resolve: resolve as (value: unknown) => void,
        reject,
      });
    });
  const count = (
    op: "incr" | "decr",
    ns: string,
    key: string,
    by: Int | undefined,
    opts: CountOptions = {},
  ): Promise<Int | undefined> => {
    const { async: oneWay, exactlyOnce, unique, ...write } = opts;
    // A write with an idempotency key wants its own answer, as the service treats it too; so
    // does one asked to apply exactly once, which a one-way write without a key cannot.
    if (!oneWay || exactlyOnce || write.idempotencyKey !== undefined)
      return call({
        ...write,
        op,
        ns,
        key,
        by,
        unique,
        keyless: !exactlyOnce && write.idempotencyKey === undefined,
      });
    return new Promise<undefined>((resolve, reject) => {
      const checked = checkOp({ op, ns, key, by, ttl: write.ttl, unique });
      sendOneWay(t, checked).then(() => resolve(undefined), reject);
    });
  };
  return {
    get: (ns, key) => call({ op: "get", ns, key }),
    days: (ns, key, options) => readDays(t, ns, key, options),
    incr: ((ns: string, key: string, by?: Int, opts?: CountOptions) =>
      count("incr", ns, key, by, opts)) as Client["incr"],
    decr: ((ns: string, key: string, by?: Int, opts?: CountOptions) =>
      count("decr", ns, key, by, opts)) as Client["decr"],
    set: (ns, key, value, opts) => call({ ...opts, op: "set", ns, key, value }),
    del: (ns, key, opts) => call({ ...opts, op: "delete", ns, key }),
    cacheGet: (ns, key) => call({ op: "cache_get", ns, key }),
    cachePut: (ns, key, body, opts) =>
      call({ ...opts, op: "cache_put", ns, key, value: body }),
    cacheDelete: (ns, key, opts) =>
      call({ ...opts, op: "cache_delete", ns, key }),
    async batch<const T extends readonly BatchOp[]>(
      ops: T,
    ): Promise<BatchResults<T>> {
      const results: unknown[] = [];
      const calls: Call[] = [];
      ops.forEach((input, i) => {
        const put = (value: unknown): void => {
          results[i] = value;
        };
        try {
          calls.push({
            op: checkOp(input as OpInput),
            resolve: put,
            reject: put,
          });
        } catch (error) {
          put(error);
        }
      });
      await runBatches(t, calls);
      return results as BatchResults<T>;
    },
    flush: queue.flush,
  };
}
