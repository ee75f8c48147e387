//! Why a shard refused a call, as a typed value: it crosses the Durable Object RPC boundary as
//! the rejection's message, in JSON, and is read back whole on the other side instead of being
//! taken apart from a text.
//!
//! Every refusal a caller acts on travels so (a placement that differs, a change of count not
//! finished or under way, a stream refused). Any other rejection is a failure of the call, which
//! the caller treats as unavailable or of unknown outcome whatever its text says: that text is
//! for the operator's logs.

use serde::{Deserialize, Serialize};

use crate::CoreError;

/// A shard's refusal of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "refused", rename_all = "snake_case")]
pub enum Refusal {
    /// The core's refusal: a bad name, a counter that does not exist, storage failing, a
    /// placement that differs from the kept one, a change of shard count not finished.
    Core { error: CoreError },
    /// The shard serves no more streams, in all or to this client.
    TooManyStreams,
    /// The shard count is changing, so no export or import can be taken now.
    ChangeUnderWay,
    /// The call's writes are stored, but the alarm that reclaims what they stored (lapsed keys,
    /// a finished day's salt) could not be set: the caller must never take the call as one that
    /// applied nothing. The shard's next call, of any kind, sets the alarm.
    StoredWithoutAlarm,
    /// The shard has as many ops waiting for its next group as it takes: nothing was applied,
    /// and the caller should back off before trying again.
    Overloaded,
}

impl From<CoreError> for Refusal {
    fn from(error: CoreError) -> Self {
        Self::Core { error }
    }
}

impl Refusal {
    /// The refusal as a rejection's message.
    #[must_use]
    pub fn message(&self) -> String {
        // A refusal holds only strings and numbers, which always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The refusal a rejection's message carries, if it carries one: the runtime may put the
    /// error's name before it, so the JSON is read from its first `{`.
    #[must_use]
    pub fn from_message(message: &str) -> Option<Self> {
        serde_json::from_str(&message[message.find('{')?..]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_back_whole_from_its_message_even_behind_an_error_name() {
        let refusals = [
            Refusal::from(CoreError::ChangeUnfinished { from: 8, to: 16, unfinished: 3 }),
            Refusal::from(CoreError::PlacementChanged { kept: 8, configured: 16 }),
            Refusal::from(CoreError::NotFound),
            Refusal::from(CoreError::StorageUnavailable { detail: "disk: full {really}".into() }),
            Refusal::TooManyStreams,
            Refusal::ChangeUnderWay,
            Refusal::StoredWithoutAlarm,
        ];
        for refusal in refusals {
            assert_eq!(Refusal::from_message(&refusal.message()), Some(refusal.clone()));
            let wrapped = format!("Error: {}", refusal.message());
            assert_eq!(Refusal::from_message(&wrapped), Some(refusal));
        }
    }

    #[test]
    fn a_message_that_is_no_refusal_reads_as_none() {
        for message in ["", "the shard did not answer in time", "Error: {\"refused\": \"nonsense\"}", "{"] {
            assert_eq!(Refusal::from_message(message), None, "{message}");
        }
    }
}
