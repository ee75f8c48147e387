// One-way counting: an increment or decrement the service answers 202 at once and applies
// within its flush interval. Sent at once (never batched), so that a count made just before
// the page goes away still leaves it.
import { route, type Op } from "./ops";
import {
  httpError,
  mayRetry,
  networkError,
  send,
  withRetries,
  type Transport,
} from "./transport";

/**
 * The op's route, asking for a one-way write in the query: a POST without a body or headers
 * is a simple request, which a browser sends without a CORS preflight (a keepalive request
 * that needs one may be refused while the page unloads), and a beacon can send it too.
 */
function oneWayPath(op: Op): string {
  const { path } = route(op);
  return `${path}${path.includes("?") ? "&" : "?"}async=1`;
}

/**
 * Sends a one-way `incr` or `decr` with a `keepalive` fetch, which outlives the page, and
 * resolves once the service accepted it. Retried only after a 429 or 503 (the service
 * accepted nothing); a network failure may hide an accepted write, and the op carries no
 * idempotency key, so it is reported, not sent again. While the page is being left (after
 * `pagehide`), when no answer could be read anyway, it goes with `navigator.sendBeacon` if it
 * can (no token, no `fetch` of the caller's own, which may add headers a beacon cannot carry),
 * and resolves once the browser took it.
 *
 * @throws EdgecountError for a refusal or a network failure.
 */
export function sendOneWay(t: Transport, op: Op): Promise<void> {
  const path = oneWayPath(op);
  return withRetries(t, async (retry) => {
    if (
      t.leaving &&
      !t.token &&
      !t.customFetch &&
      typeof navigator !== "undefined" &&
      typeof navigator.sendBeacon === "function" &&
      navigator.sendBeacon(t.baseUrl + path)
    )
      return;
    let response: Response;
    try {
      response = await send(t, "POST", path, undefined, {}, true);
    } catch (cause) {
      throw networkError(cause);
    }
    // 202 accepted, or a 200 from a service that applied it at once.
    if (response.ok) return;
    const error = await httpError(response);
    // No idempotency key: sent again only when the service says it accepted nothing.
    const nothingAccepted = mayRetry(error, true);
    const afterMs =
      error.retryAfter === undefined ? undefined : error.retryAfter * 1000;
    if (nothingAccepted && retry(afterMs)) return;
    throw error;
  });
}
