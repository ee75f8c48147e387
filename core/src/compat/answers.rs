//! The bodies of the compatible routes whose shape depends on the [`Mode`]: `/info`, `/stats`
//! and a missing key's `/get`.

use serde_json::{json, Map, Value};

use crate::compat::Mode;
use crate::shard::protocol::{Commands, CounterInfo};
use crate::{Key, Namespace};

/// `/get` of a key that does not exist (404): CountAPI's `{"value": null}`, Abacus's error.
#[must_use]
pub fn missing_value(mode: Mode) -> Value {
    let mut body = Map::new();
    if mode.countapi_fields() {
        body.insert("value".into(), Value::Null);
    }
    if mode.abacus_fields() {
        body.insert("error".into(), json!("Key not found"));
    }
    Value::Object(body)
}

/// `/info` of a live counter, at `now_ms`.
#[must_use]
pub fn info(mode: Mode, ns: &Namespace, key: &Key, info: &CounterInfo, now_ms: u64) -> Value {
    let left_ms = info.expires_at_ms.map(|at| at.saturating_sub(now_ms));
    let mut body = Map::new();
    if mode.countapi_fields() {
        body.insert("namespace".into(), json!(ns.as_str()));
        body.insert("key".into(), json!(key.as_str()));
        // -1: never expires (a counter written through API v1 without a TTL).
        body.insert("ttl".into(), left_ms.map_or(json!(-1), |ms| json!(ms)));
        // 0: stored before creation times were kept.
        body.insert("created".into(), json!(info.created_ms.unwrap_or(0)));
        body.insert("update_lowerbound".into(), json!(info.update_lowerbound));
        body.insert("update_upperbound".into(), json!(info.update_upperbound));
        body.insert("enable_reset".into(), json!(info.enable_reset));
    }
    body.insert("value".into(), json!(info.value));
    if mode.abacus_fields() {
        abacus_info(&mut body, ns, key, !info.has_admin_key, left_ms, true);
    }
    Value::Object(body)
}

/// `/info` of a key that does not exist: 404 in CountAPI's shape, Abacus's `exists: false`
/// with value -1 in its own (answered 200 in [`Mode::Abacus`]).
#[must_use]
pub fn missing_info(mode: Mode, ns: &Namespace, key: &Key) -> (u16, Value) {
    if !mode.abacus_fields() {
        return (404, json!({"error": "Key not found"}));
    }
    let mut body = Map::new();
    if mode.countapi_fields() {
        body.insert("error".into(), json!("Key not found"));
    }
    body.insert("value".into(), json!(-1));
    abacus_info(&mut body, ns, key, true, None, false);
    (if mode == Mode::Abacus { 200 } else { 404 }, Value::Object(body))
}

fn abacus_info(
    body: &mut Map<String, Value>,
    ns: &Namespace,
    key: &Key,
    genuine: bool,
    left_ms: Option<u64>,
    exists: bool,
) {
    body.insert("full_key".into(), json!(format!("K:{ns}:{key}")));
    body.insert("is_genuine".into(), json!(genuine));
    // Redis's TTL convention, which Abacus passes on: -1 never expires, -2 does not exist.
    let expires_in = match (exists, left_ms) {
        (false, _) => json!(-2),
        (true, None) => json!(-1),
        (true, Some(ms)) => json!(ms as f64 / 1000.0),
    };
    body.insert("expires_in".into(), expires_in);
    body.insert("expires_str".into(), json!(left_ms.map_or_else(|| "-1s".to_owned(), duration_text)));
    body.insert("exists".into(), json!(exists));
}

/// A duration written as Go writes one (`4391h59m58.5s`), as Abacus's `expires_str` is.
#[must_use]
pub fn duration_text(ms: u64) -> String {
    let (hours, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let seconds = if rest % 1000 == 0 {
        format!("{}", rest / 1000)
    } else {
        format!("{}.{:03}", rest / 1000, rest % 1000).trim_end_matches('0').to_owned()
    };
    match (hours, minutes) {
        (0, 0) if ms < 1000 && ms > 0 => format!("{ms}ms"),
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

/// What `/stats` reports, summed over the shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Live counters.
    pub keys: u64,
    /// Ops the shards ran since they started.
    pub ops: u64,
    /// Calls the shards answered since they started.
    pub calls: u64,
    /// Expired counters and entries reclaimed since the shards started.
    pub reclaimed: u64,
    /// Reads, increments and creates the shards ran since they started.
    pub commands: Commands,
}

/// `/stats`: CountAPI's four fields, Abacus's that edgecount can fill, or both.
#[must_use]
pub fn stats(mode: Mode, totals: &Totals, version: &str, uptime_ms: u64) -> Value {
    let mut body = Map::new();
    if mode.countapi_fields() {
        body.insert("keys_created".into(), json!(totals.keys));
        body.insert("keys_updated".into(), json!(totals.ops));
        body.insert("requests".into(), json!(totals.calls));
    }
    body.insert("version".into(), json!(version));
    if mode.abacus_fields() {
        body.insert("total_keys".into(), json!(totals.keys));
        body.insert("expired_keys__since_restart".into(), json!(totals.reclaimed));
        body.insert("uptime".into(), json!(go_duration(uptime_ms)));
        let Commands { reads, increments, creates } = totals.commands;
        body.insert(
            "commands".into(),
            json!({"total": totals.ops, "get": reads, "hit": increments, "create": creates}),
        );
    }
    Value::Object(body)
}

/// Abacus's `/healthcheck`: `uptime` as Go prints a duration, as Abacus's does.
#[must_use]
pub fn healthcheck(uptime_ms: u64) -> Value {
    json!({"status": "ok", "uptime": go_duration(uptime_ms)})
}

/// `ms` as Go's `time.Duration.String` prints it at millisecond precision: `0s`, `250ms`,
/// `1.5s`, `2m3.25s`, `1h0m0s`.
#[must_use]
pub fn go_duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let (hours, minutes) = (ms / 3_600_000, ms / 60_000 % 60);
    let (seconds, millis) = (ms / 1_000 % 60, ms % 1_000);
    let fraction = format!(".{millis:03}");
    let fraction = fraction.trim_end_matches('0').trim_end_matches('.');
    let seconds = format!("{seconds}{fraction}s");
    match (hours, minutes) {
        (0, 0) => seconds,
        (0, _) => format!("{minutes}m{seconds}"),
        _ => format!("{hours}h{minutes}m{seconds}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (Namespace, Key) {
        (Namespace::new("blog").unwrap(), Key::new("home").unwrap())
    }

    fn counter() -> CounterInfo {
        CounterInfo {
            value: 5,
            version: 2,
            created_ms: Some(1_000),
            expires_at_ms: Some(61_000),
            enable_reset: true,
            update_lowerbound: -3,
            update_upperbound: 9,
            has_admin_key: true,
        }
    }

    fn field_names(value: &Value) -> Vec<&str> {
        let mut names: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn countapi_info_has_exactly_countapis_fields() {
        let (ns, key) = names();
        let body = info(Mode::CountApi, &ns, &key, &counter(), 1_000);
        assert_eq!(
            field_names(&body),
            [
                "created",
                "enable_reset",
                "key",
                "namespace",
                "ttl",
                "update_lowerbound",
                "update_upperbound",
                "value"
            ]
        );
        assert_eq!((body["ttl"].as_u64(), body["created"].as_u64()), (Some(60_000), Some(1_000)));
        assert_eq!(
            (body["update_lowerbound"].as_i64(), body["enable_reset"].as_bool()),
            (Some(-3), Some(true))
        );
    }

    #[test]
    fn abacus_info_has_abacus_fields_and_both_has_the_union() {
        let (ns, key) = names();
        let body = info(Mode::Abacus, &ns, &key, &counter(), 1_000);
        assert_eq!(
            field_names(&body),
            ["exists", "expires_in", "expires_str", "full_key", "is_genuine", "value"]
        );
        assert_eq!(body["full_key"], "K:blog:home");
        assert_eq!(body["is_genuine"], false);
        assert_eq!(body["expires_in"], 60.0);
        assert_eq!(body["expires_str"], "1m0s");
        assert_eq!(field_names(&info(Mode::Both, &ns, &key, &counter(), 1_000)).len(), 13);
        let (status, missing) = missing_info(Mode::Abacus, &ns, &key);
        assert_eq!(
            (status, &missing["value"], &missing["exists"], &missing["expires_in"]),
            (200, &json!(-1), &json!(false), &json!(-2))
        );
        assert_eq!(missing_info(Mode::CountApi, &ns, &key).0, 404);
        assert_eq!(missing_info(Mode::Both, &ns, &key).0, 404);
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(duration_text(0), "0s");
        assert_eq!(duration_text(250), "250ms");
        assert_eq!(duration_text(1_500), "1.5s");
        assert_eq!(duration_text(61_000), "1m1s");
        assert_eq!(duration_text(183 * 24 * 3_600_000), "4392h0m0s");
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        let printed: Vec<String> =
            [0, 250, 1_000, 1_500, 61_250, 3_600_000, 3_723_004].into_iter().map(go_duration).collect();
        assert_eq!(printed, ["0s", "250ms", "1s", "1.5s", "1m1.25s", "1h0m0s", "1h2m3.004s"]);
        assert_eq!(healthcheck(2_000), json!({"status": "ok", "uptime": "2s"}));
    }

    #[test]
    fn stats_and_missing_values_follow_the_mode() {
        let commands = Commands { reads: 4, increments: 5, creates: 1 };
        let totals = Totals { keys: 3, ops: 10, calls: 7, reclaimed: 1, commands };
        assert_eq!(
            field_names(&stats(Mode::CountApi, &totals, "1", 0)),
            ["keys_created", "keys_updated", "requests", "version"]
        );
        let abacus = stats(Mode::Abacus, &totals, "1", 61_500);
        assert_eq!(abacus["commands"], json!({"total": 10, "get": 4, "hit": 5, "create": 1}));
        assert_eq!(abacus["uptime"], "1m1.5s");
        assert_eq!(missing_value(Mode::CountApi), json!({"value": null}));
        assert_eq!(missing_value(Mode::Abacus), json!({"error": "Key not found"}));
    }
}
