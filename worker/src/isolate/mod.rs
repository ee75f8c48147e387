//! What one worker isolate keeps between requests: its configuration, its kept reads of hot
//! keys, its rate-limit buckets, the calls under way to each shard and the one-way writes it
//! has accepted and not yet applied. The policies live in `edgecount_core::edge`; these
//! modules keep their state in the isolate's one [`state`] and reach the runtime, and
//! [`tasks`] turns Rust futures into what the runtime takes.

pub mod clock;
pub mod config;
pub mod drills;
pub mod hash_seed;
pub mod hot_reads;
pub mod meter;
pub mod one_way;
pub mod placement;
pub mod shard_client;
pub mod shard_stats;
pub mod state;
pub mod tasks;
pub mod visitors;
