// The edgecount browser client: counters and cache entries over edgecount's HTTP API, with
// calls of one tick batched into one request, retries that never apply a write twice, and
// counter values exact over the whole signed 64-bit range.
import { createQueue, runBatches, type Call } from "./batcher";
import { checkOp, type OpInput } from "./ops";
import type { Transport } from "./transport";
import type { BatchOp, BatchResults, Client, ClientOptions } from "./types";

export { EdgecountError } from "./errors";
export type {
  BatchOp,
  BatchResult,
  BatchResults,
  CacheBody,
  CacheEntry,
  CachePutOptions,
  Client,
  ClientOptions,
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
 *   so a retried write is applied once.
 * - **Errors.** Calls reject with {@link EdgecountError}, whose `code` is the API's.
 *
 * @example
 * const edgecount = createClient({ baseUrl: "https://edgecount.example.workers.dev" });
 * const views = await edgecount.incr("pages", location.pathname);
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
  };
  const queue = createQueue(t, options.batchDelayMs ?? 0);
  const call = <T>(input: OpInput): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      // checkOp throws for bad inputs, which rejects this promise.
      queue.add({
        op: checkOp(input),
        resolve: resolve as (value: unknown) => void,
        reject,
      });
    });
  return {
    get: (ns, key) => call({ op: "get", ns, key }),
    incr: (ns, key, by, opts) => call({ ...opts, op: "incr", ns, key, by }),
    decr: (ns, key, by, opts) => call({ ...opts, op: "decr", ns, key, by }),
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
