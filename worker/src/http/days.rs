//! Days and unique visitors on the counter routes (see `edgecount_core::visits`).
//!
//! Every increment and decrement carries the day it lands in, in its namespace's zone, and with
//! `?unique=1` an increment carries its visitor's hash ([`visit_of`]).
//! `GET /v1/counters/:ns/:key/days?period=` (or `?from=&to=`, and `&unique=1`) asks the key's
//! shard for its days ([`read`]).

use edgecount_core::http::negotiate::prefers_text_plain;
use edgecount_core::http::query::parse_period;
use edgecount_core::shard::protocol::{DaysAnswer, Visit};
use edgecount_core::visits::day::{Day, Period};
use edgecount_core::visits::visitor::visitor_hash;
use edgecount_core::{CoreError, Key, Namespace, OpKind, OpResult, ShardCall, ShardOp};
use serde::Serialize;

use crate::http::message::{Header, Request, Response};
use crate::http::request_context::RequestContext;
use crate::http::respond;
use crate::http::target::Target;
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::shard_client;

/// The day a count of `kind` on `target` lands in now, and with `unique` (increments only) the
/// hash of its visitor: the client's address and user agent, never sent on or kept as they are.
pub fn visit_of(req: &Request, config: &Config, target: &Target, kind: OpKind, unique: bool) -> Visit {
    visit_on(req, config, (&target.ns, &target.key), unique && kind == OpKind::Incr)
}

fn visit_on(req: &Request, config: &Config, (ns, key): (&Namespace, &Key), with_visitor: bool) -> Visit {
    let day = config.zones.of(ns).day_at(now_ms());
    let visitors = if with_visitor {
        let address = req.header(Header::ClientAddress).unwrap_or_default();
        let agent = req.header(Header::UserAgent).unwrap_or_default();
        vec![visitor_hash(ns, key, &address, &agent)]
    } else {
        Vec::new()
    };
    Visit { day, visitors }
}

/// A batch's `call` with its day, when it is an increment or decrement, and its visitor when
/// it asked for `unique`.
pub fn with_day(call: ShardCall, req: &Request, config: &Config) -> ShardCall {
    let counts = matches!(call.op, ShardOp::Incr { .. } | ShardOp::Decr { .. });
    let visit = counts.then(|| visit_on(req, config, call.op.target(), call.count_visitor));
    ShardCall { visit: visit.or(call.visit), ..call }
}

/// The days whose visitors a request with `query` reads (`unique=1` on `/days` or a badge),
/// for its charge (`Meter::charge_visitors`): the total reads the days kept. `None` when it
/// reads none, or when the handler will refuse the query.
pub fn visitor_days(query: &str, unique: bool, config: &Config) -> Option<u32> {
    if !unique {
        return None;
    }
    let period = parse_period(query, config.days_kept).ok()?;
    let (from, to) = period.days(Day(0)).unwrap_or((Day(1 - config.days_kept), Day(0)));
    u32::try_from(to.0.saturating_sub(from.0).saturating_add(1)).ok()
}

/// One day of a read's series (a key's, or a namespace's: `http::namespaces`).
#[derive(Serialize)]
pub struct DayBody {
    pub date: String,
    pub count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uniques: Option<u64>,
}

/// A read of days: the total, the period's count and unique visitors, and each of its days.
#[derive(Serialize)]
struct DaysBody<'a> {
    ns: &'a str,
    key: &'a str,
    value: i64,
    exists: bool,
    period: String,
    from: String,
    to: String,
    time_zone: &'a str,
    count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    uniques: Option<u64>,
    days: Vec<DayBody>,
}

/// A counter's days as a read asked them.
pub struct Tally {
    pub answer: DaysAnswer,
    pub from: Day,
    pub to: Day,
    /// The period's count: the total for [`Period::Total`].
    pub count: i64,
    /// The period's unique visitors, 0 when not asked.
    pub uniques: u64,
}

/// Asks `target`'s shard for its counts in `period` (the days kept, for the total with
/// `unique`), and with `unique` its visitors.
///
/// # Errors
/// A refused op or an unavailable shard.
pub async fn tally(
    cx: &RequestContext<'_>,
    target: &Target,
    period: Period,
    unique: bool,
) -> Result<Tally, ApiError> {
    let (from, to) = period_days(cx.config, &target.ns, period)?;
    let op = ShardOp::Days { ns: target.ns.clone(), key: target.key.clone(), from, to, unique };
    // Straight to the shard, in a call of its own: days are never kept in this isolate, so a
    // read of them cannot keep an older answer over a write's, which is what queueing a
    // counter's read behind this isolate's writes is for (see `counters::current`).
    let answer = match shard_client::execute_one(cx.env, target.shard, op.into()).await? {
        OpResult::Days(answer) => *answer,
        OpResult::Failed { error } => return Err(error.into()),
        _ => return Err(ApiError::ShardUnavailable),
    };
    // Days saturate at the 64-bit bounds (see `edgecount_core::shard::counter`): so does their sum.
    let count = if period == Period::Total {
        answer.value
    } else {
        answer.days.iter().fold(0_i64, |sum, d| sum.saturating_add(d.count))
    };
    let uniques = answer.uniques.unwrap_or(0);
    Ok(Tally { answer, from, to, count, uniques })
}

/// The days `period` spans in `ns`'s zone today (the days kept, for the total).
///
/// # Errors
/// `invalid_parameter` for a period that starts before the oldest day kept.
pub fn period_days(config: &Config, ns: &Namespace, period: Period) -> Result<(Day, Day), ApiError> {
    let today = config.zones.of(ns).day_at(now_ms());
    let oldest_kept = today.before(config.days_kept - 1);
    let (from, to) = period.days(today).unwrap_or((oldest_kept, today));
    if from < oldest_kept {
        // A day past the days kept is gone once its counter is written again, and stays while it
        // is not: refused, so that what a read answers does not hang on when the key was last
        // written.
        return Err(CoreError::InvalidParameter {
            name: "period".to_owned(),
            expected: format!(
                "within the days kept: the oldest is {} (EDGECOUNT_DAYS is {})",
                oldest_kept.date(),
                config.days_kept
            ),
        }
        .into());
    }
    Ok((from, to))
}

/// Answers `target`'s counts in `period`, each day of it listed, zeros included (none for the
/// total); `text/plain` asks for the period's count alone, or its visitors with `unique`.
///
/// # Errors
/// A refused op or an unavailable shard.
pub async fn read(
    req: &Request,
    cx: &RequestContext<'_>,
    target: &Target,
    period: Period,
    unique: bool,
) -> Result<Response, ApiError> {
    let Tally { answer, from, to, count, uniques } = tally(cx, target, period, unique).await?;
    let mut response = if prefers_text_plain(req.header(Header::Accept).as_deref()) {
        respond::text(200, if unique { uniques.to_string() } else { count.to_string() })
    } else {
        respond::json(
            200,
            &DaysBody {
                ns: target.ns.as_str(),
                key: target.key.as_str(),
                value: answer.value,
                exists: answer.exists,
                period: period_name(period),
                from: from.date(),
                to: to.date(),
                time_zone: cx.config.zones.of(&target.ns).name(),
                count,
                uniques: answer.uniques,
                days: if period == Period::Total { Vec::new() } else { series(&answer, from, to, unique) },
            },
        )?
    };
    response.set_header("cache-control", "no-store");
    response.set_header("vary", "Accept");
    Ok(response)
}

/// Every day from `from` to `to`, with the answer's counts where it had any.
fn series(answer: &DaysAnswer, from: Day, to: Day, unique: bool) -> Vec<DayBody> {
    (from.0..=to.0)
        .map(|day| {
            let found = answer.days.iter().find(|d| d.day.0 == day);
            DayBody {
                date: Day(day).date(),
                count: found.map_or(0, |d| d.count),
                uniques: unique.then(|| found.and_then(|d| d.uniques).unwrap_or(0)),
            }
        })
        .collect()
}

pub fn period_name(period: Period) -> String {
    match period {
        Period::Total => "total".to_owned(),
        Period::Today => "today".to_owned(),
        Period::Yesterday => "yesterday".to_owned(),
        Period::Last(n) => format!("{n}d"),
        Period::Series { .. } => "series".to_owned(),
    }
}
