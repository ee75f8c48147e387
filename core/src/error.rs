//! Every way the core refuses an operation, each with a stable snake_case code for the API, and
//! the storage failure a shard's stores answer.

use serde::{Deserialize, Serialize};

/// An operation the core refuses. The worker maps each variant to an HTTP status in one place;
/// the code and message travel to clients unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum CoreError {
    #[error("The namespace {reason}.")]
    InvalidNamespace { reason: String },
    #[error("The key {reason}.")]
    InvalidKey { reason: String },
    #[error("The parameter `{name}` must be a whole number, like 1 or -5.")]
    InvalidNumber { name: String },
    #[error("The parameter `{name}` was given more than once.")]
    DuplicateParameter { name: String },
    #[error("The parameter `{name}` must be {expected}.")]
    InvalidParameter { name: String, expected: String },
    #[error("The TTL must be a whole number of seconds from 1 to {max}.")]
    InvalidTtl { max: u32 },
    #[error("The request body {reason}.")]
    InvalidBody { reason: String },
    #[error("The result would not fit in a signed 64-bit integer, so nothing was changed.")]
    Overflow,
    #[error("No live entry has this key.")]
    NotFound,
    #[error("The value is larger than the limit of {limit_bytes} bytes.")]
    EntryTooLarge { limit_bytes: u64 },
    #[error(
        "The answer would carry more than {limit_bytes} bytes of cache values and days, so this \
         read was left out; read it on its own or in a later batch."
    )]
    AnswerTooLarge { limit_bytes: u64 },
    #[error("A batch may hold at most {max} ops.")]
    TooManyOps { max: usize },
    #[error("The op {reason}.")]
    InvalidOp { reason: String },
    #[error("The content type {reason}.")]
    InvalidContentType { reason: String },
    #[error("An Idempotency-Key must be 1 to {max} visible ASCII characters.")]
    InvalidIdempotencyKey { max: usize },
    #[error("This Idempotency-Key was already used for a different request.")]
    IdempotencyMismatch,
    #[error("A counter with this name already exists.")]
    AlreadyExists,
    #[error("This counter was created without `enable_reset`, so its value cannot be set.")]
    ResetDisabled,
    #[error("The amount must lie from {lower} to {upper}, the update bounds this counter was created with.")]
    OutOfBounds { lower: i64, upper: i64 },
    #[error("This counter was created without an admin key, so it cannot be changed with one.")]
    NoAdminKey,
    #[error("The admin key is not this counter's.")]
    WrongAdminKey,
    #[error(
        "This counter has an owner: only its admin key (POST /set, /update, /reset or /delete with \
         ?token=) or an operator's token may set, lower, delete or give it a TTL; anyone may add to it."
    )]
    OwnedCounter,
    #[error(
        "The keys were placed under EDGECOUNT_SHARDS={kept}, but this deployment says \
         EDGECOUNT_SHARDS={configured}; nothing was read or written. Set it back to {kept}, or declare \
         the change with EDGECOUNT_SHARDS_FROM={kept} so that the keys move with it (see \"Changing \
         the number of shards\" in docs/operations.md)."
    )]
    PlacementChanged { kept: u32, configured: u32 },
    #[error(
        "The change of shard count from {from} to {to} is declared over, but {unfinished} of the \
         shards still hold keys to move; nothing was read or written. Keep \
         EDGECOUNT_SHARDS_FROM={from} until keys_to_move in /v1/stats is 0."
    )]
    ChangeUnfinished { from: u32, to: u32, unfinished: u32 },
    #[error(
        "This shard is in the middle of the change of shard count from {from} to {to}, which this \
         deployment does not declare; nothing was read or written. Set EDGECOUNT_SHARDS={to} and \
         EDGECOUNT_SHARDS_FROM={from} back until keys_to_move in /v1/stats is 0."
    )]
    ChangeInterrupted { from: u32, to: u32 },
    /// Storage failed; `detail` is for the operator's logs, never shown to clients.
    #[error("The shard could not reach its storage, so nothing was changed; retry shortly.")]
    StorageUnavailable { detail: String },
}

impl CoreError {
    /// A storage failure; its detail goes to the operator's logs only.
    #[must_use]
    pub fn storage(error: StorageError) -> Self {
        Self::StorageUnavailable { detail: error.detail }
    }

    /// What the operator's logs should say: a storage failure's own detail, else the message.
    #[must_use]
    pub fn detail(&self) -> String {
        match self {
            Self::StorageUnavailable { detail } => detail.clone(),
            other => other.to_string(),
        }
    }

    /// The stable code clients match on, e.g. `invalid_key`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidNamespace { .. } => "invalid_namespace",
            Self::InvalidKey { .. } => "invalid_key",
            Self::InvalidNumber { .. } => "invalid_number",
            Self::DuplicateParameter { .. } => "duplicate_parameter",
            Self::InvalidParameter { .. } => "invalid_parameter",
            Self::InvalidTtl { .. } => "invalid_ttl",
            Self::InvalidBody { .. } => "invalid_body",
            Self::Overflow => "overflow",
            Self::NotFound => "not_found",
            Self::EntryTooLarge { .. } | Self::AnswerTooLarge { .. } => "payload_too_large",
            Self::TooManyOps { .. } => "too_many_ops",
            Self::InvalidOp { .. } => "invalid_op",
            Self::InvalidContentType { .. } => "invalid_content_type",
            Self::InvalidIdempotencyKey { .. } => "invalid_idempotency_key",
            Self::IdempotencyMismatch => "idempotency_mismatch",
            Self::AlreadyExists => "already_exists",
            Self::ResetDisabled => "reset_disabled",
            Self::OutOfBounds { .. } => "out_of_bounds",
            Self::NoAdminKey => "no_admin_key",
            Self::WrongAdminKey => "wrong_admin_key",
            Self::OwnedCounter => "forbidden",
            Self::PlacementChanged { .. }
            | Self::ChangeUnfinished { .. }
            | Self::ChangeInterrupted { .. } => "misconfigured",
            Self::StorageUnavailable { .. } => "storage_unavailable",
        }
    }

    /// Whether the refusal may pass, so that the same op sent again later may be applied:
    /// storage failing, or a change of shard count the operator is to finish.
    #[must_use]
    pub fn may_pass(&self) -> bool {
        matches!(
            self,
            Self::StorageUnavailable { .. }
                | Self::ChangeInterrupted { .. }
                | Self::ChangeUnfinished { .. }
                | Self::PlacementChanged { .. }
        )
    }

    /// Whether the request was well formed but cannot be applied (HTTP 422) rather than
    /// malformed (HTTP 400).
    #[must_use]
    pub fn is_semantic(&self) -> bool {
        matches!(self, Self::Overflow | Self::IdempotencyMismatch)
    }
}

/// A storage failure, as the store describes it (SQLite's message, say): what every store trait
/// of a shard answers, and what [`CoreError::StorageUnavailable`] carries to the operator's logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct StorageError {
    detail: String,
}

/// What a shard's stores answer.
pub type StoreResult<T> = Result<T, StorageError>;

impl From<String> for StorageError {
    fn from(detail: String) -> Self {
        Self { detail }
    }
}

impl From<&str> for StorageError {
    fn from(detail: &str) -> Self {
        Self { detail: detail.to_owned() }
    }
}

/// Its description, for a failure that may be other than storage's too (a malformed hand-over
/// call, a shard that did not answer), which travels as text.
impl From<StorageError> for String {
    fn from(error: StorageError) -> Self {
        error.detail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_tag_matches_code() {
        let errors = [
            CoreError::InvalidKey { reason: "is empty".into() },
            CoreError::Overflow,
            CoreError::InvalidTtl { max: 10 },
        ];
        for error in errors {
            let json = serde_json::to_value(&error).unwrap();
            assert_eq!(json["code"], error.code());
            let back: CoreError = serde_json::from_value(json).unwrap();
            assert_eq!(back, error);
        }
    }

    #[test]
    fn a_storage_failure_keeps_its_text() {
        let error = StorageError::from("SQLITE_FULL: database or disk is full");
        assert_eq!(error.to_string(), "SQLITE_FULL: database or disk is full");
        assert_eq!(CoreError::storage(error.clone()).detail(), "SQLITE_FULL: database or disk is full");
        assert_eq!(String::from(error), "SQLITE_FULL: database or disk is full");
    }

    #[test]
    fn messages_are_sentences() {
        let message = CoreError::InvalidKey { reason: "is empty".into() }.to_string();
        assert_eq!(message, "The key is empty.");
    }
}
