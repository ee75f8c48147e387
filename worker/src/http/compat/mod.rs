//! The CountAPI- and Abacus-compatible routes (`/hit`, `/get`, `/set`, `/update`, `/create`,
//! `/info`, `/stats`, and Abacus's `/reset`, `/delete` and badges): a second face over the
//! counters of API v1, so `GET /hit/blog/home` and `GET /v1/counters/blog/home` see one value.
//!
//! Everything here answers in those services' shapes: `{"value": N}` bodies, `{"error": "..."}`
//! refusals, `X-Path: ns/key` on every keyed answer and JSONP with `?callback=fn`. The names,
//! parameters and answer shapes are decided in the core ([`edgecount_core::compat`]); the
//! handlers are in [`handlers`], what they share in [`call`], and a counter's own rules are
//! checked by its shard.

mod call;
mod handlers;
mod stream;

use edgecount_core::compat::{params, CompatError};
use serde_json::{json, Value};
use worker::Method;

use crate::http::message::{Body, Header, Request, Response};
use crate::http::request_context::RequestContext;
use crate::http::respond;
use crate::http::target::Target;
use crate::isolate::meter::Meter;
use crate::isolate::placement;

use call::{from_api, match_path, resolve_names, Call, Matched, Reply, Shape};

/// Serves a request on a compatible route; `None` when the path is not one of them.
pub async fn serve(req: &Request, cx: &RequestContext<'_>) -> Option<Response> {
    let matched = match_path(req.path())?;
    if req.method() == Some(Method::Options) {
        return Some(respond::preflight(matched.route.allow()));
    }
    let callback = params::callback(req.query());
    let mut extras = Extras::default();
    let reply = match &callback {
        Err(error) => Err(error.clone()),
        Ok(_) => answer(req, cx, &matched, &mut extras).await,
    };
    let Extras { meter, x_path, retry_after } = extras;
    let mut response = match reply {
        Ok(Reply::Svg(svg)) => Response::with_body(200, "image/svg+xml; charset=utf-8", Body::Text(svg)),
        Ok(Reply::Events(events)) => Response::with_body(200, "text/event-stream", Body::Stream(events)),
        Ok(Reply::Json(status, body)) => json_or_jsonp(status, &body, callback.ok().flatten().as_deref()),
        Err(error) => {
            let body = json!({"error": error.message});
            let mut response = json_or_jsonp(error.status, &body, callback.ok().flatten().as_deref());
            if error.status == 405 {
                response.set_header("allow", matched.route.allow());
            }
            if let Some(seconds) = retry_after {
                response.set_header("retry-after", seconds.to_string());
            }
            response
        }
    };
    if let Some(path) = x_path {
        response.set_header("x-path", path);
    }
    if let Some(meter) = meter {
        for (name, value) in meter.headers() {
            response.set_header(name, value);
        }
    }
    // Every answer here is a write's or a live count: caches must ask again.
    response.set_header("cache-control", "no-store");
    Some(response)
}

/// What the response needs besides the reply, set by [`answer`] as it learns it, whether it
/// then succeeds or not.
#[derive(Default)]
struct Extras {
    /// The request's meter, once made: its headers go on every answer from then on, a refusal
    /// by the rate limit included.
    meter: Option<Meter>,
    /// `X-Path: ns/key`, once the names are resolved.
    x_path: Option<String>,
    /// `Retry-After` seconds of a refusal by the rate limit.
    retry_after: Option<u64>,
}

async fn answer(
    req: &Request,
    cx: &RequestContext<'_>,
    matched: &Matched,
    extras: &mut Extras,
) -> Result<Reply, CompatError> {
    let config = cx.config;
    let method = req.method().unwrap_or(Method::Connect);
    let allowed = match method {
        Method::Get => matched.route.allow().starts_with("GET"),
        Method::Post => matched.route.allow().contains("POST"),
        _ => false,
    };
    if !allowed {
        return Err(CompatError::new(405, &format!("This route only accepts {}.", matched.route.allow())));
    }
    let token = req.bearer_token().or(params::token(req.query())?);
    let meter = extras.meter.insert(Meter::for_request(
        req.header(Header::ClientAddress).as_deref(),
        config,
        token.as_deref(),
    ));
    meter.charge(config, 1).map_err(|error| {
        extras.retry_after = error.retry_after_seconds();
        from_api(&error)
    })?;
    let target = match matched.shape {
        Shape::Unnamed => None,
        shape => {
            let ns = (shape == Shape::NsAndKey).then_some(matched.ns.as_str());
            let key = if shape == Shape::NsAndKey { &matched.key } else { &matched.ns };
            let (ns, key) = resolve_names(req, ns, key)?;
            extras.x_path = Some(format!("{ns}/{key}"));
            Some(Target::new(config, ns, key))
        }
    };
    placement::ensure(cx.env, config).await.map_err(|error| from_api(&error))?;
    let call = Call { req, cx, target, token, method };
    handlers::run(matched.route, &call, &mut extras.x_path).await
}

/// A JSON answer, or with `?callback=fn` the same as a script calling `fn` (JSONP). The
/// callback is a plain function name (see [`params::callback`]), so it cannot inject code.
fn json_or_jsonp(status: u16, body: &Value, callback: Option<&str>) -> Response {
    match callback {
        Some(callback) => Response::with_body(
            status,
            "application/javascript; charset=utf-8",
            Body::Text(format!("/**/ typeof {callback} === 'function' && {callback}({body});")),
        ),
        None => Response::with_body(status, "application/json; charset=utf-8", Body::Text(body.to_string())),
    }
}
