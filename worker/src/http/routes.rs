//! Which handler serves a request: path matching with `matchit`, then the method check, so a
//! known path with the wrong method is a 405 with `Allow` rather than a 404.

use worker::{console_error, Context, Env, Method};

use crate::shared::api_error::ApiError;
use edgecount_core::edge::access::Right;
use edgecount_core::edge::rate_limit::visitors_read_cost;
use edgecount_core::http::badge::BadgeQuery;
use edgecount_core::http::query::CounterQuery;
use edgecount_core::shard::protocol::Subject;
use edgecount_core::{Namespace, OpKind, ShardId};

use crate::http::counters;
use crate::http::documents::{self, Document};
use crate::http::message::{Header, Request, Response};
use crate::http::namespaces::{self, Asked};
use crate::http::request_context::RequestContext;
use crate::http::target::{unmatched_path_error, Target};
use crate::http::{badge, batch, cache, compat, days, operations, respond, transfer};
use crate::isolate::meter::Meter;
use crate::isolate::placement;
use crate::shared::config::Config;

/// The routes of API v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Health,
    Stats,
    Metrics,
    Counter,
    CounterIncr,
    CounterDecr,
    CounterDays,
    Batch,
    Cache,
    Badge,
    Export,
    Import,
    NamespaceDays,
    NamespaceTop,
    Document(Document),
}

impl Route {
    /// The methods the route accepts, as sent in `Allow`.
    fn allow(self) -> &'static str {
        match self {
            Self::Health
            | Self::Stats
            | Self::Metrics
            | Self::Badge
            | Self::Export
            | Self::CounterDays
            | Self::NamespaceDays
            | Self::NamespaceTop
            | Self::Document(_) => "GET, OPTIONS",
            Self::Import => "POST, OPTIONS",
            Self::Counter => "GET, PUT, DELETE, OPTIONS",
            Self::CounterIncr | Self::CounterDecr | Self::Batch => "POST, OPTIONS",
            Self::Cache => "GET, PUT, DELETE, OPTIONS",
        }
    }
}

thread_local! {
    /// The routes, built once per isolate and never changed (so not in `shared::state`).
    static ROUTER: matchit::Router<Route> = build_router();
}

fn build_router() -> matchit::Router<Route> {
    let mut router = matchit::Router::new();
    let routes = [
        ("/v1/health", Route::Health),
        ("/v1/stats", Route::Stats),
        ("/metrics", Route::Metrics),
        ("/v1/counters/:ns/:key", Route::Counter),
        ("/v1/counters/:ns/:key/incr", Route::CounterIncr),
        ("/v1/counters/:ns/:key/decr", Route::CounterDecr),
        ("/v1/counters/:ns/:key/days", Route::CounterDays),
        ("/v1/batch", Route::Batch),
        ("/v1/cache/:ns/:key", Route::Cache),
        ("/v1/badge/:ns/:key", Route::Badge),
        ("/v1/export", Route::Export),
        ("/v1/import", Route::Import),
        ("/v1/namespaces/:ns/days", Route::NamespaceDays),
        ("/v1/namespaces/:ns/top", Route::NamespaceTop),
        ("/dashboard", Route::Document(Document::Dashboard)),
        ("/dashboard.js", Route::Document(Document::DashboardScript)),
        ("/", Route::Document(Document::DemoPage)),
        ("/demo.js", Route::Document(Document::DemoScript)),
        ("/v1/client.js", Route::Document(Document::Client)),
        ("/v1/client.d.ts", Route::Document(Document::ClientTypes)),
        ("/v1/count.js", Route::Document(Document::CountScript)),
        ("/v1/openapi.json", Route::Document(Document::OpenApi)),
    ];
    for (path, route) in routes {
        router.insert(path, route).expect("route patterns are distinct");
    }
    router
}

/// A matched route and its raw (still percent-encoded) path parameters.
struct Matched {
    route: Route,
    ns: String,
    key: String,
}

fn match_path(path: &str) -> Option<Matched> {
    ROUTER.with(|router| {
        let found = router.at(path).ok()?;
        let param = |name| found.params.get(name).unwrap_or_default().to_owned();
        Some(Matched { route: *found.value, ns: param("ns"), key: param("key") })
    })
}

/// Serves one request; every failure becomes a JSON error and every response gets CORS headers.
pub async fn handle(req: Request, env: Env, ctx: Context) -> Response {
    let origin = req.header(Header::Origin);
    // Every answer here (refusals and errors too) may hold or stand in for stored bytes.
    let serves_stored_bytes = req.path().starts_with("/v1/cache/");
    let config = match Config::for_isolate(&env) {
        Ok(config) => config,
        Err(error) => return error_response(&error),
    };
    let cx = RequestContext::new(&env, &config, &ctx);
    let mut response = match dispatch(req, &cx).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    respond::add_cors(&mut response, &config, origin.as_deref());
    if serves_stored_bytes {
        respond::sandbox(&mut response);
    }
    response
}

async fn dispatch(req: Request, cx: &RequestContext<'_>) -> Result<Response, ApiError> {
    let Some(matched) = match_path(req.path()) else {
        if let Some(response) = compat::serve(&req, cx).await {
            return Ok(response);
        }
        return Err(unmatched_path_error(req.path()).unwrap_or(ApiError::RouteNotFound));
    };
    match dispatch_matched(req, cx, &matched).await {
        Ok(response) => Ok(response),
        Err(error) => Ok(refusal(cx.config, &matched, &error)),
    }
}

/// The answer to a refusal made before the key was resolved (405): on a key's route it still
/// names the key's shard, as every other answer there does.
fn refusal(config: &Config, matched: &Matched, error: &ApiError) -> Response {
    let mut response = error_response(error);
    if let Some(Ok(target)) = resolve_target(config, matched) {
        name_shard(&mut response, target.shard);
    }
    response
}

/// The key a counter, cache or badge route names, validated: the one place a request's names
/// are checked. `None` for routes without a key.
fn resolve_target(config: &Config, matched: &Matched) -> Option<Result<Target, ApiError>> {
    let key = match matched.route {
        Route::Counter | Route::CounterIncr | Route::CounterDecr | Route::CounterDays | Route::Cache => {
            matched.key.as_str()
        }
        Route::Badge => match matched.key.strip_suffix(".svg") {
            Some(key) => key,
            None => return Some(Err(ApiError::RouteNotFound)),
        },
        _ => return None,
    };
    Some(Target::from_path(config, &matched.ns, key))
}

/// Every answer on a key's route, errors included, names the shard that owns the key.
fn name_shard(response: &mut Response, shard: ShardId) {
    response.set_header("x-edgecount-shard", shard.to_string());
}

async fn dispatch_matched(
    req: Request,
    cx: &RequestContext<'_>,
    matched: &Matched,
) -> Result<Response, ApiError> {
    let config = cx.config;
    let method = req.method().ok_or(ApiError::MethodNotAllowed { allow: matched.route.allow() })?;
    if method == Method::Options {
        return Ok(respond::preflight(matched.route.allow()));
    }
    let action = match (matched.route, method) {
        // Health is free, like the documents: monitors poll it, and it does no work.
        (Route::Health, Method::Get) => return operations::health(config),
        (Route::Stats, Method::Get) => Action::Stats,
        (Route::Metrics, Method::Get) => Action::Metrics,
        (Route::Batch, Method::Post) => Action::Batch,
        (Route::Badge, Method::Get) => Action::Badge,
        (Route::Export, Method::Get) => Action::Export,
        (Route::Import, Method::Post) => Action::Import,
        (Route::NamespaceDays, Method::Get) => Action::Namespace(Asked::Days),
        (Route::NamespaceTop, Method::Get) => Action::Namespace(Asked::Top),
        (Route::Document(Document::DemoPage | Document::DemoScript), Method::Get) if !config.demo => {
            return Err(ApiError::RouteNotFound)
        }
        (Route::Document(document), Method::Get) => return Ok(documents::serve(&req, document)),
        (Route::Cache, Method::Get) => Action::Op(OpKind::CacheGet),
        (Route::Cache, Method::Put) => Action::Op(OpKind::CachePut),
        (Route::Cache, Method::Delete) => Action::Op(OpKind::CacheDelete),
        (Route::Counter, Method::Get) => Action::Op(OpKind::Get),
        (Route::Counter, Method::Put) => Action::Op(OpKind::Set),
        (Route::Counter, Method::Delete) => Action::Op(OpKind::Delete),
        (Route::CounterIncr, Method::Post) => Action::Op(OpKind::Incr),
        (Route::CounterDecr, Method::Post) => Action::Op(OpKind::Decr),
        (Route::CounterDays, Method::Get) => Action::Op(OpKind::Days),
        _ => return Err(ApiError::MethodNotAllowed { allow: matched.route.allow() }),
    };
    // A counter route's query, read once: the charge, the right and the handler take it from
    // here (a bad one is the handler's 400, once the right is checked).
    let counter_query = match action {
        Action::Op(kind) if kind.spec().subject == Subject::Counter => Some(CounterQuery::parse(req.query())),
        Action::Stats
        | Action::Metrics
        | Action::Batch
        | Action::Badge
        | Action::Export
        | Action::Import
        | Action::Namespace(_)
        | Action::Op(_) => None,
    };
    let parsed = counter_query.as_ref().and_then(|query| query.as_ref().ok());
    let token = req.bearer_token();
    let mut meter =
        Meter::for_request(req.header(Header::ClientAddress).as_deref(), config, token.as_deref());
    let target = resolve_target(config, matched).transpose();
    let shard = target.as_ref().ok().and_then(|t| t.as_ref().map(|t| t.shard));
    let whole_namespace = match action {
        Action::Namespace(_) => Some(Namespace::new(&matched.ns)),
        _ => None,
    }
    .transpose();
    // Checked in this order whatever the route: the charge (before the token is checked, so a
    // refused authentication costs the address like any request, and guessing tokens runs into
    // 429), the names, then the token's right.
    let (unique, counting_badge) = match action {
        Action::Op(OpKind::Days) => (parsed.is_some_and(|q| q.unique), false),
        Action::Badge => BadgeQuery::parse(req.query()).map_or((false, false), |q| (q.unique, q.incr)),
        _ => (false, false),
    };
    let visitor_days = days::visitor_days(req.query(), unique, config);
    // A read of visitors pays for its days on arrival too (a bad query is refused by its
    // handler, and pays one). A counting badge past that bucket still counts its view, and
    // shows no visitors (see `badge::serve`): refused, the view would be lost.
    let mut visitors_allowed = true;
    let charged = meter.charge(config, 1).and_then(|()| match visitor_days {
        Some(days) => match meter.charge_visitors(config, visitors_read_cost(days)) {
            Err(ApiError::RateLimited(_)) if counting_badge => {
                visitors_allowed = false;
                Ok(())
            }
            charged => charged,
        },
        None => Ok(()),
    });
    let admitted = charged.and(target).and_then(|target| {
        let whole_namespace = whole_namespace.map_err(ApiError::from)?;
        let ns = target.as_ref().map(|t| &t.ns).or(whole_namespace.as_ref());
        authorize(config, action, ns, token.as_deref(), parsed)?;
        Ok((target, whole_namespace))
    });
    let outcome = match admitted {
        Ok((target, whole_namespace)) => match placement::ensure(cx.env, config).await {
            Ok(()) => {
                let charged = Charged { meter: &mut meter, visitors_allowed };
                let named = Named { target: target.as_ref(), whole_namespace: whole_namespace.as_ref() };
                serve(action, req, cx, named, token.as_deref(), charged, counter_query).await
            }
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    let mut response = match outcome {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    if let Some(shard) = shard {
        name_shard(&mut response, shard);
    }
    for (name, value) in meter.headers() {
        response.set_header(name, value);
    }
    Ok(response)
}

/// What a request's path names: a key (with its shard), or a whole namespace.
struct Named<'n> {
    target: Option<&'n Target>,
    whole_namespace: Option<&'n Namespace>,
}

/// What a request paid on arrival: its meter, charged again by a batch, and whether a read of
/// many days' visitors fitted its bucket.
struct Charged<'m> {
    meter: &'m mut Meter,
    visitors_allowed: bool,
}

async fn serve(
    action: Action,
    req: Request,
    cx: &RequestContext<'_>,
    named: Named<'_>,
    token: Option<&str>,
    charged: Charged<'_>,
    counter_query: Option<Result<CounterQuery, edgecount_core::CoreError>>,
) -> Result<Response, ApiError> {
    let Charged { meter, visitors_allowed } = charged;
    let Named { target, whole_namespace } = named;
    let (env, config) = (cx.env, cx.config);
    // The key routes always resolve a target; the others never use one.
    let keyed = || target.ok_or_else(|| ApiError::Internal("a key route without its key".into()));
    match action {
        Action::Stats => operations::stats(env, config).await,
        Action::Metrics => operations::metrics(env, config).await,
        Action::Batch => batch::serve(req, cx, token, meter).await,
        Action::Badge => badge::serve(&req, cx, token, keyed()?, visitors_allowed).await,
        Action::Export => transfer::export(&req, env, config).await,
        Action::Import => transfer::import(&req, env, config).await,
        Action::Namespace(asked) => {
            let ns = whole_namespace
                .ok_or_else(|| ApiError::Internal("a namespace route without its name".into()))?;
            namespaces::serve(&req, cx, ns, asked, meter).await
        }
        Action::Op(kind) => match kind.spec().subject {
            Subject::CacheEntry => cache::serve(kind, &req, env, config, keyed()?).await,
            Subject::Counter => {
                let query = counter_query.unwrap_or_else(|| CounterQuery::parse(req.query()));
                counters::serve(kind, req, cx, keyed()?, token, query).await
            }
        },
    }
}

/// What a request asks for, once its route and method are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Stats,
    Metrics,
    Batch,
    Badge,
    Export,
    Import,
    /// A read of the whole namespace the path names.
    Namespace(Asked),
    /// One op on the key the path names.
    Op(OpKind),
}

/// Checks the right the action needs; batches check each op's own right instead.
fn authorize(
    config: &Config,
    action: Action,
    ns: Option<&Namespace>,
    token: Option<&str>,
    query: Option<&CounterQuery>,
) -> Result<(), ApiError> {
    let need = match action {
        // Batches check each op's right, badges the right their query needs.
        Action::Batch | Action::Badge => return Ok(()),
        // A namespace read names keys nobody asked for by name.
        Action::Namespace(_) => {
            let ns = ns.ok_or_else(|| ApiError::Internal("a namespace route without its name".into()))?;
            return Ok(config.access.check_listing(token, ns)?);
        }
        Action::Stats | Action::Metrics | Action::Export | Action::Import => Right::Admin,
        // A bad query is the handler's 400 to answer, once the count right is checked.
        Action::Op(OpKind::Incr) => {
            query.map_or(Right::Count, |q| Right::for_increment(q.by.unwrap_or(1), q.ttl))
        }
        Action::Op(kind) if kind.spec().writes => Right::Write,
        Action::Op(_) => Right::Read,
    };
    Ok(config.access.check(token, need, ns)?)
}

fn error_response(error: &ApiError) -> Response {
    match error {
        ApiError::Internal(detail) => console_error!("internal error: {detail}"),
        ApiError::Core(edgecount_core::CoreError::StorageUnavailable { detail }) => {
            console_error!("storage error: {detail}");
        }
        _ => {}
    }
    respond::error(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_paths_match_with_raw_params() {
        let m = match_path("/v1/counters/pages/a%2Fb").unwrap();
        assert_eq!((m.route, m.ns.as_str(), m.key.as_str()), (Route::Counter, "pages", "a%2Fb"));
        assert_eq!(match_path("/v1/counters/pages/incr").unwrap().route, Route::Counter);
        assert_eq!(match_path("/v1/counters/pages/k/incr").unwrap().route, Route::CounterIncr);
    }

    #[test]
    fn unknown_paths_do_not_match() {
        for path in ["/index.html", "/v1", "/v1/counters/pages", "/v1/counters/pages/k/incr/x", "/v2/health"]
        {
            assert!(match_path(path).is_none(), "{path}");
        }
    }
}
