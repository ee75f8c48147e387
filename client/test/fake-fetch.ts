// A fake `fetch` for the unit tests: records every request and answers from a handler, so
// tests can see what the client sends and script what edgecount answers.

/** One request as the client sent it. */
export interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | undefined;
  /** A batch request's ops, parsed (JSON.parse: fine for the small numbers most tests use). */
  ops: Record<string, unknown>[];
  /** Sent with `keepalive`, to outlive the page. */
  keepalive: boolean;
  /** The request's abort signal (its timeout), if any. */
  signal: AbortSignal | undefined;
}

export type Handler = (
  request: Sent,
  index: number,
) => Response | Promise<Response>;

/** A fake `fetch` and the requests it got. */
export function fakeFetch(handler: Handler) {
  const sent: Sent[] = [];
  const fetch = async (url: string, init: RequestInit): Promise<Response> => {
    const { pathname, search } = new URL(url);
    const body = typeof init.body === "string" ? init.body : undefined;
    const request: Sent = {
      method: init.method ?? "GET",
      path: pathname + search,
      headers: { ...(init.headers as Record<string, string>) },
      body,
      ops: pathname === "/v1/batch" && body ? JSON.parse(body).ops : [],
      keepalive: init.keepalive === true,
      signal: init.signal ?? undefined,
    };
    sent.push(request);
    return handler(request, sent.length - 1);
  };
  return { fetch, sent };
}

/** A JSON answer; `text` is sent as it is, so it may hold numbers JSON.stringify cannot write. */
export const json = (
  text: string,
  status = 200,
  headers: Record<string, string> = {},
): Response =>
  new Response(text, {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
  });

/** An API error answer. */
export const apiError = (
  status: number,
  code: string,
  headers: Record<string, string> = {},
): Response =>
  json(
    JSON.stringify({ error: { code, message: `${code} happened` } }),
    status,
    headers,
  );

/** Answers every op of a batch the same way edgecount would for a plain counter store. */
export function counterStore() {
  const values = new Map<string, bigint>();
  return (request: Sent): Response => {
    const results = request.ops.map((op) => {
      const id = `${op.ns}/${op.key}`;
      const now = values.get(id) ?? 0n;
      const by = BigInt((op.by as number | undefined) ?? 1);
      const next =
        op.op === "incr" ? now + by : op.op === "decr" ? now - by : now;
      values.set(id, next);
      return `{"value":${next},"exists":true}`;
    });
    return json(`{"results":[${results.join(",")}]}`);
  };
}
