// HTTP to edgecount: requests with the token, errors read from the API's JSON, and the retry
// loop (exponential backoff with jitter, honouring Retry-After) that every call runs in.
import { clientError, EdgecountError, type ErrorCode } from "./errors";
import { parseJson } from "./json";
import type { FetchLike } from "./types";

/** Everything a request needs, fixed when the client is made. */
export interface Transport {
  fetch: FetchLike;
  baseUrl: string;
  token?: string;
  maxRetries: number;
  retryBaseMs: number;
  maxRetryDelayMs: number;
  /** Per request; 0 for no limit. */
  timeoutMs: number;
  /** Whether `fetch` is the caller's own (it may add headers a beacon cannot carry). */
  customFetch: boolean;
  /** Whether the page is being left (`pagehide`, and no `pageshow` since): a request's
   * answer may then never be read. */
  leaving: boolean;
}

/**
 * Whether an answer with this status is worth sending again after a wait: 429 and 503 (the
 * service's "nothing was applied, retry"), and a proxy's 502 and 504, after which a write may
 * have been applied: only a read or a write carrying its idempotency key is sent again then
 * (see {@link mayRetry}).
 */
export const retryableStatus = (status: number): boolean =>
  status === 429 || status === 503 || status === 502 || status === 504;

/** Whether the page is being hidden or unloaded, when requests should outlive it. */
export const pageHidden = (): boolean =>
  typeof document !== "undefined" && document.visibilityState === "hidden";

/** Bodies up to this many bytes go out with `keepalive` while the page is hidden (browsers
 * allow 64 KiB in flight for all of a page's keepalive requests). */
const KEEPALIVE_BODY_BYTES = 16 * 1024;

/** The codes with which the service says it applied nothing: safe to send anything again. */
const APPLIED_NOTHING: readonly string[] = [
  "rate_limited",
  "shard_unavailable",
  "shard_overloaded",
  "storage_unavailable",
  "one_way_buffer_full",
];

/**
 * Whether an op that failed with `error` may be sent again. A transient error may, but an op
 * that could apply twice (a write without its idempotency key, `mayApplyTwice`) only when the
 * service said it applied nothing: never after `outcome_unknown`, a proxy's 502 or 504, or an
 * answer that is not the service's own. A key makes the service answer a repeat without
 * applying it twice.
 */
export const mayRetry = (
  error: { status: number; code: string },
  mayApplyTwice: boolean,
): boolean => {
  if (error.code === "outcome_unknown") return !mayApplyTwice;
  if (!retryableStatus(error.status)) return false;
  return !mayApplyTwice || APPLIED_NOTHING.includes(error.code);
};

/**
 * Sends one request.
 *
 * @throws whatever `fetch` throws (a network failure).
 */
export function send(
  t: Transport,
  method: string,
  path: string,
  body?: BodyInit,
  headers: Record<string, string> = {},
  keepalive = false,
): Promise<Response> {
  if (t.token) headers.authorization = `Bearer ${t.token}`;
  const init: RequestInit = { method, headers, body };
  const small =
    body === undefined ||
    (typeof body === "string" && body.length <= KEEPALIVE_BODY_BYTES);
  // A request sent as the page goes away still reaches the service.
  if (keepalive || (small && pageHidden())) init.keepalive = true;
  if (t.timeoutMs > 0 && typeof AbortSignal.timeout === "function")
    init.signal = AbortSignal.timeout(t.timeoutMs);
  return t.fetch(t.baseUrl + path, init);
}

/** Seconds from a `Retry-After` header (delay-seconds or an HTTP date), if there is one. */
function retryAfterSeconds(header: string | null): number | undefined {
  if (header === null || header.trim() === "") return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const at = Date.parse(header);
  return Number.isNaN(at)
    ? undefined
    : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The error an answer that is not 2xx stands for, read from its `{"error": {...}}` body. */
export async function httpError(response: Response): Promise<EdgecountError> {
  const retryAfter = retryAfterSeconds(response.headers.get("retry-after"));
  let text = "";
  try {
    text = await response.text();
    const { error } = parseJson(text) as {
      error: { code: unknown; message: unknown };
    };
    if (typeof error.code === "string") {
      return new EdgecountError(
        response.status,
        error.code as ErrorCode,
        String(error.message),
        retryAfter,
      );
    }
  } catch {
    // Not the API's JSON (a proxy's error page, say): described below.
  }
  return new EdgecountError(
    response.status,
    "bad_response",
    `edgecount answered ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}`,
    retryAfter,
  );
}

/** The error for a request that got no answer. */
export function networkError(cause: unknown): EdgecountError {
  return clientError(
    "network_error",
    `edgecount could not be reached: ${String(cause)}`,
    cause,
  );
}

/**
 * Asks for another attempt, at least `afterMs` milliseconds from now when given; answers
 * whether there will be one (false once the retries are spent, or when `afterMs` is longer
 * than the longest wait).
 */
export type Retry = (afterMs?: number) => boolean;

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `step` until it finishes without asking for a retry. A step settles what it can and
 * calls `retry` for what failed transiently; when `retry` says no, the step settles that too,
 * with its error. Waits between attempts grow exponentially from `retryBaseMs`, up to
 * `maxRetryDelayMs`, with random jitter over their upper half, and are never shorter than a
 * `Retry-After` the step passed on.
 */
export async function withRetries(
  t: Transport,
  step: (retry: Retry) => Promise<void>,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    let wait: number | undefined;
    const ceiling = Math.min(t.maxRetryDelayMs, t.retryBaseMs * 2 ** attempt);
    const jitter = (Math.random() * ceiling) / 2;
    await step((afterMs = 0) => {
      if (attempt >= t.maxRetries || afterMs > t.maxRetryDelayMs) return false;
      wait = Math.max(wait ?? 0, Math.max(afterMs, ceiling / 2) + jitter);
      return true;
    });
    if (wait === undefined) return;
    await sleep(wait);
  }
}
