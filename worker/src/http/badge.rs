//! `GET /v1/badge/:ns/:key.svg`: a counter as an SVG badge for READMEs and `<img>` tags,
//! optionally counting the view first (`?incr=1`, with `unique=1` its visitor too), showing the
//! total or a period's count (`?period=today|7d|30d|total`), or its visitors (`?unique=1`), in
//! one of four styles (`?style=`), abbreviated if asked (`?abbreviated=1`).
//!
//! A plain badge is a read: it follows the max-age policy of counter reads (and answers
//! `If-None-Match` with 304), so a popular badge is served from the edge. A counting badge is a
//! write and is never cached, or image proxies would swallow the views.

use edgecount_core::edge::access::Right;
use edgecount_core::http::badge::BadgeQuery;
use edgecount_core::http::badge_svg;
use edgecount_core::http::query::parse_period;
use edgecount_core::visits::day::Period;
use edgecount_core::{OpKind, OpResult, ShardCall, ShardOp};

use crate::http::message::{Body, Header, Request, Response};
use crate::http::request_context::RequestContext;
use crate::http::target::Target;
use crate::http::{counters, days};
use crate::isolate::visitors;
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;

const SVG: &str = "image/svg+xml; charset=utf-8";

/// Serves the badge of `target`, whose names the router validated (`.svg` taken off the key).
///
/// # Errors
/// A bad query (400); 401/403 when the token may not read, or may not write for `incr=1`;
/// unavailable shards.
pub async fn serve(
    req: &Request,
    cx: &RequestContext<'_>,
    token: Option<&str>,
    target: &Target,
    visitors_allowed: bool,
) -> Result<Response, ApiError> {
    let config = cx.config;
    let query = BadgeQuery::parse(req.query())?;
    let period = parse_period(req.query(), config.days_kept)?;
    let by_days = period != Period::Total || query.unique;
    // Checked on reads too, where it is unused: a malformed header is refused, never ignored.
    let idempotency_key = counters::idempotency_key(req)?;
    // A counting badge adds 1: a count.
    let need = if query.incr { Right::Count } else { Right::Read };
    config.access.check(token, need, Some(&target.ns))?;
    let counts = query.incr
        && !visitors::leaves_uncounted(req.header(Header::UserAgent).as_deref(), config, token, &target.ns);
    let mut value = None;
    if counts {
        let op = ShardOp::Incr { ns: target.ns.clone(), key: target.key.clone(), by: 1, ttl: None };
        let visit = Some(days::visit_of(req, config, target, OpKind::Incr, query.unique));
        let call = ShardCall { op, idempotency_key, operator: false, visit, count_visitor: false };
        value = match counters::apply_write(cx, target, call).await?.0 {
            OpResult::Value { value, .. } => Some(value),
            OpResult::Failed { error } => return Err(error.into()),
            _ => return Err(ApiError::ShardUnavailable),
        };
    }
    if query.unique && !visitors_allowed {
        // Past the client's bucket for reads of many days' visitors (`Meter::charge_visitors`),
        // which only a counting badge gets this far with: its view is counted, and the badge
        // says its visitors were not read rather than lose the view.
        let text = badge_svg::render(&query.label, "rate limited", &query.look("#fff"));
        let mut response = Response::with_body(200, SVG, Body::Text(text));
        response.set_header("cache-control", "no-store");
        return Ok(response);
    }
    if by_days {
        // Days are read from the shard each time, as on the counter route.
        let value = shown(&days::tally(cx, target, period, query.unique).await?, query.unique);
        let mut response = svg(&query, value);
        response.set_header("cache-control", "no-store");
        return Ok(response);
    }
    if let Some(value) = value {
        let mut response = svg(&query, value);
        response.set_header("cache-control", "no-store");
        return Ok(response);
    }
    let now = now_ms();
    let current = counters::current(req, cx, target, false, now).await?;
    let mut response =
        if current.not_modified(req) { Response::empty(304) } else { svg(&query, current.read.value) };
    current.set_cache_headers(&mut response, config, &target.ns);
    Ok(response)
}

/// What a badge of days shows: the period's count, or its unique visitors.
fn shown(tally: &days::Tally, unique: bool) -> i64 {
    if unique {
        i64::try_from(tally.uniques).unwrap_or(i64::MAX)
    } else {
        tally.count
    }
}

fn svg(query: &BadgeQuery, value: i64) -> Response {
    let text = badge_svg::render(&query.label, &query.shown(value), &query.look("#fff"));
    Response::with_body(200, SVG, Body::Text(text))
}
