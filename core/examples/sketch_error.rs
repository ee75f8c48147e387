//! The unique-visitor sketch on a stream of N distinct visitors, as `make bench` compares it
//! with Redis's `PFADD`/`PFCOUNT` (loadtest/sketch_vs_redis.py): for each N given, one JSON
//! line with the estimate, its error and the stored bytes.
//!
//! Visitor i is the address `visitor-i` with an empty user agent, hashed as the worker and the
//! shard hash it (`edgecount_core::visits::visitor`) under one day's salt.
//!
//! Usage: `cargo run --release --example sketch_error -- 100 10000 1000000`

use edgecount_core::visits::sketch::Sketch;
use edgecount_core::visits::visitor::{visitor_hash, visitor_id};
use edgecount_core::{Key, Namespace};

fn main() {
    let (ns, key) = (Namespace::new("site").expect("a namespace"), Key::new("home").expect("a key"));
    let salt = [7u8; 32];
    for arg in std::env::args().skip(1) {
        let n: u64 = arg.parse().expect("a count of visitors");
        let mut sketch = Sketch::new();
        for i in 0..n {
            sketch.insert(visitor_id(&salt, visitor_hash(&ns, &key, &format!("visitor-{i}"), "")));
        }
        let estimate = sketch.estimate();
        let error = (estimate as f64 - n as f64) / n as f64;
        println!(
            "{{\"visitors\":{n},\"estimate\":{estimate},\"error\":{error:.6},\"bytes\":{}}}",
            sketch.to_bytes().len()
        );
    }
}
