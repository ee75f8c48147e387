//! Configuration: the `EDGECOUNT_*` vars of `wrangler.toml`, read into one typed value. How an
//! isolate reads them once and keeps them is the parent module's.

use std::num::NonZeroU32;

use edgecount_core::compat::{Mode, DEFAULT_KEY_TTL_SECONDS};
use edgecount_core::edge::one_way::{
    OneWayLimits, MAX_FLUSH_KEYS, MAX_INTERVAL_MS as MAX_ONE_WAY_INTERVAL_MS,
};
use edgecount_core::edge::rate_limit::RateLimit;
use edgecount_core::number::MAX_TTL_SECONDS;
use edgecount_core::partition::MAX_SHARDS;
use edgecount_core::shard::migration::Migration;
use edgecount_core::shard::placement::Kept;
use edgecount_core::visits::day::Zones;
use edgecount_core::{AccessPolicy, CacheBounds};
use worker::Env;

use crate::shared::api_error::ApiError;

/// Seconds a `/stream` stays silent before a keepalive: well under the 100 s after which
/// Cloudflare closes an idle connection.
pub const DEFAULT_STREAM_KEEPALIVE_S: u64 = 25;
/// Days a counter keeps its day counts and visitor sketches, by default: a year and a month.
pub const DEFAULT_DAYS_KEPT: i32 = 400;
/// The most days `EDGECOUNT_DAYS` may keep: ten years.
pub const MAX_DAYS_KEPT: i32 = 3_660;

/// Keys a shard hands over per alarm while the shard count changes, when
/// `EDGECOUNT_HAND_OVER_KEYS` is not set: one batch of parcels, so that a request waits behind
/// at most one batch's statements. `make bench-migration` moved half of 1,000,000 keys in 89 s
/// with 200 and in 62 s with 1,000, at twice the latency of requests meanwhile.
pub const DEFAULT_HAND_OVER_KEYS: usize = 200;

/// Shard count used when `EDGECOUNT_SHARDS` is not set.
pub const DEFAULT_SHARDS: u32 = 16;

/// Per-shard bound on what cache entries are charged (names, content types, values and a fixed
/// overhead each) when `EDGECOUNT_SHARD_CACHE_BYTES` is not set: 64 MiB.
pub const DEFAULT_SHARD_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// Per-shard bound on the number of cache entries when `EDGECOUNT_SHARD_CACHE_ENTRIES` is not
/// set. The index holds each entry's names and about 100 bytes more in Wasm, so 50,000 entries
/// take at most about 21 MB even with the longest names (64 + 256 bytes), and a few MB with
/// typical ones: room beside the counters' table within a Durable Object's 128 MB.
pub const DEFAULT_SHARD_CACHE_ENTRIES: usize = 50_000;

/// The cache bounds of a shard when the vars cannot be read.
pub const DEFAULT_SHARD_CACHE_BOUNDS: CacheBounds =
    CacheBounds { bytes: DEFAULT_SHARD_CACHE_BYTES, entries: DEFAULT_SHARD_CACHE_ENTRIES };

/// Reads per second past which a key is hot, when `EDGECOUNT_HOT_THRESHOLD` is not set.
pub const DEFAULT_HOT_THRESHOLD_PER_S: f64 = 50.0;
/// Max age of hot reads in seconds, when `EDGECOUNT_HOT_MAX_AGE` is not set.
pub const DEFAULT_HOT_MAX_AGE_S: u64 = 1;

/// Ops for one shard that may wait in an isolate's queue while a call is in flight, when
/// `EDGECOUNT_SHARD_QUEUE_LIMIT` is not set: as many as one batch may carry.
pub const DEFAULT_SHARD_QUEUE_LIMIT: usize = 1000;
/// Requests a second per client (burst twice that) when public namespaces are configured and
/// `EDGECOUNT_RATE_LIMIT` is not: a visitor's counts, reads and badges together.
pub const DEFAULT_PUBLIC_RATE_LIMIT: u32 = 10;
/// How many times the rate limit's burst (or, with none configured, the public default's
/// rate) reads of visitors may save up: ten reads of the 400 days kept, say, for the totals of
/// a page that lists ten posts.
pub const VISITOR_READS_BURST: u32 = 10;
/// How long an isolate reuses the shards' statistics (`EDGECOUNT_STATS_MAX_AGE_MS`).
pub const DEFAULT_STATS_MAX_AGE_MS: u64 = 2_000;

/// How one-way writes are buffered when the `EDGECOUNT_ONE_WAY_*` vars are not set: a shard's
/// sums are applied once the oldest is a second old or 1,000 ops wait for it, and an isolate
/// holds at most 10,000 pending keys and 2 MiB charged for them (about 100 to 420 bytes a key).
pub const DEFAULT_ONE_WAY: OneWayLimits = OneWayLimits {
    interval_ms: 1_000,
    flush_ops: 1_000,
    flush_keys: MAX_FLUSH_KEYS,
    max_keys: 10_000,
    max_bytes: 2 * 1024 * 1024,
};

/// How a relay buffers when its vars (`EDGECOUNT_RELAY_INTERVAL_MS`, `EDGECOUNT_RELAY_KEYS`,
/// `EDGECOUNT_RELAY_BYTES`) are not set: it forwards the sums it took once the oldest is 5 s
/// old, or sooner once it holds half its bound of keys or bytes (so that it keeps room for the
/// flushes that arrive meanwhile), and holds at most 100,000 keys and 16 MiB.
pub const DEFAULT_RELAY: OneWayLimits = OneWayLimits {
    interval_ms: 5_000,
    flush_ops: u64::MAX,
    flush_keys: 50_000,
    max_keys: 100_000,
    max_bytes: MAX_RELAY_BYTES,
};

/// The most bytes a relay may be charged: everything it holds may go in one forward, and at
/// 16 MiB its JSON (about 21 bytes for a visitor charged 16) stays under the 32 MiB a Durable
/// Object call may carry.
pub const MAX_RELAY_BYTES: u64 = 16 * 1024 * 1024;

/// The most relays a shard may have.
pub const MAX_RELAYS: u32 = 256;

/// The longest a relay may hold sums: a relay with nothing arriving may be evicted, with what it
/// holds, after about a minute.
pub const MAX_RELAY_INTERVAL_MS: u64 = 60_000;

/// Which origins may call the API from a browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    Any,
    List(Vec<String>),
}

/// The service's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Whether the demo page and its script are served at `/` (`EDGECOUNT_DEMO=1`, which
    /// `make dev` sets): a deployment shows no page of its own unless asked to.
    pub demo: bool,
    /// How long the shards' statistics are reused (`isolate::shard_stats`).
    pub stats_max_age_ms: u64,
    pub shards: u32,
    /// The count being left while a change of count is under way (`EDGECOUNT_SHARDS_FROM`).
    pub shards_from: Option<u32>,
    /// Most keys a shard hands over per alarm during a change of count.
    pub hand_over_keys: usize,
    pub cors_origins: CorsOrigins,
    /// How much one shard's cache holds before evicting: charged bytes and entries.
    pub shard_cache: CacheBounds,
    /// Reads and writes per second past which a key is hot.
    pub hot_threshold_per_s: f64,
    /// How old a hot read answered from the edge may be, in ms (0 turns edge caching off).
    pub hot_max_age_ms: u64,
    /// Who may do what.
    pub access: AccessPolicy,
    /// Requests per second (and burst) per client; `None` when unlimited.
    pub rate_limit: Option<RateLimit>,
    /// The limit of reads of visitors over many days, in a bucket of their own: the rate limit's
    /// refill, or where none is configured (`EDGECOUNT_RATE_LIMIT` unset) the public default's,
    /// and [`VISITOR_READS_BURST`] times its burst saved up; `None` when `EDGECOUNT_RATE_LIMIT`
    /// is 0 (see `crate::isolate::meter::Meter::charge_visitors`).
    pub visitors_rate_limit: Option<RateLimit>,
    /// Most ops waiting for one shard in an isolate before it answers 503 `shard_overloaded`.
    pub shard_queue_limit: usize,
    /// How one-way writes are buffered and flushed.
    pub one_way: OneWayLimits,
    /// Relays per shard that isolates flush their one-way sums through (`EDGECOUNT_RELAYS`);
    /// 0 sends them straight to the shards.
    pub relays: u32,
    /// How a relay buffers the sums it takes and how long it holds them.
    pub relay: OneWayLimits,
    /// Whose shape the compatible routes answer in where CountAPI and Abacus disagree.
    pub compat_mode: Mode,
    /// How long a counter written through the compatible routes lives after its last write.
    pub compat_ttl_seconds: u32,
    /// How long a `/stream` may stay silent before a keepalive comment, in seconds.
    pub stream_keepalive_s: u64,
    /// The zone each namespace counts its days in (`EDGECOUNT_TIME_ZONE`, `EDGECOUNT_TIME_ZONES`).
    pub zones: Zones,
    /// How many days a counter keeps its day counts and visitor sketches (`EDGECOUNT_DAYS`).
    pub days_kept: i32,
}

impl Config {
    /// Reads the configuration from the Worker's vars.
    ///
    /// # Errors
    /// [`ApiError::Misconfigured`] when a var is present but malformed: better to refuse every
    /// request than to place keys on the wrong shards.
    pub fn from_env(env: &Env) -> Result<Self, ApiError> {
        // Tokens belong in secrets (`wrangler secret put`), other settings in `[vars]`: the runtime
        // hands both to the worker as the same kind of string binding, read here in one lookup.
        let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
        let shards = parse_number(var("EDGECOUNT_SHARDS"), DEFAULT_SHARDS, 1..=MAX_SHARDS)
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_SHARDS" })?;
        // The count being left must differ from the count being reached.
        let shards_from = match var("EDGECOUNT_SHARDS_FROM").filter(|v| !v.trim().is_empty()) {
            None => None,
            raw => Some(
                parse_number(raw, 0, 1..=MAX_SHARDS)
                    .filter(|&from| from != shards)
                    .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_SHARDS_FROM" })?,
            ),
        };
        let hand_over_keys =
            parse_number(var("EDGECOUNT_HAND_OVER_KEYS"), DEFAULT_HAND_OVER_KEYS, 1..=100_000)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_HAND_OVER_KEYS" })?;
        let shard_cache_bytes =
            parse_number(var("EDGECOUNT_SHARD_CACHE_BYTES"), DEFAULT_SHARD_CACHE_BYTES, 1..=u64::MAX)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_SHARD_CACHE_BYTES" })?;
        let shard_cache_entries =
            parse_number(var("EDGECOUNT_SHARD_CACHE_ENTRIES"), DEFAULT_SHARD_CACHE_ENTRIES, 1..=1_000_000)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_SHARD_CACHE_ENTRIES" })?;
        let hot_threshold_per_s =
            parse_number(var("EDGECOUNT_HOT_THRESHOLD"), DEFAULT_HOT_THRESHOLD_PER_S, 0.0..=1e9)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_HOT_THRESHOLD" })?;
        let hot_max_age_s = parse_number(var("EDGECOUNT_HOT_MAX_AGE"), DEFAULT_HOT_MAX_AGE_S, 0..=86_400)
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_HOT_MAX_AGE" })?;
        let private_reads = is_set(var("EDGECOUNT_PRIVATE_READS"));
        let access = AccessPolicy::parse(
            var("EDGECOUNT_ADMIN_TOKENS").as_deref(),
            var("EDGECOUNT_WRITE_TOKENS").as_deref(),
            var("EDGECOUNT_READ_TOKENS").as_deref(),
            private_reads,
        )
        .and_then(|policy| policy.with_count_tokens(var("EDGECOUNT_COUNT_TOKENS").as_deref()))
        .map_err(|_| ApiError::Misconfigured { var: "EDGECOUNT_*_TOKENS" })?
        .with_public_namespaces(var("EDGECOUNT_PUBLIC_NAMESPACES").as_deref())
        .map_err(|_| ApiError::Misconfigured { var: "EDGECOUNT_PUBLIC_NAMESPACES" })?
        .with_open_asked(is_set(var("EDGECOUNT_OPEN")));
        // Where anyone may count, each visitor is limited unless the operator says otherwise.
        let default_rate = if access.public_namespaces().is_empty() { 0 } else { DEFAULT_PUBLIC_RATE_LIMIT };
        let per_second = parse_number(var("EDGECOUNT_RATE_LIMIT"), default_rate, 0..=1_000_000)
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_RATE_LIMIT" })?;
        let burst = parse_number(var("EDGECOUNT_RATE_BURST"), per_second.saturating_mul(2), 1..=10_000_000)
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_RATE_BURST" })?;
        let rate_limit = NonZeroU32::new(per_second)
            .map(|per_second| RateLimit { per_second, burst: NonZeroU32::new(burst).unwrap_or(per_second) });
        // Any client may read visitors, and a read of many days may merge a sketch a day on
        // its shard: limited unless the operator turns limits off by name, in a bucket of its
        // own, so that no count or other read ever waits for one.
        let visitors_rate_limit = if per_second == 0 && var("EDGECOUNT_RATE_LIMIT").is_some() {
            None
        } else {
            let (per_second, burst) = rate_limit
                .map_or((DEFAULT_PUBLIC_RATE_LIMIT, DEFAULT_PUBLIC_RATE_LIMIT), |limit| {
                    (limit.per_second.get(), limit.burst.get())
                });
            NonZeroU32::new(per_second).map(|per_second| RateLimit {
                per_second,
                burst: NonZeroU32::new(burst.saturating_mul(VISITOR_READS_BURST)).unwrap_or(per_second),
            })
        };
        let stats_max_age_ms =
            parse_number(var("EDGECOUNT_STATS_MAX_AGE_MS"), DEFAULT_STATS_MAX_AGE_MS, 0..=60_000)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_STATS_MAX_AGE_MS" })?;
        let shard_queue_limit =
            parse_number(var("EDGECOUNT_SHARD_QUEUE_LIMIT"), DEFAULT_SHARD_QUEUE_LIMIT, 1..=1_000_000)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_SHARD_QUEUE_LIMIT" })?;
        let one_way = OneWayLimits {
            // Up to 60 s was once allowed: a longer interval is taken as the longest that works,
            // rather than refusing every request of a deployment that still sets one.
            interval_ms: parse_number(
                var("EDGECOUNT_ONE_WAY_INTERVAL_MS"),
                DEFAULT_ONE_WAY.interval_ms,
                10..=60_000,
            )
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_ONE_WAY_INTERVAL_MS" })?
            .min(MAX_ONE_WAY_INTERVAL_MS),
            flush_ops: parse_number(
                var("EDGECOUNT_ONE_WAY_FLUSH_OPS"),
                DEFAULT_ONE_WAY.flush_ops,
                1..=1_000_000,
            )
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_ONE_WAY_FLUSH_OPS" })?,
            flush_keys: DEFAULT_ONE_WAY.flush_keys,
            max_keys: parse_number(var("EDGECOUNT_ONE_WAY_KEYS"), DEFAULT_ONE_WAY.max_keys, 0..=1_000_000)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_ONE_WAY_KEYS" })?,
            max_bytes: parse_number(
                var("EDGECOUNT_ONE_WAY_BYTES"),
                DEFAULT_ONE_WAY.max_bytes,
                0..=256 * 1024 * 1024,
            )
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_ONE_WAY_BYTES" })?,
        };
        let relays = parse_number(var("EDGECOUNT_RELAYS"), 0, 0..=MAX_RELAYS)
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_RELAYS" })?;
        let relay_keys =
            parse_number(var("EDGECOUNT_RELAY_KEYS"), DEFAULT_RELAY.max_keys, MAX_FLUSH_KEYS..=1_000_000)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_RELAY_KEYS" })?;
        let relay = OneWayLimits {
            interval_ms: parse_number(
                var("EDGECOUNT_RELAY_INTERVAL_MS"),
                DEFAULT_RELAY.interval_ms,
                10..=MAX_RELAY_INTERVAL_MS,
            )
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_RELAY_INTERVAL_MS" })?,
            // A relay holds its sums for its whole window, and sends them in flushes of
            // `MAX_FLUSH_KEYS` keys when it is over, or once half its room is taken.
            flush_keys: relay_keys / 2,
            max_keys: relay_keys,
            max_bytes: parse_number(
                var("EDGECOUNT_RELAY_BYTES"),
                DEFAULT_RELAY.max_bytes,
                1..=MAX_RELAY_BYTES,
            )
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_RELAY_BYTES" })?,
            ..DEFAULT_RELAY
        };
        // An empty relay must be able to take any flush an isolate makes, or that flush would be
        // refused for as long as it is sent.
        if relays > 0 && relay.max_bytes < one_way.max_bytes {
            return Err(ApiError::Misconfigured { var: "EDGECOUNT_RELAY_BYTES" });
        }
        let zones =
            Zones::parse(var("EDGECOUNT_TIME_ZONE").as_deref(), var("EDGECOUNT_TIME_ZONES").as_deref())
                .map_err(|_| ApiError::Misconfigured { var: "EDGECOUNT_TIME_ZONE(S)" })?;
        let days_kept = parse_number(var("EDGECOUNT_DAYS"), DEFAULT_DAYS_KEPT, 1..=MAX_DAYS_KEPT)
            .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_DAYS" })?;
        let compat_mode = Mode::parse(var("EDGECOUNT_COMPAT").as_deref())
            .map_err(|_| ApiError::Misconfigured { var: "EDGECOUNT_COMPAT" })?;
        let compat_ttl_seconds =
            parse_number(var("EDGECOUNT_COMPAT_TTL"), DEFAULT_KEY_TTL_SECONDS, 1..=MAX_TTL_SECONDS)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_COMPAT_TTL" })?;
        let stream_keepalive_s =
            parse_number(var("EDGECOUNT_STREAM_KEEPALIVE"), DEFAULT_STREAM_KEEPALIVE_S, 1..=300)
                .ok_or(ApiError::Misconfigured { var: "EDGECOUNT_STREAM_KEEPALIVE" })?;
        Ok(Self {
            demo: is_set(var("EDGECOUNT_DEMO")),
            stats_max_age_ms,
            stream_keepalive_s,
            zones,
            days_kept,
            compat_mode,
            compat_ttl_seconds,
            one_way,
            relays,
            relay,
            access,
            rate_limit,
            visitors_rate_limit,
            shard_queue_limit,
            shards,
            shards_from,
            hand_over_keys,
            cors_origins: parse_origins(var("EDGECOUNT_CORS_ORIGINS").as_deref()),
            shard_cache: CacheBounds { bytes: shard_cache_bytes, entries: shard_cache_entries },
            hot_threshold_per_s,
            hot_max_age_ms: hot_max_age_s * 1000,
        })
    }
}

impl Config {
    /// The change of shard count under way, if one is declared.
    #[must_use]
    pub fn migration(&self) -> Option<Migration> {
        self.shards_from.map(|from| Migration { from, to: self.shards })
    }

    /// The placement this isolate works under, as `shard-0` keeps it.
    #[must_use]
    pub fn placement(&self) -> Kept {
        Kept { shards: self.shards, from: self.shards_from }
    }

    /// Every shard that may hold keys: those of both counts while a change is under way.
    #[must_use]
    pub fn shards_holding_keys(&self) -> u32 {
        self.shards.max(self.shards_from.unwrap_or(0))
    }
}

/// `default` when the var is unset, the number when it parses within `range`, else `None`.
fn parse_number<T>(raw: Option<String>, default: T, range: std::ops::RangeInclusive<T>) -> Option<T>
where
    T: std::str::FromStr + PartialOrd,
{
    match raw {
        None => Some(default),
        Some(raw) => raw.trim().parse::<T>().ok().filter(|n| range.contains(n)),
    }
}

fn parse_origins(raw: Option<&str>) -> CorsOrigins {
    let origins: Vec<String> =
        raw.unwrap_or("*").split(',').map(str::trim).filter(|o| !o.is_empty()).map(str::to_owned).collect();
    if origins.is_empty() || origins.iter().any(|o| o == "*") {
        CorsOrigins::Any
    } else {
        CorsOrigins::List(origins)
    }
}

/// Whether a switch var is on: `1`, `true` or `yes`.
fn is_set(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_default_parse_and_range_check() {
        assert_eq!(parse_number(None, 16_u32, 1..=1024), Some(16));
        assert_eq!(parse_number(Some(" 4 ".into()), 16_u32, 1..=1024), Some(4));
        assert_eq!(parse_number(Some("0".into()), 16_u32, 1..=1024), None);
        assert_eq!(parse_number(Some("lots".into()), 16_u32, 1..=1024), None);
    }

    #[test]
    fn origins_default_to_any() {
        assert_eq!(parse_origins(None), CorsOrigins::Any);
        assert_eq!(parse_origins(Some(" ")), CorsOrigins::Any);
    }

    #[test]
    fn origins_list_is_trimmed() {
        assert_eq!(
            parse_origins(Some("https://a.example, https://b.example")),
            CorsOrigins::List(vec!["https://a.example".into(), "https://b.example".into()])
        );
    }
}
