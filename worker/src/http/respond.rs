//! Building responses: JSON and plain-text bodies, errors, and the CORS headers.

use futures_util::StreamExt;
use serde::Serialize;

use crate::http::message::{Body, Header, Request, Response};
use crate::shared::api_error::ApiError;
use crate::shared::config::{Config, CorsOrigins};
use crate::shared::tasks;

const JSON: &str = "application/json; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Headers a browser script may read from a cross-origin response.
const EXPOSED_HEADERS: &str = "X-Edgecount-Shard, ETag, X-Cache, Age, Idempotent-Replayed, Retry-After, \
                               RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, X-Path";
/// A document served with it runs in a unique origin without scripts and may load nothing.
const SANDBOX_POLICY: &str = "sandbox; default-src 'none'";

/// Request headers a browser may send cross-origin.
const ALLOWED_HEADERS: &str =
    "Content-Type, Authorization, Idempotency-Key, Cache-Control, If-None-Match, Prefer";

/// A response with a JSON body.
///
/// # Errors
/// Only if the body cannot be serialized (a map with non-string keys: none of ours).
pub fn json(status: u16, body: &impl Serialize) -> Result<Response, ApiError> {
    let text = serde_json::to_string(body).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Response::with_body(status, JSON, Body::Text(text)))
}

/// A response with a plain-text body.
pub fn text(status: u16, body: String) -> Response {
    Response::with_body(status, TEXT, Body::Text(body))
}

/// The JSON answer for an error, with `Allow` on a 405. (A 429's `RateLimit-*` headers come
/// from the request's meter, as on every answer.)
pub fn error(error: &ApiError) -> Response {
    // An error's body is a JSON value, which always serializes.
    let mut response =
        json(error.status(), &error.body()).unwrap_or_else(|_| text(500, "internal error".to_owned()));
    if let ApiError::MethodNotAllowed { allow } = error {
        response.set_header("allow", *allow);
    }
    if let Some(seconds) = error.retry_after_seconds() {
        response.set_header("retry-after", seconds.to_string());
    }
    if *error == ApiError::Unauthorized {
        response.set_header("www-authenticate", "Bearer");
    }
    response
}

/// The answer to a CORS preflight for a route that accepts `allow`.
pub fn preflight(allow: &str) -> Response {
    let mut response = Response::empty(204);
    response.set_header("allow", allow);
    response.set_header("access-control-allow-methods", allow);
    response.set_header("access-control-allow-headers", ALLOWED_HEADERS);
    response.set_header("access-control-max-age", "86400");
    response
}

/// Adds the CORS headers for the request's `Origin`, if the origin is allowed: with any origin
/// allowed, `Access-Control-Allow-Origin: *` on every answer, and the exposed headers' list on
/// answers to requests that name an origin.
pub fn add_cors(response: &mut Response, config: &Config, origin: Option<&str>) {
    let allowed = match (&config.cors_origins, origin) {
        (CorsOrigins::Any, _) => Some("*"),
        (CorsOrigins::List(list), Some(origin)) if list.iter().any(|o| o == origin) => Some(origin),
        (CorsOrigins::List(_), _) => None,
    };
    if config.cors_origins != CorsOrigins::Any {
        // The answer differs by origin, so shared caches must key on it.
        response.append_header("vary", "Origin");
    }
    if let Some(allowed) = allowed {
        response.set_header("access-control-allow-origin", allowed);
        // Only a browser's cross-origin request, which always names its origin, reads the
        // exposed list (every header costs the runtime about a microsecond to send); an answer
        // shared caches may keep carries it whoever asked, as it may be served to a browser.
        let shared = response.header("cache-control").is_some_and(|c| c.starts_with("public"));
        if origin.is_some() || shared {
            response.set_header("access-control-expose-headers", EXPOSED_HEADERS);
        }
    }
}

/// Marks an answer on the cache paths as not to be sniffed and sandboxed. Their bytes are the
/// clients' and are served from the API's own origin: a stored `text/html` page with a script
/// must neither run with that origin's rights nor be read as some other type.
pub fn sandbox(response: &mut Response) {
    response.set_header("x-content-type-options", "nosniff");
    response.set_header("content-security-policy", SANDBOX_POLICY);
}

/// The most a body's buffer reserves before its bytes arrive.
const INITIAL_BODY_CAPACITY: usize = 64 * 1024;

/// How long a body may go without a byte before it is given up (408): a client that stops
/// sending would otherwise hold its request, and what it sent so far, for as long as it keeps
/// the connection open. Slow bodies that keep coming are read to the end.
const BODY_IDLE_MS: u64 = 10_000;

/// Reads a request body of at most `limit` bytes: one whose declared length is larger is
/// refused before reading, and one sent without a length (chunked) is read as it streams and
/// refused as soon as it passes the limit, so an oversized body never costs more than `limit`
/// bytes of memory.
///
/// # Errors
/// [`ApiError::PayloadTooLarge`] past the limit.
pub async fn read_bounded_body(req: &Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = ApiError::PayloadTooLarge { limit_bytes: limit };
    let declared = req.header(Header::ContentLength).and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(too_large);
    }
    // The declared length is what the client says, not what it sends: reserving all of it up
    // front would let idle connections hold a batch's limit each without sending a byte.
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(INITIAL_BODY_CAPACITY));
    let Some(chunks) = req.body_chunks() else {
        // No body at all.
        return Ok(body);
    };
    let mut chunks = std::pin::pin!(chunks);
    let stalled = ApiError::BodyTimeout { idle_s: BODY_IDLE_MS / 1000 };
    while let Some(chunk) = tasks::within(chunks.next(), BODY_IDLE_MS).await.ok_or(stalled.clone())? {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            // Dropping the stream cancels the rest of the upload.
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
