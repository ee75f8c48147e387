//! The CountAPI- and Abacus-compatible routes (`/hit`, `/get`, `/set`, `/update`, `/create`,
//! `/info`, `/stats`, and Abacus's `/reset`, `/delete` and badges): a second face over the
//! counters of API v1, so `GET /hit/blog/home` and `GET /v1/counters/blog/home` see one value.
//!
//! Everything here answers in those services' shapes: `{"value": N}` bodies, `{"error": "..."}`
//! refusals, `X-Path: ns/key` on every keyed answer and JSONP with `?callback=fn`. The names,
//! parameters and answer shapes are decided in the core ([`edgecount_core::compat`]); the
//! handlers are in [`handlers`], and a counter's own rules are checked by its shard.

mod handlers;
mod stream;

use edgecount_core::compat::names::{self, Page};
use edgecount_core::compat::{params, CompatError};
use edgecount_core::{Key, Namespace};
use serde_json::{json, Value};
use worker::{Env, Method};

use crate::http::api_error::ApiError;
use crate::http::message::{Body, Header, JsStream, Request, Response};
use crate::http::respond;
use crate::http::routes::bearer_token;
use crate::http::target::Target;
use crate::isolate::config::Config;
use crate::isolate::meter::Meter;
use crate::isolate::placement;
use crate::isolate::shard_calls::Caller;

/// The compatible routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Hit,
    HitShield,
    Get,
    GetShield,
    Set,
    Update,
    Reset,
    Delete,
    /// CountAPI's `GET /create?namespace=&key=...`.
    Create,
    /// Abacus's `/create/` (random names) and `/create/:ns/:key`.
    CreateWithAdminKey,
    Info,
    Stats,
    /// Abacus's `/healthcheck`.
    Healthcheck,
    /// Abacus's server-sent events of a value.
    Stream,
}

impl Route {
    fn allow(self) -> &'static str {
        match self {
            Self::Set | Self::Update | Self::CreateWithAdminKey => "GET, POST, OPTIONS",
            Self::Reset | Self::Delete => "POST, OPTIONS",
            _ => "GET, OPTIONS",
        }
    }
}

thread_local! {
    static ROUTER: matchit::Router<(Route, Shape)> = build_router();
}

/// How a path names its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `/route/:key`, in the default namespace.
    KeyOnly,
    NsAndKey,
    /// No names (`/stats`, `/create`), or random ones (`/create/`).
    Unnamed,
}

fn build_router() -> matchit::Router<(Route, Shape)> {
    let mut router = matchit::Router::new();
    let keyed = [
        ("hit", Route::Hit),
        ("get", Route::Get),
        ("set", Route::Set),
        ("update", Route::Update),
        ("reset", Route::Reset),
        ("delete", Route::Delete),
        ("create", Route::CreateWithAdminKey),
        ("info", Route::Info),
        ("stream", Route::Stream),
    ];
    for (name, route) in keyed {
        router.insert(format!("/{name}/:ns"), (route, Shape::KeyOnly)).expect("distinct routes");
        router.insert(format!("/{name}/:ns/:key"), (route, Shape::NsAndKey)).expect("distinct routes");
    }
    let others = [
        ("/hit/:ns/:key/shield", Route::HitShield, Shape::NsAndKey),
        ("/get/:ns/:key/shield", Route::GetShield, Shape::NsAndKey),
        ("/create", Route::Create, Shape::Unnamed),
        ("/create/", Route::CreateWithAdminKey, Shape::Unnamed),
        ("/stats", Route::Stats, Shape::Unnamed),
        ("/healthcheck", Route::Healthcheck, Shape::Unnamed),
    ];
    for (path, route, shape) in others {
        router.insert(path, (route, shape)).expect("distinct routes");
    }
    router
}

/// A matched route and its raw (percent-encoded) names.
struct Matched {
    route: Route,
    shape: Shape,
    ns: String,
    key: String,
}

fn match_path(path: &str) -> Option<Matched> {
    ROUTER.with(|router| {
        let found = router.at(path).ok()?;
        let param = |name| found.params.get(name).unwrap_or_default().to_owned();
        let (route, shape) = *found.value;
        Some(Matched { route, shape, ns: param("ns"), key: param("key") })
    })
}

/// What a handler answers: a status and JSON body (sent as JSONP when asked), or an SVG badge.
pub(crate) enum Reply {
    Json(u16, Value),
    Svg(String),
    /// Server-sent events.
    Events(JsStream),
}

impl Reply {
    fn ok(body: Value) -> Self {
        Self::Json(200, body)
    }
}

/// What a handler gets: the request, its counter (if the route names one) and its token.
pub(crate) struct Call<'a> {
    pub req: &'a Request,
    pub env: &'a Env,
    pub caller: &'a Caller<'a>,
    pub config: &'a Config,
    pub target: Option<Target>,
    /// `Authorization: Bearer <token>` or `?token=`.
    pub token: Option<String>,
    pub method: Method,
}

impl Call<'_> {
    /// The counter the route names; every keyed route resolves one before its handler runs.
    fn target(&self) -> Result<&Target, CompatError> {
        self.target.as_ref().ok_or_else(|| CompatError::new(500, "a keyed route without its key"))
    }
}

/// Serves a request on a compatible route; `None` when the path is not one of them.
pub async fn serve(req: &Request, env: &Env, caller: &Caller<'_>, config: &Config) -> Option<Response> {
    let matched = match_path(req.path())?;
    if req.method() == Some(Method::Options) {
        return Some(respond::preflight(matched.route.allow()));
    }
    let callback = params::callback(req.query());
    let mut meter = None;
    let mut x_path = None;
    let mut retry_after = None;
    let reply = match &callback {
        Err(error) => Err(error.clone()),
        Ok(_) => answer(req, env, caller, config, &matched, &mut meter, &mut x_path, &mut retry_after).await,
    };
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
        meter.add_headers(&mut response);
    }
    // Every answer here is a write's or a live count: caches must ask again.
    response.set_header("cache-control", "no-store");
    Some(response)
}

// The answer's parts that the response needs besides the reply: its meter, path and retry time.
#[allow(clippy::too_many_arguments)]
async fn answer(
    req: &Request,
    env: &Env,
    caller: &Caller<'_>,
    config: &Config,
    matched: &Matched,
    meter_slot: &mut Option<Meter>,
    x_path: &mut Option<String>,
    retry_after: &mut Option<u64>,
) -> Result<Reply, CompatError> {
    let method = req.method().unwrap_or(Method::Connect);
    let allowed = match method {
        Method::Get => matched.route.allow().starts_with("GET"),
        Method::Post => matched.route.allow().contains("POST"),
        _ => false,
    };
    if !allowed {
        return Err(CompatError::new(405, &format!("This route only accepts {}.", matched.route.allow())));
    }
    let token = bearer_token(req).or(params::token(req.query())?);
    let meter = meter_slot.insert(Meter::for_request(req, config, token.as_deref()));
    meter.charge(config, 1).map_err(|error| {
        *retry_after = error.retry_after_seconds();
        from_api(&error)
    })?;
    let target = match matched.shape {
        Shape::Unnamed => None,
        shape => {
            let ns = (shape == Shape::NsAndKey).then_some(matched.ns.as_str());
            let key = if shape == Shape::NsAndKey { &matched.key } else { &matched.ns };
            let (ns, key) = resolve_names(req, ns, key)?;
            *x_path = Some(format!("{ns}/{key}"));
            Some(Target::new(config, ns, key))
        }
    };
    placement::ensure(env, config).await.map_err(|error| from_api(&error))?;
    let call = Call { req, env, caller, config, target, token, method };
    handlers::run(matched.route, &call, x_path).await
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

/// A counter's names from raw (percent-encoded) ones, reserved words replaced from the
/// request's `Origin` and `Referer`.
pub(crate) fn resolve_names(
    req: &Request,
    ns: Option<&str>,
    key: &str,
) -> Result<(Namespace, Key), CompatError> {
    let origin = req.header(Header::Origin);
    let referer = req.header(Header::Referer);
    let page = Page { origin: origin.as_deref(), referer: referer.as_deref() };
    names::resolve(ns, key, &page).ok_or_else(CompatError::malformed_names)
}

/// An API v1 error as these routes word it.
pub(crate) fn from_api(error: &ApiError) -> CompatError {
    match error {
        ApiError::Core(core) => CompatError::from_core(core),
        other => {
            let status = match other.status() {
                status @ (400 | 401 | 403 | 404 | 409 | 429) => status,
                _ => 500,
            };
            CompatError::new(status, &other.message())
        }
    }
}
