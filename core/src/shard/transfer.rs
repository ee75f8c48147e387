//! Moving a deployment's data out and in (`GET /v1/export`, `POST /v1/import`): one line of
//! NDJSON per name, the same [`Parcel`] a change of shard count hands from shard to shard (its
//! counter with TTL, creation time and rules, its cache entry), without the idempotency
//! records, which only matter where they were made.
//!
//! An import line is such a parcel, or a counter as CountAPI and Abacus list them
//! (`{"namespace", "key", "value"}`), so a list of old numbers moves in as is. An export ends
//! with `{"next": cursor}` (`null` when nothing is left), which an import skips: a whole
//! download can be sent back unchanged. Importing a line twice stores the same thing twice.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::http::query::read_known_parameters;
use crate::number::MAX_TTL_SECONDS;
use crate::partition::ShardId;
use crate::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use crate::shard::content_type::ContentType;
use crate::shard::counter::Counter;
use crate::shard::migration::Parcel;
use crate::shard::visit_table::MAX_SKETCH_DAYS;
use crate::visits::day::Day;
use crate::visits::sketch::Sketch;
use crate::{CoreError, Key, Namespace};

/// Lines one import request may carry.
pub const MAX_IMPORT_LINES: usize = 1_000;
/// Bytes of NDJSON one import request may carry.
pub const MAX_IMPORT_BYTES: usize = 8 * 1024 * 1024;
/// Names one export page reads at most (each shard call reads a page of its own names).
pub const MAX_EXPORT_LINES: u64 = 1_000;
/// Bytes of cache values one export page carries at most (one larger value still travels,
/// alone), so a page stays well within what a Durable Object call and a response may carry.
pub const MAX_EXPORT_VALUE_BYTES: usize = 4 * 1024 * 1024;

/// One page of a shard's export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportPage {
    /// The names' counters and cache entries (names holding neither live are left out).
    pub parcels: Vec<Parcel>,
    /// The last name read: where the next page of this shard starts; `None` when it is done.
    pub resume_after: Option<(String, String)>,
}

/// What one import line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportLine {
    /// Store this counter and/or cache entry under its name.
    Store(Box<Parcel>),
    /// An export's closing line, or an empty one: nothing to do.
    Skip,
}

/// A counter as CountAPI and Abacus list them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Listed {
    namespace: String,
    key: String,
    value: i64,
}

/// Most days (and day sketches) one imported line may carry: ten years, the most
/// `EDGECOUNT_DAYS` keeps.
pub const MAX_IMPORTED_DAYS: usize = 3_660;

/// Reads one import line, written at `now_ms` when it carries no times of its own.
///
/// # Errors
/// [`CoreError::InvalidBody`] naming what is wrong with the line (not JSON, a bad name, a cache
/// value over [`MAX_CACHE_VALUE_BYTES`], a bad content type, nothing to store).
pub fn parse_import_line(line: &str, now_ms: u64) -> Result<ImportLine, CoreError> {
    let bad = |reason: &str| CoreError::InvalidBody { reason: reason.to_owned() };
    let line = line.trim().trim_start_matches('\u{feff}');
    if line.is_empty() {
        return Ok(ImportLine::Skip);
    }
    let value: serde_json::Value = serde_json::from_str(line).map_err(|_| bad("the line is not JSON"))?;
    if value.as_object().is_some_and(|fields| fields.len() == 1 && fields.contains_key("next")) {
        return Ok(ImportLine::Skip);
    }
    if value.get("namespace").is_some() {
        let listed: Listed = serde_json::from_value(value)
            .map_err(|_| bad("a listed counter has exactly `namespace`, `key` and an integer `value`"))?;
        let ns = Namespace::new(&listed.namespace).map_err(|e| bad(&e.to_string()))?;
        let key = Key::new(&listed.key).map_err(|e| bad(&e.to_string()))?;
        let counter = Counter {
            value: listed.value,
            version: 1,
            ttl_seconds: None,
            expires_at_ms: None,
            created_ms: Some(now_ms),
            settings: None,
            today: None,
        };
        return Ok(ImportLine::Store(Box::new(Parcel { counter: Some(counter), ..Parcel::empty(ns, key) })));
    }
    let parcel: Parcel =
        serde_json::from_value(value).map_err(|e| bad(&format!("not an exported line: {e}")))?;
    if !parcel.records.is_empty() {
        return Err(bad("idempotency records are not imported"));
    }
    if parcel.counter.is_none() && parcel.cache.is_none() {
        return Err(bad("the line holds neither a counter nor a cache entry"));
    }
    if parcel.counter.is_none() && !(parcel.days.is_empty() && parcel.sketches.is_empty()) {
        return Err(bad("days and visitors belong to a counter: the line has none"));
    }
    if parcel.sketches.iter().any(|s| Sketch::from_bytes(&s.sketch).is_err()) {
        return Err(bad("a visitor sketch that is not one"));
    }
    if parcel.days.len() > MAX_IMPORTED_DAYS {
        return Err(bad(&format!("more than {MAX_IMPORTED_DAYS} days")));
    }
    if parcel.sketches.len() > MAX_SKETCH_DAYS as usize {
        return Err(bad(&format!("visitors of more than {MAX_SKETCH_DAYS} days")));
    }
    if let Some(entry) = &parcel.cache {
        if entry.value.len() > MAX_CACHE_VALUE_BYTES {
            return Err(CoreError::EntryTooLarge { limit_bytes: MAX_CACHE_VALUE_BYTES as u64 });
        }
        ContentType::new(&entry.content_type).map_err(|e| bad(&e.to_string()))?;
    }
    if let Some(counter) = &parcel.counter {
        check_counter(counter).map_err(&bad)?;
    }
    let latest = Day::latest_anywhere(now_ms);
    let days = parcel.counter.iter().filter_map(|c| c.today.map(|t| t.day));
    let mut days = days.chain(parcel.days.iter().map(|d| d.day)).chain(parcel.sketches.iter().map(|s| s.day));
    if days.any(|day| day.0 < 0 || day > latest) {
        return Err(bad(&format!("a day is 0 (1970-01-01) to {} (tomorrow)", latest.0)));
    }
    if parcel.cache.as_ref().is_some_and(|e| e.expires_at_ms.is_some_and(too_big) || too_big(e.written_at_ms))
    {
        return Err(bad("a cache entry's times are milliseconds since 1970, below 2^53"));
    }
    Ok(ImportLine::Store(Box::new(parcel)))
}

/// Times and versions beyond 2^53 could not be stored exactly (nor read back by JavaScript).
fn too_big(number: u64) -> bool {
    number > MAX_EXACT
}

const MAX_EXACT: u64 = (1 << 53) - 1;

/// What a counter must be to be stored as the routes would have stored it.
fn check_counter(counter: &Counter) -> Result<(), &'static str> {
    if counter.version == 0 || too_big(counter.version) {
        return Err("a counter's version is 1 to 2^53 - 1");
    }
    if counter.ttl_seconds.is_some_and(|ttl| ttl == 0 || ttl > MAX_TTL_SECONDS) {
        return Err("a counter's ttl_seconds is 1 to 315,360,000");
    }
    if [counter.expires_at_ms, counter.created_ms].into_iter().flatten().any(too_big) {
        return Err("a counter's times are milliseconds since 1970, below 2^53");
    }
    if counter.settings.is_some_and(|s| s.update_lowerbound > s.update_upperbound) {
        return Err("a counter's update_lowerbound is above its update_upperbound");
    }
    Ok(())
}

/// The query of `GET /v1/export`: `?ns=` narrows it to a namespace, `?cursor=` resumes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportQuery {
    pub ns: Option<Namespace>,
    /// `None` to start.
    pub cursor: Option<ExportCursor>,
}

impl ExportQuery {
    /// Parses a raw query string (without the `?`).
    ///
    /// # Errors
    /// A bad namespace or cursor, or either given twice.
    pub fn parse(query: &str) -> Result<Self, CoreError> {
        let mut parsed = Self { ns: None, cursor: None };
        read_known_parameters(query, &["ns", "cursor"], |slot, value| {
            match slot {
                0 => parsed.ns = Some(Namespace::new(value)?),
                _ => parsed.cursor = Some(ExportCursor::decode(value)?),
            }
            Ok(())
        })?;
        Ok(parsed)
    }
}

/// Where an export resumes: after a name of a shard (the shards are read in order, each in
/// name order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    /// The shard count the export began under: resumed under another, names would be missed
    /// or repeated.
    pub shards: u32,
    pub shard: ShardId,
    /// The last name read in that shard; `None` to start it from the beginning.
    pub after: Option<(String, String)>,
}

impl ExportCursor {
    /// The start of the first shard, under `shards`.
    #[must_use]
    pub fn start(shards: u32) -> Self {
        Self { shards, shard: ShardId(0), after: None }
    }

    /// The cursor as a URL-safe token.
    #[must_use]
    pub fn encode(&self) -> String {
        let text = serde_json::json!([self.shards, self.shard.0, self.after]).to_string();
        URL_SAFE_NO_PAD.encode(text)
    }

    /// Reads a token made by [`ExportCursor::encode`].
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] for anything else.
    pub fn decode(token: &str) -> Result<Self, CoreError> {
        let invalid = || CoreError::InvalidParameter {
            name: "cursor".into(),
            expected: "the `next` of an earlier export page".into(),
        };
        let bytes = URL_SAFE_NO_PAD.decode(token.trim()).map_err(|_| invalid())?;
        let (shards, shard, after): (u32, u32, Option<(String, String)>) =
            serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if shard >= shards {
            return Err(invalid());
        }
        Ok(Self { shards, shard: ShardId(shard), after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::migration::ParcelEntry;

    #[test]
    fn an_exported_line_comes_back_as_it_went() {
        let parcel = Parcel {
            counter: Some(Counter {
                value: -5,
                version: 7,
                ttl_seconds: Some(60),
                expires_at_ms: Some(90_000),
                created_ms: Some(1_000),
                settings: None,
                today: None,
            }),
            cache: Some(ParcelEntry {
                value: vec![0, 255],
                content_type: "application/octet-stream".into(),
                expires_at_ms: None,
                written_at_ms: 5,
            }),
            ..Parcel::empty(Namespace::new("blog").unwrap(), Key::new("home").unwrap())
        };
        let line = serde_json::to_string(&parcel).unwrap();
        assert_eq!(parse_import_line(&line, 0), Ok(ImportLine::Store(Box::new(parcel))));
    }

    #[test]
    fn a_listed_counter_moves_in_as_is_and_the_export_trailer_is_skipped() {
        let ImportLine::Store(parcel) =
            parse_import_line(r#"{"namespace":"old-site","key":"visits","value":4242}"#, 9).unwrap()
        else {
            panic!()
        };
        assert_eq!(parcel.counter.map(|c| (c.value, c.version, c.created_ms)), Some((4242, 1, Some(9))));
        assert_eq!(parse_import_line(r#"{"next":null}"#, 0), Ok(ImportLine::Skip));
        assert_eq!(parse_import_line("  ", 0), Ok(ImportLine::Skip));
        assert_eq!(parse_import_line("\u{feff}{\"next\":null}", 0), Ok(ImportLine::Skip));
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        for line in [
            "not json",
            r#"{"namespace":"a b","key":"k","value":1}"#,
            r#"{"namespace":"n","key":"k","value":1.5}"#,
            r#"{"ns":"n","key":"k"}"#,
            r#"{"ns":"n","key":"k","cache":{"value":"AA","content_type":"no type","expires_at_ms":null,"written_at_ms":1}}"#,
            r#"{"ns":"n","key":"k","records":[{"kind":"counter","idempotency_key":"a","request_digest":"0","result":"{}","created_at_ms":1}]}"#,
            r#"{"ns":"n","key":"k","counter":{"value":1,"version":1,"ttl_seconds":0,"expires_at_ms":null,"created_ms":1,"settings":null}}"#,
            r#"{"ns":"n","key":"k","counter":{"value":1,"version":18446744073709551615,"ttl_seconds":null,"expires_at_ms":null,"created_ms":1,"settings":null}}"#,
            r#"{"ns":"n","key":"k","counter":{"value":1,"version":1,"ttl_seconds":null,"expires_at_ms":null,"created_ms":1,"settings":{"enable_reset":false,"update_lowerbound":5,"update_upperbound":1}}}"#,
        ] {
            assert!(matches!(parse_import_line(line, 0), Err(CoreError::InvalidBody { .. })), "{line}");
        }
    }

    /// An export's line of a counter `n/k` counted in `today` (its latest day), with finished
    /// `days` and visitors' `sketches` of those days.
    fn line_with_days(
        today: Option<i32>,
        days: impl IntoIterator<Item = i32>,
        sketches: impl IntoIterator<Item = i32>,
    ) -> String {
        use crate::shard::counter::DayCount;
        use crate::shard::migration::ParcelSketch;
        use crate::visits::day::Day;
        use crate::visits::sketch::Sketch;

        let parcel = Parcel {
            counter: Some(Counter {
                value: 1,
                version: 1,
                ttl_seconds: None,
                expires_at_ms: None,
                created_ms: Some(1),
                settings: None,
                today: today.map(|d| DayCount { day: Day(d), count: 1 }),
            }),
            days: days.into_iter().map(|d| DayCount { day: Day(d), count: 1 }).collect(),
            sketches: sketches
                .into_iter()
                .map(|d| ParcelSketch { day: Day(d), sketch: Sketch::new().to_bytes() })
                .collect(),
            ..Parcel::empty(Namespace::new("n").unwrap(), Key::new("k").unwrap())
        };
        serde_json::to_string(&parcel).unwrap()
    }

    #[test]
    fn a_line_carries_at_most_the_days_and_sketches_a_counter_keeps() {
        let line = |days: usize, sketches: usize| {
            let count = |n: usize| 0..i32::try_from(n).unwrap();
            line_with_days(None, count(days), count(sketches))
        };
        // Late enough that every day of the longest line has come.
        let now_ms = 4_000 * 86_400_000;
        let refused =
            |line: &str| matches!(parse_import_line(line, now_ms), Err(CoreError::InvalidBody { .. }));
        assert!(!refused(&line(MAX_IMPORTED_DAYS, MAX_SKETCH_DAYS as usize)));
        assert!(refused(&line(MAX_IMPORTED_DAYS + 1, 0)));
        assert!(refused(&line(0, MAX_SKETCH_DAYS as usize + 1)));
    }

    #[test]
    fn days_before_1970_or_after_tomorrow_in_the_widest_zone_are_refused() {
        // 2026-11-28 12:00 UTC is day 20,420; it is already 2026-11-29 in UTC+14.
        let now_ms = 20_420 * 86_400_000 + 12 * 3_600_000;
        let refused =
            |line: &str| matches!(parse_import_line(line, now_ms), Err(CoreError::InvalidBody { .. }));
        for day in [0, 20_420, 20_421] {
            assert!(!refused(&line_with_days(Some(day), None, None)), "today {day}");
            assert!(!refused(&line_with_days(None, Some(day), Some(day))), "day {day}");
        }
        for day in [-1, 20_422, 999_999] {
            assert!(refused(&line_with_days(Some(day), None, None)), "today {day}");
            assert!(refused(&line_with_days(None, Some(day), None)), "day {day}");
            assert!(refused(&line_with_days(None, None, Some(day))), "sketch {day}");
        }
    }

    #[test]
    fn an_export_query_reads_its_namespace_and_cursor() {
        let cursor = ExportCursor { shards: 16, shard: ShardId(2), after: None };
        let query = ExportQuery::parse(&format!("ns=blog&cursor={}&_=1", cursor.encode())).unwrap();
        assert_eq!(query, ExportQuery { ns: Some(Namespace::new("blog").unwrap()), cursor: Some(cursor) });
        assert_eq!(ExportQuery::parse("").unwrap().cursor, None);
        assert!(ExportQuery::parse("ns=a%20b").is_err());
        assert!(ExportQuery::parse("cursor=x&cursor=y").is_err());
    }

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let cursor =
            ExportCursor { shards: 16, shard: ShardId(3), after: Some(("blog".into(), "home".into())) };
        assert_eq!(ExportCursor::decode(&cursor.encode()), Ok(cursor));
        assert_eq!(ExportCursor::decode(&ExportCursor::start(4).encode()), Ok(ExportCursor::start(4)));
        assert!(ExportCursor::decode("%%").is_err());
        assert!(ExportCursor::decode(&URL_SAFE_NO_PAD.encode("[1]")).is_err());
        assert!(ExportCursor::decode(&URL_SAFE_NO_PAD.encode("[4,4,null]")).is_err(), "no shard 4 of 4");
    }
}
