//! What a worker isolate decides on its own, before or after a shard call: which keys are hot
//! and what a read may serve from memory, how concurrent calls to one shard merge, what one-way
//! writes wait to be applied, who may do what (tokens), and how fast a client may go (rate
//! limits).

pub mod access;
pub mod bots;
pub mod hot_keys;
pub mod one_way;
pub mod rate_limit;
pub mod read_cache;
pub mod single_flight;
