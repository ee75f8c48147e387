// EdgecountError: the one error type the client throws, carrying the API's error code, so
// callers can tell a bad key from an overflow from a shard that is briefly unavailable.

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
 * Statuses of the single-key routes for each error code, so an op answered inside a batch
 * reports the same `status` it would have had on its own route. Codes starting `invalid_` are
 * 400 and left out.
 */
const STATUS_OF_CODE: Record<string, number> = {
  duplicate_parameter: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  too_many_ops: 413,
  unsupported_media_type: 415,
  overflow: 422,
  idempotency_mismatch: 422,
  rate_limited: 429,
  misconfigured: 500,
  internal: 500,
  shard_unavailable: 503,
  outcome_unknown: 503,
  shard_overloaded: 503,
  storage_unavailable: 503,
};

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
export class EdgecountError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly retryAfter?: number;

  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    retryAfter?: number,
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "EdgecountError";
    this.status = status;
    this.code = code;
    if (retryAfter !== undefined) this.retryAfter = retryAfter;
  }
}

/** The error for a per-op `{"error": {"code", "message"}}` inside a batch's results. */
export function opError(error: {
  code?: unknown;
  message?: unknown;
}): EdgecountError {
  // The service's word for it, typed as the codes it documents.
  const code = String(error.code) as ErrorCode;
  return new EdgecountError(
    STATUS_OF_CODE[code] ?? (code.startsWith("invalid_") ? 400 : 0),
    code,
    String(error.message),
  );
}

/** An error the client raises itself, before or without an HTTP answer. */
export function clientError(
  code: ErrorCode,
  message: string,
  cause?: unknown,
): EdgecountError {
  return new EdgecountError(0, code, message, undefined, cause);
}
