//! Which day a count lands in, and which days a read asks for.
//!
//! A day is the number of days since 1970-01-01 in the namespace's time zone (UTC unless the
//! namespace names an IANA zone): a count at 23:30 in Paris lands in that Paris day, whatever
//! the date in UTC. The zone's rules (summer time) come from the IANA database compiled into
//! the `jiff` crate.

use jiff::civil::{date, Date};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::Namespace;

/// A day: days since 1970-01-01 in some zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Day(pub i32);

/// The zone a namespace's days are counted in.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    name: String,
    zone: TimeZone,
}

/// A zone name the IANA database does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownZone;

impl Default for Zone {
    fn default() -> Self {
        Self::utc()
    }
}

impl Zone {
    /// Coordinated Universal Time, the default.
    #[must_use]
    pub fn utc() -> Self {
        Self { name: "UTC".to_owned(), zone: TimeZone::UTC }
    }

    /// The IANA zone `name`, such as `Europe/Paris`.
    ///
    /// # Errors
    ///
    /// [`UnknownZone`] when the database has no zone of that name.
    pub fn named(name: &str) -> Result<Self, UnknownZone> {
        let zone = TimeZone::get(name).map_err(|_| UnknownZone)?;
        Ok(Self { name: name.to_owned(), zone })
    }

    /// The zone's IANA name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The day in this zone at `at_ms` (milliseconds since the Unix epoch).
    #[must_use]
    pub fn day_at(&self, at_ms: u64) -> Day {
        let seconds = i64::try_from(at_ms / 1000).unwrap_or(i64::MAX);
        let offset = Timestamp::from_second(seconds).map_or(0, |at| self.zone.to_offset(at).seconds());
        Day(i32::try_from((seconds + i64::from(offset)).div_euclid(86_400)).unwrap_or(i32::MAX))
    }
}

/// Every namespace's zone: one for all, and others for namespaces that name their own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Zones {
    default: Zone,
    named: Vec<(Namespace, Zone)>,
}

impl Zones {
    /// From `EDGECOUNT_TIME_ZONE` (one IANA zone for every namespace; UTC when unset) and
    /// `EDGECOUNT_TIME_ZONES` (`ns=Zone` pairs, comma-separated, for namespaces of their own).
    ///
    /// # Errors
    /// [`UnknownZone`] for an unknown zone, a pair without `=` or a namespace that is not one.
    pub fn parse(default: Option<&str>, named: Option<&str>) -> Result<Self, UnknownZone> {
        let default = match default.map(str::trim).filter(|d| !d.is_empty()) {
            Some(name) => Zone::named(name)?,
            None => Zone::utc(),
        };
        let mut zones = Vec::new();
        for pair in named.unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (ns, zone) = pair.split_once('=').ok_or(UnknownZone)?;
            let ns = Namespace::new(ns.trim()).map_err(|_| UnknownZone)?;
            zones.push((ns, Zone::named(zone.trim())?));
        }
        Ok(Self { default, named: zones })
    }

    /// The zone `ns` counts its days in.
    #[must_use]
    pub fn of(&self, ns: &Namespace) -> &Zone {
        self.named.iter().find(|(named, _)| named == ns).map_or(&self.default, |(_, zone)| zone)
    }
}

const EPOCH: Date = date(1970, 1, 1);

impl Day {
    /// The day of the date `yyyy-mm-dd`, if it is one.
    #[must_use]
    pub fn parse(text: &str) -> Option<Day> {
        if text.len() != 10 {
            return None;
        }
        let day: Date = text.parse().ok()?;
        let days = day.since(EPOCH).ok()?.get_days();
        Some(Day(days))
    }

    /// The day's date, `yyyy-mm-dd`.
    #[must_use]
    pub fn date(self) -> String {
        EPOCH
            .checked_add(jiff::Span::new().days(i64::from(self.0)))
            .map_or_else(|_| String::new(), |d| d.to_string())
    }

    /// The latest day any zone may be in at `at_ms`: tomorrow in UTC, as zones run at most 14
    /// hours ahead of it. A day past this one cannot have been counted yet.
    #[must_use]
    pub fn latest_anywhere(at_ms: u64) -> Day {
        Day(i32::try_from(at_ms / 86_400_000 + 1).unwrap_or(i32::MAX))
    }

    /// The day `n` days before this one.
    #[must_use]
    pub fn before(self, n: i32) -> Day {
        Day(self.0.saturating_sub(n))
    }
}

/// The days a read asks for, from its `period` (or `from` and `to`) parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// Every count since the counter began (the counter's value, for counts).
    Total,
    /// Today, in the namespace's zone.
    Today,
    /// Yesterday.
    Yesterday,
    /// The last `n` days, today included: `7d`, `30d`.
    Last(i32),
    /// The dates `from` to `to`, both included, day by day.
    Series { from: Day, to: Day },
}

/// Why a period was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadPeriod {
    /// Not `total`, `today`, `yesterday` or `Nd`.
    Unknown,
    /// A `from` or `to` that is not a `yyyy-mm-dd` date, or only one of them.
    BadDate,
    /// A range that ends before it starts, or is longer than the days kept.
    TooLong,
}

impl Period {
    /// The period named by `period`, or the series `from`..`to`; at most `most_days` days.
    ///
    /// # Errors
    ///
    /// [`BadPeriod`] saying what is wrong.
    pub fn parse(
        period: Option<&str>,
        from: Option<&str>,
        to: Option<&str>,
        most_days: i32,
    ) -> Result<Period, BadPeriod> {
        match (period, from, to) {
            (None, None, None) => Ok(Period::Total),
            (None, Some(from), Some(to)) => {
                let (from, to) =
                    (Day::parse(from).ok_or(BadPeriod::BadDate)?, Day::parse(to).ok_or(BadPeriod::BadDate)?);
                if to < from || i64::from(to.0) - i64::from(from.0) >= i64::from(most_days) {
                    return Err(BadPeriod::TooLong);
                }
                Ok(Period::Series { from, to })
            }
            (None, _, _) => Err(BadPeriod::BadDate),
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(BadPeriod::BadDate),
            (Some("total"), None, None) => Ok(Period::Total),
            (Some("today"), None, None) => Ok(Period::Today),
            (Some("yesterday"), None, None) => Ok(Period::Yesterday),
            (Some(days), None, None) => {
                // Digits alone, from 1 and without a leading zero: `+7d` and `07d` are no periods.
                let digits = days
                    .strip_suffix('d')
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() && !n.starts_with('0'))
                    .ok_or(BadPeriod::Unknown)?;
                match digits.parse::<i32>() {
                    Ok(n) if n <= most_days => Ok(Period::Last(n)),
                    _ => Err(BadPeriod::TooLong),
                }
            }
        }
    }

    /// The days asked for when it is `today`, first to last; `None` for the total.
    #[must_use]
    pub fn days(self, today: Day) -> Option<(Day, Day)> {
        match self {
            Period::Total => None,
            Period::Today => Some((today, today)),
            Period::Yesterday => Some((today.before(1), today.before(1))),
            Period::Last(n) => Some((today.before(n - 1), today)),
            Period::Series { from, to } => Some((from, to)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-29 00:30 UTC: 01:30 in Paris, the night its summer time begins.
    const PARIS_SPRING: u64 = 1_774_744_200_000;

    #[test]
    fn a_day_is_counted_from_midnight_in_its_zone() {
        let utc = Zone::utc();
        let paris = Zone::named("Europe/Paris").unwrap();
        let new_york = Zone::named("America/New_York").unwrap();
        assert_eq!(utc.day_at(PARIS_SPRING).date(), "2026-03-29");
        assert_eq!(paris.day_at(PARIS_SPRING).date(), "2026-03-29");
        assert_eq!(new_york.day_at(PARIS_SPRING).date(), "2026-03-28", "20:30 the evening before");
        // 23:30 UTC on the 28th is 00:30 on the 29th in Paris (UTC+1 until 02:00 that night).
        let late = PARIS_SPRING - 3_600_000;
        assert_eq!(utc.day_at(late).date(), "2026-03-28");
        assert_eq!(paris.day_at(late).date(), "2026-03-29");
        assert_eq!(utc.day_at(0), Day(0));
    }

    #[test]
    fn summer_time_moves_midnight_by_an_hour() {
        let paris = Zone::named("Europe/Paris").unwrap();
        // 2026-07-01 22:30 UTC is 00:30 on 2 July in Paris (UTC+2).
        let summer = Day::parse("2026-07-01").unwrap().0 as u64 * 86_400_000 + 22 * 3_600_000 + 1_800_000;
        assert_eq!(paris.day_at(summer).date(), "2026-07-02");
        assert_eq!(Zone::utc().day_at(summer).date(), "2026-07-01");
    }

    #[test]
    fn unknown_zones_are_refused() {
        assert_eq!(Zone::named("Mars/Olympus"), Err(UnknownZone));
        assert_eq!(Zone::named(""), Err(UnknownZone));
        assert_eq!(Zone::named("Asia/Tokyo").unwrap().name(), "Asia/Tokyo");
    }

    #[test]
    fn namespaces_count_in_their_own_zone_or_the_default() {
        let zones =
            Zones::parse(Some("Europe/Paris"), Some("shop=America/New_York, blog = Asia/Tokyo")).unwrap();
        let name = |ns: &str| zones.of(&Namespace::new(ns).unwrap()).name().to_owned();
        assert_eq!(
            (name("shop"), name("blog"), name("other")),
            ("America/New_York".to_owned(), "Asia/Tokyo".to_owned(), "Europe/Paris".to_owned())
        );
        assert_eq!(Zones::parse(None, None).unwrap().of(&Namespace::new("x").unwrap()).name(), "UTC");
        assert_eq!(Zones::parse(Some("Nowhere/City"), None), Err(UnknownZone));
        assert_eq!(Zones::parse(None, Some("shop")), Err(UnknownZone));
        assert_eq!(Zones::parse(None, Some("shop=Nowhere/City")), Err(UnknownZone));
        assert_eq!(Zones::parse(None, Some("no spaces=UTC")), Err(UnknownZone));
    }

    #[test]
    fn dates_and_days_convert_both_ways() {
        for text in ["1970-01-01", "2000-02-29", "2026-11-25", "1969-12-31"] {
            assert_eq!(Day::parse(text).unwrap().date(), text);
        }
        assert_eq!(Day::parse("1970-01-02"), Some(Day(1)));
        for bad in ["2026-02-30", "2026-1-5", "26-11-25", "today", "2026-11-25T00:00", ""] {
            assert_eq!(Day::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn periods_name_their_days() {
        let today = Day::parse("2026-11-25").unwrap();
        let parse = |p: Option<&str>, f: Option<&str>, t: Option<&str>| Period::parse(p, f, t, 400);
        let days = |p: Period| p.days(today).map(|(a, b)| (a.date(), b.date()));
        assert_eq!(parse(None, None, None), Ok(Period::Total));
        assert_eq!(days(parse(Some("total"), None, None).unwrap()), None);
        assert_eq!(
            days(parse(Some("today"), None, None).unwrap()),
            Some(("2026-11-25".into(), "2026-11-25".into()))
        );
        assert_eq!(
            days(parse(Some("yesterday"), None, None).unwrap()),
            Some(("2026-11-24".into(), "2026-11-24".into()))
        );
        assert_eq!(
            days(parse(Some("7d"), None, None).unwrap()),
            Some(("2026-11-19".into(), "2026-11-25".into()))
        );
        assert_eq!(
            days(parse(Some("30d"), None, None).unwrap()),
            Some(("2026-10-27".into(), "2026-11-25".into()))
        );
        let series = parse(None, Some("2026-11-01"), Some("2026-11-03")).unwrap();
        assert_eq!(days(series), Some(("2026-11-01".into(), "2026-11-03".into())));
    }

    #[test]
    fn bad_periods_say_what_is_wrong() {
        let parse = |p: Option<&str>, f: Option<&str>, t: Option<&str>| Period::parse(p, f, t, 400);
        assert_eq!(parse(Some("week"), None, None), Err(BadPeriod::Unknown));
        assert_eq!(parse(Some("0d"), None, None), Err(BadPeriod::Unknown));
        assert_eq!(parse(Some("-3d"), None, None), Err(BadPeriod::Unknown));
        assert_eq!(parse(Some("401d"), None, None), Err(BadPeriod::TooLong));
        assert_eq!(parse(Some("400d"), None, None), Ok(Period::Last(400)));
        for odd in ["+7d", "07d", "00d", "d", " 7d", "7 d", "7", "7D", "٧d"] {
            assert_eq!(parse(Some(odd), None, None), Err(BadPeriod::Unknown), "{odd}");
        }
        assert_eq!(parse(Some("99999999999d"), None, None), Err(BadPeriod::TooLong), "past i32");
        assert_eq!(Period::parse(Some("3660d"), None, None, 3_660), Ok(Period::Last(3_660)));
        assert_eq!(parse(None, Some("2026-11-01"), None), Err(BadPeriod::BadDate));
        assert_eq!(parse(None, Some("2026-11-01"), Some("November")), Err(BadPeriod::BadDate));
        assert_eq!(parse(Some("today"), Some("2026-11-01"), Some("2026-11-02")), Err(BadPeriod::BadDate));
        assert_eq!(parse(None, Some("2026-11-03"), Some("2026-11-01")), Err(BadPeriod::TooLong));
        assert_eq!(parse(None, Some("2025-01-01"), Some("2026-11-01")), Err(BadPeriod::TooLong));
        assert!(parse(None, Some("2025-10-23"), Some("2026-11-26")).is_ok(), "400 days");
    }
}
