//! Micro-benchmarks of the core's per-request hot paths: what one request costs in the worker
//! (names, placement, query and batch codecs, hot-key and edge-cache bookkeeping, the rate
//! limiter, the badge) and in a shard (running an op on its in-memory tables).
//!
//! The worker runs this code as Wasm in V8, where it is slower than natively, so the same
//! benchmark is built for `wasm32-wasip1` too and run under Node's WASI; `scripts/bench-core.mjs`
//! runs both and prints the two side by side. Inputs are built outside the timed closures, so
//! each figure is the cost of the one call a request makes.

use std::hint::black_box;
use std::num::NonZeroU32;

use criterion::{criterion_group, criterion_main, Criterion};
use edgecount_core::edge::rate_limit::{ClientId, ClientLimiter, RateLimit};
use edgecount_core::edge::read_cache::CachedRead;
use edgecount_core::http::badge;
use edgecount_core::http::batch::{parse_batch, result_json};
use edgecount_core::http::query::CounterQuery;
use edgecount_core::partition::key_hash;
use edgecount_core::shard::memory_store::MemoryStore;
use edgecount_core::{
    shard_for, CacheBounds, EdgeCache, HotKeys, Key, Namespace, OpResult, ShardCall, ShardEngine, ShardOp,
    ShardRequest,
};
use serde_json::{json, Value};

/// Some fixed moment, in ms since the epoch: the core takes time as an argument.
const NOW_MS: u64 = 1_700_000_000_000;

fn names(ns: &str, key: &str) -> (Namespace, Key) {
    (Namespace::new(ns).unwrap(), Key::new(key).unwrap())
}

/// A batch body of `n` ops as clients send them: mostly increments, some reads and sets.
fn batch_body(n: usize) -> String {
    let ops: Vec<Value> = (0..n)
        .map(|i| match i % 5 {
            0 => json!({"op": "get", "ns": "pages", "key": format!("page/{i}")}),
            1 => json!({"op": "set", "ns": "pages", "key": format!("page/{i}"), "value": i}),
            2 => json!({"op": "incr", "ns": "pages", "key": format!("page/{i}"), "by": 2, "ttl": 3600}),
            _ => json!({"op": "incr", "ns": "clicks", "key": format!("button-{i}")}),
        })
        .collect();
    json!({ "ops": ops }).to_string()
}

fn bench_names(c: &mut Criterion) {
    c.bench_function("namespace_new", |b| b.iter(|| Namespace::new(black_box("site-1.pages"))));
    c.bench_function("key_from_segment", |b| {
        b.iter(|| Key::from_segment(black_box("blog%2F2024%2Fcaf%C3%A9-opening")))
    });
    let (ns, key) = names("site-1.pages", "blog/2024/café-opening");
    c.bench_function("shard_for_16", |b| b.iter(|| shard_for(black_box(&ns), black_box(&key), 16)));
}

fn bench_codecs(c: &mut Criterion) {
    c.bench_function("counter_query_parse", |b| {
        b.iter(|| CounterQuery::parse(black_box("by=5&ttl=3600&consistency=strong&_=1712345678")))
    });
    let body = batch_body(50);
    c.bench_function("parse_batch_50", |b| b.iter(|| parse_batch(black_box(&body))));
    // The worker turns each result into JSON and sends them all as one body.
    let results: Vec<OpResult> = (0..50)
        .map(|i| OpResult::Value { value: i * 1_000_003, exists: true, version: i as u64 + 1 })
        .collect();
    c.bench_function("result_json_50", |b| {
        b.iter(|| {
            let encoded: Vec<Value> = black_box(&results).iter().map(result_json).collect();
            json!({ "results": encoded }).to_string()
        })
    });
    c.bench_function("badge_render", |b| {
        b.iter(|| {
            badge::render_with_text_color(black_box("views"), black_box(1_234_567), black_box("#4c1"), "#fff")
        })
    });
}

fn bench_shard(c: &mut Criterion) {
    let store = MemoryStore::default();
    // The engine's own work: a write's transaction is SQLite's in the worker, and this store's
    // way of undoing one (a copy of every table) would be most of what is measured.
    store.without_rollback.set(true);
    let mut engine = ShardEngine::new(CacheBounds { bytes: 64 * 1024 * 1024, entries: 50_000 });
    let (ns, key) = names("pages", "page/12345");
    let call = ShardCall {
        op: ShardOp::Incr { ns, key, by: 1, ttl: None },
        idempotency_key: None,
        operator: false,
        visit: None,
        count_visitor: false,
    };
    let request = ShardRequest { ops: vec![call], answer_budget: None, receipt: None, placed: None };
    // The counter is then in the table, as a counter in use is.
    let first = engine.run(&store, &request, NOW_MS).response.results;
    assert!(matches!(first[..], [OpResult::Value { exists: true, .. }]));
    // A one-op request, as a shard runs each single-key call.
    c.bench_function("engine_incr", |b| b.iter(|| engine.run(&store, black_box(&request), NOW_MS)));
}

fn bench_edge(c: &mut Criterion) {
    // One key read 1000 times a second: over the default threshold of 50/s, so hot.
    let mut hot = HotKeys::new(50.0, 1_000, 32);
    let (ns, key) = names("pages", "page/12345");
    let mut now = NOW_MS;
    // Each scenario is checked before it is timed, so a name never describes another path.
    for _ in 0..100 {
        now += 1;
        hot.record(&ns, &key, key_hash(ns.as_str(), key.as_str()), now);
    }
    assert!(hot.is_hot(key_hash(ns.as_str(), key.as_str()), now));
    c.bench_function("hot_keys_record_hot", |b| {
        b.iter(|| {
            now += 1;
            hot.record(&ns, &key, key_hash(ns.as_str(), key.as_str()), now)
        })
    });
    // 4096 keys taking turns at the same total rate: each is cold, the common case.
    let mut cold = HotKeys::new(50.0, 1_000, 32);
    let keys: Vec<(Namespace, Key)> = (0..4096).map(|i| names("pages", &format!("page/{i}"))).collect();
    let (mut i, mut now) = (0, NOW_MS);
    let mut record_cold = || {
        let (ns, key) = &keys[i % keys.len()];
        i += 1;
        now += 1;
        cold.record(ns, key, key_hash(ns.as_str(), key.as_str()), now)
    };
    assert!(!(0..2 * keys.len()).any(|_| record_cold()));
    c.bench_function("hot_keys_record_cold", |b| {
        b.iter(&mut record_cold);
    });
    // A full edge cache (as the worker sizes it) answering a hit.
    let mut cache = EdgeCache::new(10_000, 1_000);
    for i in 0..10_000 {
        let (ns, key) = names("pages", &format!("page/{i}"));
        let read = CachedRead { value: i, exists: true, version: 1, read_at_ms: NOW_MS };
        cache.put(&ns, &key, read);
    }
    let (ns, key) = names("pages", "page/4242");
    assert!(cache.get(&ns, &key, NOW_MS + 500).is_some());
    c.bench_function("edge_cache_get_hit", |b| b.iter(|| cache.get(black_box(&ns), &key, NOW_MS + 500)));
    // 100 requests/s with a burst of 200, one request every 10 ms: allowed every time.
    let limit = RateLimit { per_second: NonZeroU32::new(100).unwrap(), burst: NonZeroU32::new(200).unwrap() };
    let mut limiter = ClientLimiter::new(limit);
    let client = ClientId::token("bench-token");
    let mut now = NOW_MS;
    let mut check = || {
        now += 10;
        limiter.check(black_box(client), 1, now)
    };
    assert!((0..1_000).all(|_| check().allowed));
    c.bench_function("rate_limit_check", |b| b.iter(&mut check));
}

criterion_group!(benches, bench_names, bench_codecs, bench_shard, bench_edge);
criterion_main!(benches);
