//! Reads of a whole namespace: `GET /v1/namespaces/:ns/days` (its keys' counts by day) and
//! `GET /v1/namespaces/:ns/top` (its top keys of the period), both answered from one read of
//! every shard's part (see `edgecount_core::visits::namespace`), kept
//! [`KEPT_MS`](edgecount_core::visits::namespace::KEPT_MS) in this isolate.
//!
//! A read that asks the shards is charged to the client's bucket for heavy reads (the one
//! visitor reads use, `Meter::charge_visitors`): one request a shard it asks, at most
//! [`MOST_CHARGED`]. One answered from the kept read costs what any request does.

use edgecount_core::http::negotiate::prefers_text_plain;
use edgecount_core::visits::day::{Day, Period};
use edgecount_core::visits::namespace::{self, merge, NamespacePeriod, NamespaceReads, ShardPart, MAX_TOP};
use edgecount_core::{Namespace, ShardId};
use futures_util::future::join_all;
use serde::Serialize;

use crate::http::days::{period_days, period_name, DayBody};
use crate::http::message::{Header, Request, Response};
use crate::http::request_context::RequestContext;
use crate::http::respond;
use crate::isolate::meter::Meter;
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::shard_client;
use crate::shared::state;

/// The most a read that asks the shards is charged to the heavy-read bucket, below its default
/// burst (20), so that one read always fits; at least 2, since a charge of 1 is the arrival's.
const MOST_CHARGED: usize = 16;

/// Which answer a namespace read gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The period's count and each of its days.
    Days,
    /// The period's top keys.
    Top,
}

#[derive(Serialize)]
struct KeyBody<'a> {
    key: &'a str,
    count: i64,
}

/// What both answers carry, and the one each adds.
#[derive(Serialize)]
struct NamespaceBody<'a> {
    ns: &'a str,
    period: String,
    from: String,
    to: String,
    time_zone: &'a str,
    count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    days: Option<Vec<DayBody>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<Vec<KeyBody<'a>>>,
}

/// Answers the read of `ns` that `asked` names, with the query's period and number of keys;
/// `text/plain` asks for the period's count alone.
///
/// # Errors
/// A bad query (400), a period before the days kept, a change of the shard count under way, an
/// unavailable shard, or the heavy-read bucket empty (429).
pub async fn serve(
    req: &Request,
    cx: &RequestContext<'_>,
    ns: &Namespace,
    asked: Asked,
    meter: &mut Meter,
) -> Result<Response, ApiError> {
    let (period, top) = namespace::parse_query(req.query(), cx.config.days_kept)?;
    let days = period_days(cx.config, ns, period)?;
    let (read, kept) = read(cx, ns, days, meter).await?;
    let mut response = if prefers_text_plain(req.header(Header::Accept).as_deref()) {
        respond::text(200, read.count.to_string())
    } else {
        respond::json(200, &body(cx, ns, (period, days), &read, asked, top as usize))?
    };
    response.set_header("cache-control", "no-store");
    response.set_header("vary", "Accept");
    // What this answer cost the shards (nothing, when it was the read kept here).
    let rows_read = if kept { 0 } else { read.rows_read };
    response.set_header("x-edgecount-rows-read", rows_read.to_string());
    response.set_header("x-edgecount-kept", if kept { "true" } else { "false" });
    Ok(response)
}

fn body<'a>(
    cx: &'a RequestContext<'_>,
    ns: &'a Namespace,
    (period, (from, to)): (Period, (Day, Day)),
    read: &'a NamespacePeriod,
    asked: Asked,
    top: usize,
) -> NamespaceBody<'a> {
    let days = (asked == Asked::Days).then(|| {
        read.days.iter().map(|d| DayBody { date: d.day.date(), count: d.count, uniques: None }).collect()
    });
    let keys = (asked == Asked::Top).then(|| {
        read.top.iter().take(top).map(|k| KeyBody { key: k.key.as_str(), count: k.count }).collect()
    });
    NamespaceBody {
        ns: ns.as_str(),
        period: period_name(period),
        from: from.date(),
        to: to.date(),
        time_zone: cx.config.zones.of(ns).name(),
        count: read.count,
        days,
        keys,
    }
}

/// The read of `ns` over `days`: the one kept if it is recent, else every shard's part, merged
/// and kept. Answers whether it was the kept one.
async fn read(
    cx: &RequestContext<'_>,
    ns: &Namespace,
    days: (Day, Day),
    meter: &mut Meter,
) -> Result<(NamespacePeriod, bool), ApiError> {
    let kept = with_kept_reads(|reads| reads.get(ns, days, now_ms()));
    if let Some(read) = kept {
        return Ok((read, true));
    }
    let shards = cx.config.shards;
    meter.charge_visitors(cx.config, (shards as usize).clamp(2, MOST_CHARGED))?;
    let asks = (0..shards).map(|i| shard_client::namespace_part(cx.env, ShardId(i), ns, days, MAX_TOP));
    let parts: Vec<ShardPart> = join_all(asks).await.into_iter().collect::<Result<_, _>>()?;
    let read = merge(parts, days, MAX_TOP as usize);
    with_kept_reads(|reads| reads.put(ns, days, read.clone(), now_ms()));
    Ok((read, false))
}

/// Runs `f` on this isolate's kept namespace reads, made at their first use.
fn with_kept_reads<T>(f: impl FnOnce(&mut NamespaceReads) -> T) -> T {
    state::with(|s| f(s.namespace_reads.borrow_mut().get_or_insert_with(NamespaceReads::default)))
}
