//! The CountAPI- and Abacus-compatible face: the same counters as API v1, reached the way pages,
//! badges and client libraries written for CountAPI (and its successor Abacus) reach them, so
//! such code works again by changing only its base URL.
//!
//! This module holds what those routes decide without a shard or a runtime: their names
//! ([`names`]), their query parameters ([`params`]), their answers' shapes in each
//! [`Mode`] ([`answers`]) and how a refusal reads ([`CompatError`]). A counter's own rules
//! (reset allowed, update bounds, admin key) live in its row (see
//! [`crate::shard::settings`]).

pub mod answers;
pub mod names;
pub mod params;

use crate::CoreError;

/// The update bounds of a counter created without any: CountAPI's.
pub const DEFAULT_LOWERBOUND: i64 = -1;
pub const DEFAULT_UPPERBOUND: i64 = 1;
/// How long a counter written through these routes lives after its last write unless
/// configured (`EDGECOUNT_COMPAT_TTL`): six months of 30.5 days, as CountAPI kept keys.
pub const DEFAULT_KEY_TTL_SECONDS: u32 = 183 * 24 * 60 * 60;

/// Which service's shape the routes answer where CountAPI and Abacus disagree (`/info`,
/// `/stats` and a missing key's `/get`), from `EDGECOUNT_COMPAT`. Every route of both exists in
/// every mode; only those answers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// CountAPI's fields exactly, so its strict clients (which refuse unknown fields) work.
    #[default]
    CountApi,
    /// Abacus's fields.
    Abacus,
    /// Both sets of fields in one answer, for clients that ignore what they do not know.
    Both,
}

impl Mode {
    /// Reads `EDGECOUNT_COMPAT`; unset is [`Mode::CountApi`].
    ///
    /// # Errors
    /// A description of any other value.
    pub fn parse(raw: Option<&str>) -> Result<Self, String> {
        match raw.map(str::trim) {
            None | Some("" | "countapi") => Ok(Self::CountApi),
            Some("abacus") => Ok(Self::Abacus),
            Some("both") => Ok(Self::Both),
            Some(other) => Err(format!("EDGECOUNT_COMPAT is `{other}`; use countapi, abacus or both")),
        }
    }

    #[must_use]
    pub fn countapi_fields(self) -> bool {
        self != Self::Abacus
    }

    #[must_use]
    pub fn abacus_fields(self) -> bool {
        self != Self::CountApi
    }
}

/// A refusal on the compatible routes: a status and the text of `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompatError {
    pub status: u16,
    pub message: String,
}

impl CompatError {
    #[must_use]
    pub fn new(status: u16, message: &str) -> Self {
        Self { status, message: message.to_owned() }
    }

    /// A malformed request, in the core's words.
    #[must_use]
    pub fn bad_request(error: &CoreError) -> Self {
        Self::new(400, &error.to_string())
    }

    /// Names that break the rule: CountAPI's own message.
    #[must_use]
    pub fn malformed_names() -> Self {
        Self::new(400, "Malformed Namespace/Key")
    }

    /// How a shard's refusal reads here. Statuses stay within what CountAPI clients accept
    /// (400, 403, 404, 500) except where Abacus defines its own (401, 409).
    #[must_use]
    pub fn from_core(error: &CoreError) -> Self {
        match error {
            CoreError::NotFound => Self::new(404, "Key not found"),
            CoreError::AlreadyExists => Self::new(409, "Key already exists, please use a different key."),
            CoreError::ResetDisabled | CoreError::OutOfBounds { .. } | CoreError::OwnedCounter => {
                Self::new(403, &error.to_string())
            }
            CoreError::WrongAdminKey => Self::new(401, "token is invalid"),
            CoreError::StorageUnavailable { .. } => Self::new(500, "Failed to get data. Try again later."),
            CoreError::PlacementChanged { .. }
            | CoreError::ChangeUnfinished { .. }
            | CoreError::ChangeInterrupted { .. } => Self::new(500, &error.to_string()),
            other => Self::bad_request(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_defaults_to_countapi_and_refuses_unknown_values() {
        assert_eq!(Mode::parse(None), Ok(Mode::CountApi));
        assert_eq!(Mode::parse(Some(" abacus ")), Ok(Mode::Abacus));
        assert_eq!(Mode::parse(Some("both")), Ok(Mode::Both));
        assert!(Mode::parse(Some("redis")).unwrap_err().contains("countapi, abacus or both"));
        assert!(Mode::Both.countapi_fields() && Mode::Both.abacus_fields());
        assert!(!Mode::CountApi.abacus_fields() && !Mode::Abacus.countapi_fields());
    }

    #[test]
    fn refusals_keep_to_the_statuses_clients_know() {
        let status = |e: CoreError| CompatError::from_core(&e).status;
        assert_eq!(status(CoreError::NotFound), 404);
        assert_eq!(status(CoreError::AlreadyExists), 409);
        assert_eq!(status(CoreError::ResetDisabled), 403);
        assert_eq!(status(CoreError::OutOfBounds { lower: -1, upper: 1 }), 403);
        assert_eq!(status(CoreError::NoAdminKey), 400);
        assert_eq!(status(CoreError::WrongAdminKey), 401);
        assert_eq!(status(CoreError::Overflow), 400);
        assert_eq!(status(CoreError::StorageUnavailable { detail: "x".into() }), 500);
        assert_eq!(status(CoreError::PlacementChanged { kept: 4, configured: 7 }), 500);
    }
}
