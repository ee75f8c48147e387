//! Fuzzes the JSON of the worker-to-shard protocol: [`ShardRequest`] (what a shard reads),
//! [`ShardResponse`] and [`ShardStats`] (what the worker reads back). Both sides trust the
//! other's JSON only as far as serde checks it, so a malformed or hostile body must be refused
//! without a panic.
//!
//! Beyond "never panics" it checks that whatever is accepted is written back to JSON that reads
//! back equal (the protocol's round trip), and it runs what the worker and shard do next with
//! an accepted message: place each op on a shard, digest keyed writes, and turn each
//! result into its client form.
#![no_main]

use std::fmt::Debug;

use edgecount_core::http::batch::result_json;
use edgecount_core::partition::MAX_SHARDS;
use edgecount_core::shard::idempotency::request_digest;
use edgecount_core::shard::protocol::ShardStats;
use edgecount_core::{shard_for, ShardRequest, ShardResponse};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };

    if let Ok(request) = serde_json::from_str::<ShardRequest>(text) {
        round_trip(&request);
        for call in &request.ops {
            let (ns, key) = call.op.target();
            for shards in [1, 7, MAX_SHARDS] {
                assert!(shard_for(ns, key, shards).0 < shards);
            }
            if call.idempotency_key.is_some() {
                assert_eq!(request_digest(&call.op), request_digest(&call.op.clone()));
            }
        }
    }

    if let Ok(response) = serde_json::from_str::<ShardResponse>(text) {
        round_trip(&response);
        for result in &response.results {
            assert!(result_json(result).is_object());
        }
    }

    if let Ok(stats) = serde_json::from_str::<ShardStats>(text) {
        round_trip(&stats);
    }
});

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let json = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
    assert_eq!(&back, value);
}
