//! Building responses: JSON and plain-text bodies, errors, and the CORS headers.

use futures_util::StreamExt;
use serde::Serialize;
use worker::{Headers, Request, Response};

use crate::http::api_error::ApiError;
use crate::isolate::config::{Config, CorsOrigins};

const JSON: &str = "application/json; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Headers a browser script may read from a cross-origin response.
const EXPOSED_HEADERS: &str = "X-Edgecount-Shard, ETag, X-Cache, Age, Idempotent-Replayed, Retry-After, \
                               RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset";
/// A document served with it runs in a unique origin without scripts and may load nothing.
const SANDBOX_POLICY: &str = "sandbox; default-src 'none'";

/// Request headers a browser may send cross-origin.
const ALLOWED_HEADERS: &str = "Content-Type, Authorization, Idempotency-Key, Cache-Control, If-None-Match";

/// A response with a JSON body.
///
/// # Errors
/// Only if the runtime refuses to build a response.
pub fn json(status: u16, body: &impl Serialize) -> Result<Response, ApiError> {
    let text = serde_json::to_string(body).map_err(|e| ApiError::Internal(e.to_string()))?;
    with_body(status, text, JSON)
}

/// A response with a plain-text body.
///
/// # Errors
/// Only if the runtime refuses to build a response.
pub fn text(status: u16, body: String) -> Result<Response, ApiError> {
    with_body(status, body, TEXT)
}

fn with_body(status: u16, body: String, content_type: &str) -> Result<Response, ApiError> {
    let headers = Headers::new();
    headers.set("content-type", content_type)?;
    Ok(Response::ok(body)?.with_status(status).with_headers(headers))
}

/// The JSON answer for an error, with `Allow` on a 405. (A 429's `RateLimit-*` headers come
/// from the request's meter, as on every answer.)
///
/// # Errors
/// Only if the runtime refuses to build a response.
pub fn error(error: &ApiError) -> Result<Response, ApiError> {
    let response = json(error.status(), &error.body())?;
    if let ApiError::MethodNotAllowed { allow } = error {
        response.headers().set("allow", allow)?;
    }
    if let Some(seconds) = error.retry_after_seconds() {
        response.headers().set("retry-after", &seconds.to_string())?;
    }
    if *error == ApiError::Unauthorized {
        response.headers().set("www-authenticate", "Bearer")?;
    }
    Ok(response)
}

/// The answer to a CORS preflight for a route that accepts `allow`.
///
/// # Errors
/// Only if the runtime refuses to build a response.
pub fn preflight(allow: &str) -> Result<Response, ApiError> {
    let response = Response::empty()?.with_status(204);
    let headers = response.headers();
    headers.set("allow", allow)?;
    headers.set("access-control-allow-methods", allow)?;
    headers.set("access-control-allow-headers", ALLOWED_HEADERS)?;
    headers.set("access-control-max-age", "86400")?;
    Ok(response)
}

/// Adds the CORS headers for the request's `Origin`, if the origin is allowed.
///
/// # Errors
/// Only if the runtime refuses to change the headers.
pub fn add_cors(response: &Response, config: &Config, origin: Option<&str>) -> Result<(), ApiError> {
    let headers = response.headers();
    let allowed = match (&config.cors_origins, origin) {
        (CorsOrigins::Any, _) => Some("*"),
        (CorsOrigins::List(list), Some(origin)) if list.iter().any(|o| o == origin) => Some(origin),
        (CorsOrigins::List(_), _) => None,
    };
    if config.cors_origins != CorsOrigins::Any {
        // The answer differs by origin, so shared caches must key on it.
        headers.append("vary", "Origin")?;
    }
    if let Some(allowed) = allowed {
        headers.set("access-control-allow-origin", allowed)?;
        headers.set("access-control-expose-headers", EXPOSED_HEADERS)?;
    }
    Ok(())
}

/// Marks an answer on the cache paths as not to be sniffed and sandboxed. Their bytes are the
/// clients' and are served from the API's own origin: a stored `text/html` page with a script
/// must neither run with that origin's rights nor be read as some other type.
///
/// # Errors
/// Only if the runtime refuses to change the headers.
pub fn sandbox(response: &Response) -> Result<(), ApiError> {
    let headers = response.headers();
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("content-security-policy", SANDBOX_POLICY)?;
    Ok(())
}

/// Reads a request body of at most `limit` bytes: one whose declared length is larger is
/// refused before reading, and one sent without a length (chunked) is read as it streams and
/// refused as soon as it passes the limit, so an oversized body never costs more than `limit`
/// bytes of memory.
///
/// # Errors
/// [`ApiError::PayloadTooLarge`] past the limit.
pub async fn read_bounded_body(req: &mut Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = ApiError::PayloadTooLarge { limit_bytes: limit };
    let declared = req.headers().get("content-length")?.and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(too_large);
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    let Ok(mut chunks) = req.stream() else {
        // No body at all.
        return Ok(body);
    };
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            // Dropping the stream cancels the rest of the upload.
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
