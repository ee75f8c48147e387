//! What the compatible routes share: the route table, what a handler gets ([`Call`]) and
//! answers ([`Reply`]), and how names and API v1 errors are read here. The entry point
//! ([`super::serve`]) and the handlers ([`super::handlers`]) both build on it.

use edgecount_core::compat::names::{self, Page};
use edgecount_core::compat::CompatError;
use edgecount_core::{Key, Namespace};
use serde_json::Value;
use worker::Method;

use crate::http::message::{Header, JsStream, Request};
use crate::http::request_context::RequestContext;
use crate::http::target::Target;
use crate::shared::api_error::ApiError;

/// The compatible routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
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
    pub(super) fn allow(self) -> &'static str {
        match self {
            Self::Set | Self::Update | Self::CreateWithAdminKey => "GET, POST, OPTIONS",
            Self::Reset | Self::Delete => "POST, OPTIONS",
            _ => "GET, OPTIONS",
        }
    }
}

thread_local! {
    /// The routes, built once per isolate and never changed (so not in `shared::state`).
    static ROUTER: matchit::Router<(Route, Shape)> = build_router();
}

/// How a path names its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
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
pub(super) struct Matched {
    pub route: Route,
    pub shape: Shape,
    pub ns: String,
    pub key: String,
}

pub(super) fn match_path(path: &str) -> Option<Matched> {
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
    pub(super) fn ok(body: Value) -> Self {
        Self::Json(200, body)
    }
}

/// What a handler gets: the request, its counter (if the route names one) and its token.
pub(crate) struct Call<'a> {
    pub req: &'a Request,
    pub cx: &'a RequestContext<'a>,
    pub target: Option<Target>,
    /// `Authorization: Bearer <token>` or `?token=`.
    pub token: Option<String>,
    pub method: Method,
}

impl Call<'_> {
    /// The counter the route names; every keyed route resolves one before its handler runs.
    pub(super) fn target(&self) -> Result<&Target, CompatError> {
        self.target.as_ref().ok_or_else(|| CompatError::new(500, "a keyed route without its key"))
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
