//! What crosses the wire to clients: request bodies, queries and batches parsed into shard ops,
//! and answers rendered (batch results, badges, entity tags). Nothing here holds state.

pub mod badge;
pub mod badge_svg;
pub mod batch;
pub mod body;
pub mod etag;
pub mod negotiate;
pub mod query;
