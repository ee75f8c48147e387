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
//! The steady path's one way in is [`run`], for a call that finds a change under way.
//!
//! Operators start and finish a change as `docs/operations.md` says; the guarantees (no
//! acknowledged write lost, reads never of a stale copy) are on `docs/moving.md`.

pub mod error;
pub mod hand_over;
pub mod state;
pub mod store;

use std::rc::Rc;

use edgecount_core::shard::protocol::{OpResult, ShardRequest, ShardResponse};
use edgecount_core::CoreError;
use wasm_bindgen::prelude::JsValue;

pub use error::ReshardingError;
pub use state::HandOverState;

use crate::shard::object::{rejected, ShardObject};
use crate::shared::tasks;
use hand_over::Route;

/// Runs a call that is not on the steady path (a change of count declared or left
/// interrupted, or a sender placing keys under another count): here, refused, or after the
/// hand-overs it needs. Answers its JSON response, or a promise of it.
pub fn run(object: &Rc<ShardObject>, request: ShardRequest) -> JsValue {
    match hand_over::route(object, &request) {
        Ok(Route::Here) => object.answer(&request),
        Ok(Route::Refused(error)) => {
            let results = vec![OpResult::Failed { error }; request.ops.len()];
            serde_json::to_string(&ShardResponse { results })
                .map_or_else(|e| rejected(CoreError::storage(e.to_string().into())), JsValue::from)
        }
        Ok(Route::AfterHandOvers) => {
            let object = Rc::clone(object);
            tasks::run(async move { hand_over::run_placed(&object, request).await.map(JsValue::from) })
        }
        Err(detail) => rejected(CoreError::storage(detail.to_string().into())),
    }
}
