//! What the front keeps between requests in one isolate, beside the router: its kept reads of
//! hot keys, its rate-limit buckets, the one-way writes it has accepted and not yet applied,
//! the placement it checked, and the shards' statistics it asked for. The policies live in
//! `edgecount_core::edge`; these modules keep their state in the isolate's one
//! [`state`](crate::shared::state) and reach shards through
//! [`shard_client`](crate::shared::shard_client). Nothing here uses `http/`.

pub mod hot_reads;
pub mod meter;
pub mod one_way;
pub mod placement;
pub mod shard_stats;
pub mod visitors;
