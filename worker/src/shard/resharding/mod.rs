//! A change of the shard count, online: everything a shard does while keys move between the
//! shards of the old count and the new, and nothing it does otherwise. A shard under no
//! declared change never calls into this module but for [`HandOverState::open`], which tells
//! it so; a reader of the steady path can skip it whole.
//!
//! - [`hand_over`]: the shard's part in a change (taking keys over before a write, reading
//!   where a key is held, forwarding a call placed under the other count, handing its leaving
//!   keys over from its alarm), over the steps of [`edgecount_core::shard::migration`];
//! - [`state`]: where the shard is in the change, kept beside its other state;
//! - [`store`]: what it stores for it (parcels, arrival marks, how far its hand-overs got).
//!
//! Operators start and finish a change as `docs/operations.md` says; the guarantees (no
//! acknowledged write lost, reads never of a stale copy) are on `docs/moving.md`.

pub mod error;
pub mod hand_over;
pub mod state;
pub mod store;

pub use error::ReshardingError;
pub use state::HandOverState;
