//! Why a shard's part in a change of the shard count failed, as a type: each caller of
//! [`super::hand_over`] tells a storage failure from a shard that did not answer or broke the
//! protocol, and the text goes to the rejection (and the operator's logs) only at the edge.

use std::fmt;

use edgecount_core::shard::migration::{Migration, OutOfProtocol, MAX_PARCELS_PER_CALL};
use edgecount_core::{ShardId, StorageError};
use wasm_bindgen::prelude::JsValue;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReshardingError {
    /// This shard's storage failed.
    Storage(StorageError),
    /// Another shard's parcels broke the hand-over's protocol.
    OutOfProtocol(OutOfProtocol),
    /// A call between shards carried what does not read as `what`.
    Malformed { what: &'static str, detail: String },
    /// More keys asked for in one hand-over call than [`MAX_PARCELS_PER_CALL`].
    TooManyKeys(usize),
    /// This shard is not under the change the other shard named (or another interrupted it).
    NotUnderChange(Migration),
    /// A key's old home did not hand it over.
    NotHandedOver { old_home: ShardId, detail: String },
    /// A key's new home did not take the keys sent to it.
    NotTaken { new_home: ShardId, keys: usize },
    /// The alarm that reclaims what arrived could not be set (the keys stay arrived).
    AlarmUnset,
    /// A call to another shard failed otherwise: what failed.
    Call(&'static str),
}

impl fmt::Display for ReshardingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Storage(error) => write!(f, "storage failed: {error}"),
            Self::OutOfProtocol(error) => write!(f, "{error}"),
            Self::Malformed { what, detail } => write!(f, "malformed {what}: {detail}"),
            Self::TooManyKeys(asked) => {
                write!(f, "{asked} keys asked for, at most {MAX_PARCELS_PER_CALL} per hand-over")
            }
            Self::NotUnderChange(change) => {
                write!(f, "this shard is not under the change from {} to {} shards", change.from, change.to)
            }
            Self::NotHandedOver { old_home, detail } => {
                write!(f, "shard {old_home} handed nothing over: {detail}")
            }
            Self::NotTaken { new_home, keys } => write!(f, "shard {new_home} did not take {keys} keys"),
            Self::AlarmUnset => write!(f, "setting the alarm failed"),
            Self::Call(what) => write!(f, "{what}"),
        }
    }
}

impl From<StorageError> for ReshardingError {
    fn from(error: StorageError) -> Self {
        Self::Storage(error)
    }
}

impl From<OutOfProtocol> for ReshardingError {
    fn from(error: OutOfProtocol) -> Self {
        Self::OutOfProtocol(error)
    }
}

impl From<ReshardingError> for JsValue {
    fn from(error: ReshardingError) -> Self {
        JsValue::from_str(&error.to_string())
    }
}
