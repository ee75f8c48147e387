//! Fuzzes the `POST /v1/batch` body codec, [`parse_batch`]: the largest piece of client JSON
//! the service reads, with up to [`MAX_BATCH_OPS`] ops each validated on its own.
//!
//! Beyond "never panics" it checks the limits the codec promises (never more than
//! [`MAX_BATCH_OPS`] entries, TTLs and cache values in bounds, an idempotency key only on a
//! write), that every accepted op survives the JSON the worker sends it to its shard in, and
//! that every refused op can be reported back to the client.
#![no_main]

use edgecount_core::http::batch::{error_json, parse_batch, MAX_BATCH_OPS};
use edgecount_core::number::MAX_TTL_SECONDS;
use edgecount_core::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use edgecount_core::shard::content_type::MAX_CONTENT_TYPE_LEN;
use edgecount_core::{ShardCall, ShardOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(entries) = parse_batch(text) else { return };
    assert!(entries.len() <= MAX_BATCH_OPS);
    for entry in &entries {
        match entry {
            Ok(call) => check_call(call),
            Err(error) => {
                let _ = error_json(error.code(), &error.to_string());
            }
        }
    }
});

fn check_call(call: &ShardCall) {
    if call.idempotency_key.is_some() {
        assert!(call.op.is_write(), "{call:?}");
    }
    let ttl = match &call.op {
        ShardOp::Incr { ttl, .. } | ShardOp::Decr { ttl, .. } | ShardOp::Set { ttl, .. } => *ttl,
        ShardOp::CachePut { value, content_type, ttl, .. } => {
            assert!(value.len() <= MAX_CACHE_VALUE_BYTES);
            // It will be sent back as a header: no line break or control character, bounded.
            let content_type = content_type.as_str();
            assert!(!content_type.is_empty() && content_type.len() <= MAX_CONTENT_TYPE_LEN);
            assert!(content_type.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)));
            *ttl
        }
        _ => None,
    };
    if let Some(ttl) = ttl {
        assert!((1..=MAX_TTL_SECONDS).contains(&ttl));
    }
    let json = serde_json::to_string(call).unwrap();
    let back: ShardCall = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
    assert_eq!(&back, call);
}
