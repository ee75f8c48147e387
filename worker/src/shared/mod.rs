//! What both the front (`http/`, `isolate/`) and the shard (`shard/`) use: the clock, the
//! configuration, the hash tables' seed, the isolate's one state, the RPC to shards, futures on
//! the runtime, the test drills, and the API's errors. It uses nothing of the front's nor of
//! the shard's, so neither side's code reaches into the other's.

pub mod api_error;
pub mod clock;
pub mod config;
pub mod drills;
pub mod hash_seed;
pub mod one_way_flusher;
pub mod shard_client;
pub mod state;
pub mod tasks;
