//! The `POST /v1/batch` codec: the HTTP form of pipelining.
//!
//! The body is `{"ops": [...]}` with at most [`MAX_BATCH_OPS`] ops. Each op is read on its own,
//! so one malformed op becomes an error in its place and the others still run; only a body
//! that is not such an object at all is refused whole. Results come back in request order,
//! each a result or an `{"error": ...}` of its own.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::http::body::from_json_object;
use crate::names::IdempotencyKey;
use crate::number::{i64_from_json, ttl_from_json};
use crate::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use crate::shard::content_type::{self, ContentType};
use crate::shard::protocol::{OpKind, OpResult, ShardCall, ShardOp};
use crate::{CoreError, Key, Namespace};

/// Most ops in one batch.
pub const MAX_BATCH_OPS: usize = 1000;
/// Largest batch body: room for 1000 ops carrying a few KiB each.
pub const MAX_BATCH_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Content type of a cache value put through a batch, unless the op names one.
pub const DEFAULT_BATCH_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody<'a> {
    #[serde(borrow)]
    ops: Vec<&'a RawValue>,
}

/// One op as sent, before validation. A struct rather than a map so that a repeated or unknown
/// field is refused instead of silently read one way.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    op: String,
    ns: String,
    key: String,
    by: Option<Value>,
    value: Option<Value>,
    ttl: Option<Value>,
    content_type: Option<String>,
    idempotency_key: Option<String>,
    unique: Option<bool>,
}

/// Parses a batch body into one call or error per entry, in order.
///
/// # Errors
/// [`CoreError::InvalidBody`] when the body is not `{"ops": [...]}`,
/// [`CoreError::TooManyOps`] past [`MAX_BATCH_OPS`].
pub fn parse_batch(text: &str) -> Result<Vec<Result<ShardCall, CoreError>>, CoreError> {
    let body: BatchBody<'_> = from_json_object(text).map_err(|e| CoreError::InvalidBody {
        reason: format!("must be a JSON object like {{\"ops\": [...]}} ({})", short(&e)),
    })?;
    if body.ops.len() > MAX_BATCH_OPS {
        return Err(CoreError::TooManyOps { max: MAX_BATCH_OPS });
    }
    Ok(body.ops.iter().map(|raw| parse_op(raw.get())).collect())
}

fn parse_op(text: &str) -> Result<ShardCall, CoreError> {
    let mut raw: RawOp = from_json_object(text)
        .map_err(|e| CoreError::InvalidOp { reason: format!("is malformed ({})", short(&e)) })?;
    let idempotency_key = raw.idempotency_key.take().map(|k| IdempotencyKey::new(&k)).transpose()?;
    let count_visitor = raw.unique.take().unwrap_or(false);
    if count_visitor && raw.op != "incr" {
        return Err(CoreError::InvalidOp { reason: "takes `unique` on `incr` alone".to_owned() });
    }
    let op = parse_raw_op(raw)?;
    if count_visitor && matches!(op, ShardOp::Incr { by, .. } if by <= 0) {
        return Err(CoreError::InvalidOp {
            reason: "takes `unique` with a positive `by` alone: a visitor is counted by a count".to_owned(),
        });
    }
    if idempotency_key.is_some() && !op.is_write() {
        return Err(CoreError::InvalidOp {
            reason: "is a read, which takes no `idempotency_key`".to_owned(),
        });
    }
    Ok(ShardCall { op, idempotency_key, operator: false, visit: None, count_visitor })
}

fn parse_raw_op(raw: RawOp) -> Result<ShardOp, CoreError> {
    let ns = Namespace::new(&raw.ns)?;
    let key = Key::new(&raw.key)?;
    let Some(kind) = OpKind::batched_from_name(&raw.op) else {
        return Err(CoreError::InvalidOp {
            reason: format!("`{}` is not one of {}", raw.op, OpKind::names()),
        });
    };
    let present = [
        ("by", raw.by.is_some()),
        ("value", raw.value.is_some()),
        ("ttl", raw.ttl.is_some()),
        ("content_type", raw.content_type.is_some()),
    ];
    if let Some((field, _)) = present.iter().find(|(f, p)| *p && !kind.spec().fields.contains(f)) {
        return Err(CoreError::InvalidOp { reason: format!("`{}` does not take `{field}`", raw.op) });
    }
    let content_type = raw.content_type.as_deref().map(ContentType::new).transpose()?;
    let ttl = ttl_from_json(raw.ttl.as_ref())?;
    let by = raw.by.as_ref().map_or(Ok(1), |v| i64_from_json("by", v))?;
    Ok(match kind {
        OpKind::Get => ShardOp::Get { ns, key },
        OpKind::Delete => ShardOp::Delete { ns, key },
        OpKind::CacheGet => ShardOp::CacheGet { ns, key },
        OpKind::CacheDelete => ShardOp::CacheDelete { ns, key },
        OpKind::Incr => ShardOp::Incr { ns, key, by, ttl },
        OpKind::Decr => ShardOp::Decr { ns, key, by, ttl },
        OpKind::Set => {
            let value = raw.value.as_ref().ok_or_else(|| missing("value"))?;
            ShardOp::Set { ns, key, value: i64_from_json("value", value)?, ttl }
        }
        OpKind::CachePut => {
            let Some(Value::String(text)) = raw.value else {
                return Err(CoreError::InvalidOp {
                    reason: "`cache_put` needs `value` as a string".to_owned(),
                });
            };
            if text.len() > MAX_CACHE_VALUE_BYTES {
                return Err(CoreError::EntryTooLarge { limit_bytes: MAX_CACHE_VALUE_BYTES as u64 });
            }
            let content_type = match content_type {
                Some(content_type) => content_type,
                None => ContentType::new(DEFAULT_BATCH_CONTENT_TYPE)?,
            };
            ShardOp::CachePut { ns, key, value: text.into_bytes(), content_type, ttl }
        }
        // Not batchable: `batched_from_name` never names them.
        OpKind::Create | OpKind::Guarded | OpKind::Info | OpKind::Days => {
            return Err(CoreError::InvalidOp {
                reason: format!("`{}` is not one of {}", raw.op, OpKind::names()),
            })
        }
    })
}

fn missing(field: &str) -> CoreError {
    CoreError::InvalidOp { reason: format!("needs `{field}`") }
}

fn short(error: &serde_json::Error) -> String {
    let text = error.to_string();
    text.find(" at line ").map_or(text.clone(), |cut| text[..cut].to_owned())
}

/// An error as it appears in a batch's results (and, whole, in an error response).
#[must_use]
pub fn error_json(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}

/// A result as it appears in a batch's results. Cache values that are UTF-8 come back as
/// `value`, others as `value_base64`; the content type is the one a `GET` would answer with.
#[must_use]
pub fn result_json(result: &OpResult) -> Value {
    match result {
        OpResult::Value { value, exists, .. } => json!({"value": value, "exists": exists}),
        OpResult::Deleted { deleted } => json!({"deleted": deleted}),
        OpResult::Stored => json!({"stored": true}),
        OpResult::Entry { value, content_type } => match std::str::from_utf8(value) {
            Ok(text) => json!({"value": text, "content_type": content_type::served(content_type)}),
            Err(_) => json!({
                "value_base64": STANDARD.encode(value),
                "content_type": content_type::served(content_type),
            }),
        },
        OpResult::Failed { error } => error_json(error.code(), &error.to_string()),
        // Batches carry no guarded or info op (see `OpSpec::batched`); shown plainly all the same.
        OpResult::Changed { old_value, value, .. } => {
            json!({"old_value": old_value, "value": value, "exists": true})
        }
        OpResult::Created { value, .. } => json!({"value": value, "exists": true}),
        OpResult::Info(info) => json!(info),
        OpResult::Days(days) => json!(days),
        // Only a relay answers it, to an isolate's flush; never part of a batch.
        OpResult::Relayed => json!({"accepted": true}),
        OpResult::Replayed { first } => {
            let mut answer = result_json(first);
            if let Value::Object(fields) = &mut answer {
                fields.insert("replayed".to_owned(), Value::Bool(true));
            }
            answer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<Result<&'static str, &'static str>> {
        parse_batch(text)
            .unwrap()
            .iter()
            .map(|r| match r {
                Ok(call) => Ok(if call.op.is_write() { "write" } else { "read" }),
                Err(e) => Err(e.code()),
            })
            .collect()
    }

    #[test]
    fn unique_is_taken_on_a_positive_incr_alone_and_asks_the_worker_to_count_the_visitor() {
        let text = r#"{"ops": [
            {"op": "incr", "ns": "n", "key": "k", "unique": true},
            {"op": "incr", "ns": "n", "key": "k"},
            {"op": "decr", "ns": "n", "key": "k", "unique": true},
            {"op": "incr", "ns": "n", "key": "k", "unique": "yes"},
            {"op": "incr", "ns": "n", "key": "k", "by": -3, "unique": true},
            {"op": "incr", "ns": "n", "key": "k", "by": 0, "unique": true},
            {"op": "incr", "ns": "n", "key": "k", "by": 2, "unique": true}
        ]}"#;
        let parsed = parse_batch(text).unwrap();
        assert!(parsed[0].as_ref().unwrap().count_visitor);
        assert!(!parsed[1].as_ref().unwrap().count_visitor);
        for refused in [2, 3, 4, 5] {
            assert_eq!(parsed[refused].as_ref().unwrap_err().code(), "invalid_op", "op {refused}");
        }
        assert!(parsed[6].as_ref().unwrap().count_visitor);
        // The flag never travels to a shard: the worker turns it into the visitor's hash.
        let wire = serde_json::to_value(parsed[0].as_ref().unwrap()).unwrap();
        assert!(wire.get("count_visitor").is_none());
    }

    #[test]
    fn parses_every_op_kind() {
        let text = r#"{"ops": [
            {"op": "get", "ns": "n", "key": "k"},
            {"op": "incr", "ns": "n", "key": "k", "by": 5, "ttl": 60},
            {"op": "decr", "ns": "n", "key": "k"},
            {"op": "set", "ns": "n", "key": "k", "value": -9223372036854775808},
            {"op": "delete", "ns": "n", "key": "a/b"},
            {"op": "cache_get", "ns": "n", "key": "k"},
            {"op": "cache_put", "ns": "n", "key": "k", "value": "hello", "content_type": "text/html"},
            {"op": "cache_delete", "ns": "n", "key": "k"}
        ]}"#;
        let ops: Vec<ShardOp> = parse_batch(text).unwrap().into_iter().map(|r| r.unwrap().op).collect();
        assert_eq!(ops.len(), 8);
        assert!(matches!(ops[1], ShardOp::Incr { by: 5, ttl: Some(60), .. }));
        assert!(matches!(ops[2], ShardOp::Decr { by: 1, ttl: None, .. }));
        assert!(matches!(ops[3], ShardOp::Set { value: i64::MIN, .. }));
        assert!(
            matches!(&ops[6], ShardOp::CachePut { value, content_type, .. } if value == b"hello" && content_type.as_str() == "text/html")
        );
    }

    #[test]
    fn a_bad_op_fails_alone() {
        let text = r#"{"ops": [
            {"op": "incr", "ns": "n", "key": "k"},
            {"op": "frobnicate", "ns": "n", "key": "k"},
            {"op": "incr", "ns": "bad ns", "key": "k"},
            {"op": "incr", "ns": "..", "key": "k"},
            {"op": "incr", "ns": "n", "key": ""},
            {"op": "incr", "ns": "n", "key": "k", "by": 1.5},
            {"op": "incr", "ns": "n", "key": "k", "by": 9223372036854775808},
            {"op": "get", "ns": "n", "key": "k", "by": 1},
            {"op": "set", "ns": "n", "key": "k"},
            {"op": "incr", "ns": "n", "key": "k", "by": 1, "by": 2},
            {"op": "incr", "ns": "n", "key": "k", "extra": 1},
            {"op": "cache_put", "ns": "n", "key": "k", "value": 5},
            {"op": "incr", "ns": "n", "key": "k", "ttl": 0},
            "not an object",
            {"op": "incr", "ns": "n", "key": "k", "idempotency_key": "has space"},
            {"op": "get", "ns": "n", "key": "k", "idempotency_key": "abc"},
            {"op": "incr", "ns": "n", "key": "k", "idempotency_key": "abc"},
            {"op": "get", "ns": "n", "key": "k"}
        ]}"#;
        assert_eq!(
            codes(text),
            vec![
                Ok("write"),
                Err("invalid_op"),
                Err("invalid_namespace"),
                Err("invalid_namespace"),
                Err("invalid_key"),
                Err("invalid_body"),
                Err("overflow"),
                Err("invalid_op"),
                Err("invalid_op"),
                Err("invalid_op"),
                Err("invalid_op"),
                Err("invalid_op"),
                Err("invalid_ttl"),
                Err("invalid_op"),
                Err("invalid_idempotency_key"),
                Err("invalid_op"),
                Ok("write"),
                Ok("read"),
            ]
        );
    }

    #[test]
    fn cache_put_refuses_content_types_that_are_not_header_values() {
        let long = "a".repeat(257);
        let text = serde_json::json!({"ops": [
            {"op": "cache_put", "ns": "n", "key": "k", "value": "<b>", "content_type": "text/html\r\nSet-Cookie: x=1"},
            {"op": "cache_put", "ns": "n", "key": "k", "value": "x", "content_type": "text/plain\u{0}"},
            {"op": "cache_put", "ns": "n", "key": "k", "value": "x", "content_type": long},
            {"op": "cache_put", "ns": "n", "key": "k", "value": "x", "content_type": ""},
            {"op": "cache_put", "ns": "n", "key": "k", "value": "x", "content_type": "text/plain; charset=utf-8"},
        ]})
        .to_string();
        assert_eq!(
            codes(&text),
            vec![
                Err("invalid_content_type"),
                Err("invalid_content_type"),
                Err("invalid_content_type"),
                Err("invalid_content_type"),
                Ok("write"),
            ]
        );
    }

    #[test]
    fn refuses_malformed_bodies_and_too_many_ops() {
        for bad in ["", "[]", "{}", r#"{"ops": {}}"#, r#"{"ops": [], "extra": 1}"#, "{\"ops\": ["] {
            assert_eq!(parse_batch(bad).unwrap_err().code(), "invalid_body", "{bad:?}");
        }
        let op = r#"{"op":"get","ns":"n","key":"k"}"#;
        let full = format!("{{\"ops\": [{}]}}", vec![op; MAX_BATCH_OPS].join(","));
        assert_eq!(parse_batch(&full).unwrap().len(), MAX_BATCH_OPS);
        let over = format!("{{\"ops\": [{}]}}", vec![op; MAX_BATCH_OPS + 1].join(","));
        assert_eq!(parse_batch(&over).unwrap_err(), CoreError::TooManyOps { max: MAX_BATCH_OPS });
    }

    #[test]
    fn results_encode_for_clients() {
        assert_eq!(
            result_json(&OpResult::Value { value: i64::MAX, exists: true, version: 9 }).to_string(),
            r#"{"exists":true,"value":9223372036854775807}"#
        );
        assert_eq!(
            result_json(&OpResult::Entry { value: vec![0xff], content_type: "x/y".into() }),
            json!({"value_base64": "/w==", "content_type": "x/y"})
        );
        assert_eq!(
            result_json(&OpResult::Entry { value: b"x".to_vec(), content_type: "a/b\r\nc: d".into() }),
            json!({"value": "x", "content_type": "application/octet-stream"})
        );
        assert_eq!(
            result_json(&OpResult::Failed { error: CoreError::Overflow })["error"]["code"],
            "overflow"
        );
    }
}
