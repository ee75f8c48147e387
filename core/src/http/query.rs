//! The query parameters of the counter routes (`by`, `ttl`, `consistency` and `async`) and of
//! the cache routes (`ttl`).
//!
//! Unknown parameters are ignored, so cache-busting suffixes such as `?_=123` that browsers and
//! frameworks add keep working; a known parameter given twice is refused, since either reading
//! could be wrong.

use crate::number::{parse_i64, parse_ttl};
use crate::visits::day::{BadPeriod, Period};
use crate::CoreError;

/// The parsed query of a counter request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterQuery {
    /// `?by=N` for incr and decr.
    pub by: Option<i64>,
    /// `?ttl=S` for writes.
    pub ttl: Option<u32>,
    /// `?consistency=strong`: the reader wants the shard's value, never a cached one.
    pub strong: bool,
    /// `?async=1` (or `true`): the writer asks for a one-way write, as `Prefer: respond-async`
    /// does, for callers that cannot set headers (`navigator.sendBeacon`, an image ping).
    pub one_way: bool,
    /// `?unique=1` (or `true`): a count also counts its visitor in the day's unique visitors;
    /// a read of days also answers them (see [`crate::visits`]).
    pub unique: bool,
}

impl CounterQuery {
    /// Parses a raw query string (without the `?`).
    ///
    /// # Errors
    /// The first bad parameter's error.
    pub fn parse(query: &str) -> Result<Self, CoreError> {
        let mut parsed = Self::default();
        read_known_parameters(query, &["by", "ttl", "consistency", "async", "unique"], |slot, value| {
            match slot {
                0 => parsed.by = Some(parse_i64("by", value)?),
                1 => parsed.ttl = Some(parse_ttl(value)?),
                3 => parsed.one_way = parse_async(value)?,
                4 => parsed.unique = parse_flag("unique", value)?,
                _ => {
                    parsed.strong = match value {
                        "strong" => true,
                        "eventual" => false,
                        _ => {
                            return Err(CoreError::InvalidParameter {
                                name: "consistency".to_owned(),
                                expected: "`strong` or `eventual`".to_owned(),
                            })
                        }
                    }
                }
            }
            Ok(())
        })?;
        Ok(parsed)
    }
}

/// `?async=` of a write or a batch: whether it asks to be one-way.
fn parse_async(value: &str) -> Result<bool, CoreError> {
    parse_flag("async", value)
}

/// A yes-or-no parameter: `1`, `true`, `0` or `false`.
fn parse_flag(name: &str, value: &str) -> Result<bool, CoreError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(CoreError::InvalidParameter {
            name: name.to_owned(),
            expected: "`1`, `true`, `0` or `false`".to_owned(),
        }),
    }
}

/// The days a counter read asks for: `?period=today|yesterday|7d|30d|Nd|total`, or the series
/// `?from=yyyy-mm-dd&to=yyyy-mm-dd`; at most `most_days` days. No parameter is the total.
///
/// # Errors
/// [`CoreError::InvalidParameter`] saying what is wrong, or a repeated parameter.
pub fn parse_period(query: &str, most_days: i32) -> Result<Period, CoreError> {
    let (mut period, mut from, mut to) = (None, None, None);
    read_known_parameters(query, &["period", "from", "to"], |slot, value| {
        let value = Some(value.to_owned());
        match slot {
            0 => period = value,
            1 => from = value,
            _ => to = value,
        }
        Ok(())
    })?;
    Period::parse(period.as_deref(), from.as_deref(), to.as_deref(), most_days).map_err(|bad| {
        let (name, expected) = match bad {
            BadPeriod::Unknown => {
                ("period", "`today`, `yesterday`, `7d`, `30d`, any `Nd` or `total`".to_owned())
            }
            BadPeriod::BadDate => {
                ("from", "`from` and `to` both, as yyyy-mm-dd dates, without `period`".to_owned())
            }
            BadPeriod::TooLong => ("period", format!("at most {most_days} days, `to` not before `from`")),
        };
        CoreError::InvalidParameter { name: name.to_owned(), expected }
    })
}

/// Whether a batch's query asks for one-way writes (`?async=1`); its other parameters are
/// ignored, as before.
///
/// # Errors
/// A bad or repeated `async`.
pub fn batch_asks_one_way(query: &str) -> Result<bool, CoreError> {
    let mut one_way = false;
    read_known_parameters(query, &["async"], |_, value| {
        one_way = parse_async(value)?;
        Ok(())
    })?;
    Ok(one_way)
}

/// The parsed query of a cache-entry request: only `ttl` means anything there, so a counter's
/// `by` or `consistency` is an unknown parameter, ignored like any other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheQuery {
    /// `?ttl=S` for a put.
    pub ttl: Option<u32>,
}

impl CacheQuery {
    /// Parses a raw query string (without the `?`).
    ///
    /// # Errors
    /// A bad or repeated `ttl`.
    pub fn parse(query: &str) -> Result<Self, CoreError> {
        let mut parsed = Self::default();
        read_known_parameters(query, &["ttl"], |_, value| {
            parsed.ttl = Some(parse_ttl(value)?);
            Ok(())
        })?;
        Ok(parsed)
    }
}

/// Hands `read` each parameter of `query` named in `known` (at most 64 names), as its index there and its decoded
/// value. Unknown parameters are skipped; a known one given twice is refused before `read` sees
/// it again.
///
/// # Errors
/// [`CoreError::DuplicateParameter`], or the first error `read` returns.
pub(crate) fn read_known_parameters(
    query: &str,
    known: &[&str],
    mut read: impl FnMut(usize, &str) -> Result<(), CoreError>,
) -> Result<(), CoreError> {
    // One bit per known name (routes know a handful), so the hot path allocates nothing.
    let mut seen = 0_u64;
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let Some(slot) = known.iter().position(|k| *k == name) else { continue };
        if seen & (1 << slot) != 0 {
            return Err(CoreError::DuplicateParameter { name: name.into_owned() });
        }
        seen |= 1 << slot;
        read(slot, &value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_and_unique_are_read_and_bad_ones_refused_by_name() {
        assert_eq!(parse_period("", 400), Ok(Period::Total));
        assert_eq!(parse_period("period=7d&by=3", 400), Ok(Period::Last(7)));
        assert!(CounterQuery::parse("unique=1").unwrap().unique);
        assert!(!CounterQuery::parse("unique=0").unwrap().unique);
        let refused = |query: &str| match parse_period(query, 400) {
            Err(CoreError::InvalidParameter { name, .. }) => name,
            other => panic!("{query}: {other:?}"),
        };
        assert_eq!(refused("period=week"), "period");
        assert_eq!(refused("period=500d"), "period");
        assert_eq!(refused("from=2026-01-01"), "from");
        assert_eq!(refused("from=2026-01-01&to=2025-01-01"), "period");
        assert!(matches!(
            parse_period("period=7d&period=30d", 400),
            Err(CoreError::DuplicateParameter { .. })
        ));
        assert!(CounterQuery::parse("unique=yes").is_err());
    }

    #[test]
    fn a_cache_query_reads_only_the_ttl_and_ignores_counter_parameters() {
        assert_eq!(CacheQuery::parse("ttl=60&by=x&consistency=maybe").unwrap(), CacheQuery { ttl: Some(60) });
        assert_eq!(CacheQuery::parse("").unwrap(), CacheQuery::default());
        assert!(CacheQuery::parse("ttl=0").is_err());
        assert!(CacheQuery::parse("ttl=1&ttl=2").is_err());
    }

    #[test]
    fn a_batch_reads_only_async_from_its_query() {
        assert_eq!(batch_asks_one_way("async=1&by=x&ttl=0"), Ok(true));
        assert_eq!(batch_asks_one_way(""), Ok(false));
        assert!(batch_asks_one_way("async=2").is_err());
    }

    #[test]
    fn empty_query_is_all_defaults() {
        assert_eq!(CounterQuery::parse(""), Ok(CounterQuery::default()));
    }

    #[test]
    fn reads_every_known_parameter_and_ignores_others() {
        let q = CounterQuery::parse("by=-3&ttl=60&consistency=strong&async=1&_=123").unwrap();
        assert_eq!(
            q,
            CounterQuery { by: Some(-3), ttl: Some(60), strong: true, one_way: true, unique: false }
        );
        assert!(CounterQuery::parse("async=true").unwrap().one_way);
        assert!(!CounterQuery::parse("async=0").unwrap().one_way);
    }

    #[test]
    fn percent_encoded_values_are_decoded() {
        assert_eq!(CounterQuery::parse("by=%2B5").unwrap().by, Some(5));
    }

    #[test]
    fn refuses_repeats_and_bad_values() {
        assert_eq!(CounterQuery::parse("by=1&by=2").unwrap_err().code(), "duplicate_parameter");
        assert_eq!(CounterQuery::parse("by=x").unwrap_err().code(), "invalid_number");
        assert_eq!(CounterQuery::parse("by=").unwrap_err().code(), "invalid_number");
        assert_eq!(CounterQuery::parse("ttl=0").unwrap_err().code(), "invalid_ttl");
        assert_eq!(CounterQuery::parse("consistency=maybe").unwrap_err().code(), "invalid_parameter");
        assert_eq!(CounterQuery::parse("async=yes").unwrap_err().code(), "invalid_parameter");
        assert_eq!(CounterQuery::parse("async=1&async=1").unwrap_err().code(), "duplicate_parameter");
        assert_eq!(CounterQuery::parse("by=99999999999999999999").unwrap_err().code(), "overflow");
    }
}
