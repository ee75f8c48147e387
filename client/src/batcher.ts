// Sending calls: one op to its single-key route, or many as POST /v1/batch requests of at
// most 1000 ops; and the queue that collects the calls of one tick into one batch.
import { clientError, EdgecountError, opError } from "./errors";
import { parseJson } from "./json";
import {
  badResponse,
  batchable,
  batchEntry,
  decode,
  hasRoute,
  isDotSegment,
  mayHaveApplied,
  route,
  type Op,
} from "./ops";
import {
  httpError,
  networkError,
  mayRetry,
  pageHidden,
  send,
  withRetries,
  type Retry,
  type Transport,
} from "./transport";

/** A call waiting for its answer. */
export interface Call {
  op: Op;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  /** The op as a batch entry, written once. */
  entry?: string;
  /** Put in a batch by the client, not by its caller: a `cache_get` the batch's answer budget
   * refused is then read on its own, as the call alone would have been. */
  batchedByClient?: boolean;
}

/** Most ops in one batch request: the service refuses more. */
export const MAX_BATCH_OPS = 1000;
/** Most bytes in one batch body: the service takes 8 MiB; a little is kept for the wrapper. */
export const MAX_BATCH_BYTES = 8 * 1024 * 1024 - 64;

/** Resolves a call with its op's answer, or rejects it; a `cache_get` that finds nothing resolves `null`. */
function settle(call: Call, answer: unknown): void {
  if (answer instanceof EdgecountError) {
    if (answer.code === "not_found" && call.op.op === "cache_get")
      call.resolve(null);
    else call.reject(answer);
  } else if (typeof answer !== "object" || answer === null) {
    call.reject(badResponse("an op's result is not an object"));
  } else {
    try {
      call.resolve(decode(call.op, answer as Record<string, unknown>));
    } catch (error) {
      call.reject(error);
    }
  }
}

/**
 * Handles an answer that is not 2xx, or a failed `fetch` (`response` undefined): asks for a
 * retry when it passes, else settles every call with the error.
 */
async function failed(
  calls: Call[],
  retry: Retry,
  response: Response | undefined,
  cause?: unknown,
): Promise<void> {
  if (!response) {
    // A lost answer may hide an applied write: sent again only if none is a write without
    // its idempotency key (a count sent keyless).
    const safe = calls.every((call) => !mayHaveApplied(call.op));
    if (!(safe && retry()))
      calls.forEach((call) => settle(call, networkError(cause)));
    return;
  }
  const error = await httpError(response);
  const afterMs =
    error.retryAfter === undefined ? undefined : error.retryAfter * 1000;
  const again = calls.every((call) => mayRetry(error, mayHaveApplied(call.op)));
  if (!(again && retry(afterMs))) calls.forEach((call) => settle(call, error));
}

/** Sends one op to its single-key route, retrying while that passes. */
function runSingle(t: Transport, call: Call): Promise<void> {
  const { method, path, body, contentType } = route(call.op);
  return withRetries(t, async (retry) => {
    const headers: Record<string, string> = {};
    if (contentType) headers["content-type"] = contentType;
    if (call.op.idempotencyKey)
      headers["idempotency-key"] = call.op.idempotencyKey;
    let response: Response;
    try {
      response = await send(t, method, path, body, headers);
    } catch (cause) {
      return failed([call], retry, undefined, cause);
    }
    if (!response.ok) return failed([call], retry, response);
    try {
      if (call.op.op === "cache_get") {
        const bytes = new Uint8Array(await response.arrayBuffer());
        const type =
          response.headers.get("content-type") ?? "application/octet-stream";
        settle(call, { bytes, content_type: type });
      } else {
        const text = call.op.op === "cache_put" ? "{}" : await response.text();
        settle(call, parseJson(text));
      }
    } catch (error) {
      settle(call, badResponse(String(error)));
    }
  });
}

/** Sends calls as one batch request, retrying the whole request or the ops that failed transiently. */
function runBatch(t: Transport, calls: Call[]): Promise<void> {
  let pending = calls;
  return withRetries(t, async (retry) => {
    const body = `{"ops":[${pending.map((call) => call.entry).join(",")}]}`;
    let response: Response;
    try {
      response = await send(t, "POST", "/v1/batch", body, {
        "content-type": "application/json",
      });
    } catch (cause) {
      return failed(pending, retry, undefined, cause);
    }
    if (!response.ok) return failed(pending, retry, response);
    let results: unknown;
    try {
      results = (parseJson(await response.text()) as { results?: unknown })
        .results;
    } catch {
      // Checked below.
    }
    if (!Array.isArray(results) || results.length !== pending.length) {
      pending.forEach((call) =>
        settle(call, badResponse("the batch's results do not match its ops")),
      );
      return;
    }
    const again: Call[] = [];
    const alone: Call[] = [];
    pending.forEach((call, i) => {
      const answer = results[i] as {
        error?: { code?: unknown; message?: unknown };
      } | null;
      const error = answer?.error && opError(answer.error);
      if (
        error?.code === "payload_too_large" &&
        call.op.op === "cache_get" &&
        call.batchedByClient &&
        hasRoute(call.op)
      )
        alone.push(call);
      else if (error && mayRetry(error, mayHaveApplied(call.op)) && retry())
        again.push(call);
      else settle(call, error || answer);
    });
    await Promise.all(alone.map((call) => runSafely(runSingle, t, call)));
    pending = again;
  });
}

/** UTF-8 length of a string. */
const utf8Length = (text: string): number =>
  new TextEncoder().encode(text).length;

/**
 * Sends calls as batch requests of at most {@link MAX_BATCH_OPS} ops and
 * {@link MAX_BATCH_BYTES}, one request after another so that ops on one key apply in call
 * order. Settles every call; never rejects.
 */
export async function runBatches(t: Transport, calls: Call[]): Promise<void> {
  let chunk: Call[] = [];
  let bytes = 0;
  for (const call of calls) {
    call.entry ??= batchEntry(call.op);
    const size = utf8Length(call.entry) + 1;
    if (
      chunk.length &&
      (chunk.length === MAX_BATCH_OPS || bytes + size > MAX_BATCH_BYTES)
    ) {
      await runSafely(runBatch, t, chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(call);
    bytes += size;
  }
  if (chunk.length) await runSafely(runBatch, t, chunk);
}

/** Runs a sender, rejecting its calls should it fail unexpectedly (settled calls stay as they are). */
async function runSafely<T extends Call | Call[]>(
  run: (t: Transport, calls: T) => Promise<void>,
  t: Transport,
  calls: T,
): Promise<void> {
  try {
    await run(t, calls);
  } catch (error) {
    ([] as Call[]).concat(calls).forEach((call) => call.reject(error));
  }
}

/**
 * Sends calls collected together: one op alone to its single-key route (so counter reads can
 * be answered by the edge cache), more as batch requests. Bytes for the cache cannot travel
 * in a batch and go to their route on their own; a name `.` or `..` cannot be a URL segment
 * and goes in a batch.
 */
export function dispatch(t: Transport, calls: Call[]): void {
  const batched: Call[] = [];
  for (const call of calls) {
    call.batchedByClient = true;
    if (batchable(call.op)) batched.push(call);
    else if (hasRoute(call.op)) void runSafely(runSingle, t, call);
    else {
      const [name, value] = isDotSegment(call.op.ns)
        ? (["namespace", call.op.ns] as const)
        : (["key", call.op.key] as const);
      const why = "a URL cannot carry it, and a batch carries only text";
      call.reject(
        clientError(
          `invalid_${name}`,
          `Cache bytes cannot be stored under the ${name} \`${value}\`: ${why}.`,
        ),
      );
    }
  }
  if (batched.length === 1 && hasRoute(batched[0].op))
    void runSafely(runSingle, t, batched[0]);
  else if (batched.length) void runBatches(t, batched);
}

/** The automatic batch: calls wait in it until the window closes, then go out together. */
export interface Queue {
  add(call: Call): void;
  flush(): void;
}

/**
 * A queue whose window is the current tick (`delayMs` 0: closed by a microtask queued with the
 * first call), `delayMs` milliseconds from the first call, or nothing (`false`: each call goes
 * at once).
 */
export function createQueue(t: Transport, delayMs: number | false): Queue {
  let waiting: Call[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closingThisTick = false;
  const flush = (): void => {
    clearTimeout(timer);
    closingThisTick = false;
    const calls = waiting;
    waiting = [];
    if (calls.length) dispatch(t, calls);
  };
  return {
    add(call) {
      if (delayMs === false) return dispatch(t, [call]);
      waiting.push(call);
      // A page being hidden or left may never run the window's timer: its window closes
      // with the tick instead, so the calls of one tick still go together.
      if (pageHidden() && !closingThisTick) {
        closingThisTick = true;
        return queueMicrotask(flush);
      }
      if (waiting.length > 1) return;
      if (delayMs > 0) timer = setTimeout(flush, delayMs);
      else queueMicrotask(flush);
    },
    flush,
  };
}
