// A counter's days and unique visitors: `GET /v1/counters/:ns/:key/days`, a read of its own
// (not batched), retried as reads are.
import { badResponse } from "./ops";
import { parseJson } from "./json";
import {
  httpError,
  mayRetry,
  networkError,
  send,
  withRetries,
  type Transport,
} from "./transport";
import type { Days, DaysOptions, Int } from "./types";

/** The path of `ns`/`key`'s days as `options` ask them. */
function daysPath(ns: string, key: string, options: DaysOptions): string {
  const query = new URLSearchParams();
  if (options.period !== undefined) query.set("period", options.period);
  if (options.from !== undefined) query.set("from", options.from);
  if (options.to !== undefined) query.set("to", options.to);
  if (options.unique) query.set("unique", "1");
  const search = query.toString();
  return `/v1/counters/${encodeURIComponent(ns)}/${encodeURIComponent(key)}/days${search ? `?${search}` : ""}`;
}

/** The answer's fields, checked. */
function daysOf(answer: Record<string, unknown>): Days {
  const { value, exists, from, to, time_zone, count, uniques, days } = answer;
  const isInt = (n: unknown) => typeof n === "number" || typeof n === "bigint";
  if (
    !isInt(value) ||
    !isInt(count) ||
    typeof from !== "string" ||
    typeof to !== "string" ||
    !Array.isArray(days)
  )
    throw badResponse("not a counter's days");
  return {
    value: value as Int,
    exists: exists === true,
    from,
    to,
    timeZone: String(time_zone),
    count: count as Int,
    uniques: typeof uniques === "number" ? uniques : undefined,
    days: days as Days["days"],
  };
}

/**
 * Reads `ns`/`key`'s days.
 *
 * @throws EdgecountError for a refusal (a bad period is `invalid_parameter`) or a network
 * failure after the retries.
 */
export function readDays(
  t: Transport,
  ns: string,
  key: string,
  options: DaysOptions = {},
): Promise<Days> {
  const path = daysPath(ns, key, options);
  let outcome: Days | undefined;
  return withRetries(t, async (retry) => {
    let response: Response;
    try {
      response = await send(t, "GET", path);
    } catch (cause) {
      // A read: always safe to send again.
      if (retry()) return;
      throw networkError(cause);
    }
    if (!response.ok) {
      const error = await httpError(response);
      const afterMs =
        error.retryAfter === undefined ? undefined : error.retryAfter * 1000;
      if (mayRetry(error, false) && retry(afterMs)) return;
      throw error;
    }
    outcome = daysOf(
      parseJson(await response.text()) as Record<string, unknown>,
    );
  }).then(() => {
    if (outcome === undefined) throw badResponse("no answer");
    return outcome;
  });
}
