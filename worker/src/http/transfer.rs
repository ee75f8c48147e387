//! `GET /v1/export` and `POST /v1/import` (admin): a deployment's counters and cache entries
//! out as NDJSON, and back in (see [`edgecount_core::shard::transfer`] for the lines).
//!
//! An export answers one page: the shards are read in order, each in name order, until
//! [`MAX_EXPORT_LINES`] lines or [`MAX_EXPORT_SHARD_CALLS`] shard calls, and the page ends with
//! `{"next": cursor}` to ask for the next (`null` at the end), so a broken download resumes
//! where it broke. An import answers each line in order, `{"line": n, "ok": true}` or with its
//! error, so a bad line never stops the others. Both wait while the shard count changes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use edgecount_core::shard::migration::Parcel;
use edgecount_core::shard::transfer::{
    parse_import_line, ExportCursor, ExportQuery, ImportLine, MAX_EXPORT_LINES, MAX_EXPORT_VALUE_BYTES,
    MAX_IMPORT_BYTES, MAX_IMPORT_LINES,
};
use edgecount_core::{shard_for, CoreError, ShardId};
use serde_json::json;
use worker::Env;

use crate::http::message::{Body, Request, Response};
use crate::http::respond;
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::shard_client;

/// Shard calls one export page makes at most: the default count's worth (so a small export is
/// one page), and a bound on a page's time however many shards there are.
pub const MAX_EXPORT_SHARD_CALLS: usize = 16;
const NDJSON: &str = "application/x-ndjson; charset=utf-8";

/// One page of the export.
///
/// # Errors
/// A bad query (400), a change of shard count under way (409), a shard that does not answer
/// (503).
pub async fn export(req: &Request, env: &Env, config: &Config) -> Result<Response, ApiError> {
    let query = ExportQuery::parse(req.query())?;
    if config.migration().is_some() {
        return Err(ApiError::ChangeUnderWay);
    }
    let mut cursor = Some(query.cursor.unwrap_or_else(|| ExportCursor::start(config.shards)));
    if cursor.as_ref().is_some_and(|c| c.shards != config.shards) {
        // Names are placed by the count: resumed under another, some would be missed.
        return Err(ApiError::ChangeUnderWay);
    }
    let mut text = String::new();
    let (mut lines, mut bytes, mut calls) = (0_u64, 0_usize, 0);
    while let Some(at) = cursor.take() {
        if lines >= MAX_EXPORT_LINES || bytes >= MAX_EXPORT_VALUE_BYTES || calls >= MAX_EXPORT_SHARD_CALLS {
            cursor = Some(at);
            break;
        }
        let ns = query.ns.as_ref().map(|ns| ns.as_str());
        // What is left of the page's bounds: a shard fills at most that.
        let left = ((MAX_EXPORT_LINES - lines) as u32, (MAX_EXPORT_VALUE_BYTES - bytes) as u32);
        let page = shard_client::export_page(env, at.shard, at.after.as_ref(), ns, left).await?;
        calls += 1;
        for parcel in &page.parcels {
            let line = serde_json::to_string(parcel).map_err(|e| ApiError::Internal(e.to_string()))?;
            bytes += line.len();
            let _ = writeln!(text, "{line}");
            lines += 1;
        }
        cursor = match page.resume_after {
            Some(after) => Some(ExportCursor { after: Some(after), ..at }),
            None if at.shard.0 + 1 < at.shards => {
                Some(ExportCursor { shard: ShardId(at.shard.0 + 1), after: None, ..at })
            }
            None => None,
        };
    }
    let _ = writeln!(text, "{}", json!({ "next": cursor.map(|c| c.encode()) }));
    Ok(Response::with_body(200, NDJSON, Body::Text(text)))
}

/// Stores each good line of an NDJSON body, and answers every line.
///
/// # Errors
/// A body over [`MAX_IMPORT_BYTES`] or [`MAX_IMPORT_LINES`] (413), not UTF-8 (400), a change of
/// shard count under way (409). A shard that does not answer fails only its own lines.
pub async fn import(req: &Request, env: &Env, config: &Config) -> Result<Response, ApiError> {
    if config.migration().is_some() {
        return Err(ApiError::ChangeUnderWay);
    }
    let bytes = respond::read_bounded_body(req, MAX_IMPORT_BYTES).await?;
    let body = String::from_utf8(bytes)
        .map_err(|_| CoreError::InvalidBody { reason: "is not valid UTF-8".into() })?;
    let lines: Vec<&str> = body.lines().collect();
    if lines.len() > MAX_IMPORT_LINES {
        return Err(CoreError::TooManyOps { max: MAX_IMPORT_LINES }.into());
    }
    let now = now_ms();
    // Each line's outcome, in order; the stored ones wait for their shard's answer.
    let mut outcomes: Vec<Option<Result<(), ApiError>>> = Vec::with_capacity(lines.len());
    let mut by_shard: BTreeMap<u32, (Vec<usize>, Vec<Parcel>)> = BTreeMap::new();
    for (place, line) in lines.iter().enumerate() {
        match parse_import_line(line, now) {
            Ok(ImportLine::Skip) => outcomes.push(None),
            Ok(ImportLine::Store(parcel)) => {
                let shard = shard_for(&parcel.ns, &parcel.key, config.shards);
                let (places, parcels) = by_shard.entry(shard.0).or_default();
                places.push(place);
                parcels.push(*parcel);
                outcomes.push(Some(Ok(())));
            }
            Err(error) => outcomes.push(Some(Err(error.into()))),
        }
    }
    // In an open service nobody is an operator: a counter's owner key still binds an import.
    let respect_owners = config.access.is_open();
    for (shard, (places, parcels)) in by_shard {
        match shard_client::import(env, ShardId(shard), &parcels, respect_owners, config.shard_cache.bytes)
            .await
        {
            Ok(refused) => {
                for (at, error) in refused {
                    if let Some(&place) = places.get(at) {
                        outcomes[place] = Some(Err(error.into()));
                    }
                }
            }
            // Whether any of them was stored may be unknown (`outcome_unknown`): importing them
            // again stores the same lines, except an owned counter in an open service, which
            // the first import may have made.
            Err(error) => {
                for place in places {
                    outcomes[place] = Some(Err(error.clone()));
                }
            }
        }
    }
    let mut text = String::new();
    for (place, outcome) in outcomes.into_iter().enumerate() {
        let line = place + 1;
        let answer = match outcome {
            None => json!({ "line": line, "skipped": true }),
            Some(Ok(())) => json!({ "line": line, "ok": true }),
            Some(Err(error)) => {
                json!({ "line": line, "error": { "code": error.code(), "message": error.message() } })
            }
        };
        let _ = writeln!(text, "{answer}");
    }
    Ok(Response::with_body(200, NDJSON, Body::Text(text)))
}
