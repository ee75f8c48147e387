//! Every error a client can see, and the one place that maps each to an HTTP status.

use edgecount_core::edge::rate_limit::Decision;
use edgecount_core::CoreError;
use serde_json::json;

/// An error answered to a client as `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    Core(CoreError),
    RouteNotFound,
    /// No token, or an unknown one.
    Unauthorized,
    /// A token without the right for this request.
    Forbidden,
    /// No token and no public namespace is configured, and open writes were not asked for.
    NotOpen,
    /// An export or import while the shard count changes, when a key may be in two places.
    ChangeUnderWay,
    MethodNotAllowed {
        allow: &'static str,
    },
    UnsupportedMediaType {
        expected: &'static str,
    },
    PayloadTooLarge {
        limit_bytes: usize,
    },
    /// The request body stopped arriving: nothing for `idle_s` seconds.
    BodyTimeout {
        idle_s: u64,
    },
    ShardUnavailable,
    /// A write was sent to its shard but no answer came back: it may or may not have been
    /// applied, so it is safe to retry only with the same `Idempotency-Key`.
    OutcomeUnknown,
    /// The shard has more work queued than it may take; shed rather than queue without bound.
    ShardOverloaded,
    /// This isolate's one-way buffer is at its bound; nothing was accepted.
    OneWayBufferFull,
    /// The client's token bucket is empty; the decision carries the `RateLimit-*` figures.
    RateLimited(Decision),
    Misconfigured {
        var: &'static str,
    },
    /// The runtime failed in a way no request can cause; the detail goes to the logs only.
    Internal(String),
}

impl From<CoreError> for ApiError {
    fn from(error: CoreError) -> Self {
        Self::Core(error)
    }
}

impl From<worker::Error> for ApiError {
    fn from(error: worker::Error) -> Self {
        Self::Internal(error.to_string())
    }
}

impl From<edgecount_core::edge::access::Denial> for ApiError {
    fn from(denial: edgecount_core::edge::access::Denial) -> Self {
        match denial {
            edgecount_core::edge::access::Denial::Unauthenticated => Self::Unauthorized,
            edgecount_core::edge::access::Denial::Forbidden => Self::Forbidden,
            edgecount_core::edge::access::Denial::NotOpen => Self::NotOpen,
        }
    }
}

impl ApiError {
    /// The HTTP status: the single mapping from errors to statuses.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::Core(CoreError::StorageUnavailable { .. })
            | Self::ShardUnavailable
            | Self::OutcomeUnknown
            | Self::ShardOverloaded
            | Self::OneWayBufferFull => 503,
            Self::RateLimited(_) => 429,
            Self::Core(CoreError::NotFound) | Self::RouteNotFound => 404,
            Self::Core(
                CoreError::EntryTooLarge { .. }
                | CoreError::AnswerTooLarge { .. }
                | CoreError::TooManyOps { .. },
            ) => 413,
            Self::Core(
                CoreError::PlacementChanged { .. }
                | CoreError::ChangeUnfinished { .. }
                | CoreError::ChangeInterrupted { .. },
            ) => 500,
            Self::Core(CoreError::AlreadyExists) | Self::ChangeUnderWay => 409,
            Self::Core(
                CoreError::ResetDisabled | CoreError::OutOfBounds { .. } | CoreError::OwnedCounter,
            ) => 403,
            Self::Core(CoreError::WrongAdminKey) => 401,
            Self::Core(e) if e.is_semantic() => 422,
            Self::Core(_) => 400,
            Self::Unauthorized => 401,
            Self::Forbidden | Self::NotOpen => 403,
            Self::MethodNotAllowed { .. } => 405,
            Self::PayloadTooLarge { .. } => 413,
            Self::BodyTimeout { .. } => 408,
            Self::UnsupportedMediaType { .. } => 415,
            Self::Misconfigured { .. } | Self::Internal(_) => 500,
        }
    }

    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Core(e) => e.code(),
            Self::RouteNotFound => "not_found",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotOpen => "not_open",
            Self::ChangeUnderWay => "change_under_way",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::UnsupportedMediaType { .. } => "unsupported_media_type",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::BodyTimeout { .. } => "request_timeout",
            Self::ShardUnavailable => "shard_unavailable",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::ShardOverloaded => "shard_overloaded",
            Self::OneWayBufferFull => "one_way_buffer_full",
            Self::RateLimited(_) => "rate_limited",
            Self::Misconfigured { .. } => "misconfigured",
            Self::Internal(_) => "internal",
        }
    }

    #[must_use]
    pub fn message(&self) -> String {
        match self {
            Self::Core(e) => e.to_string(),
            Self::RouteNotFound => "There is no such route; see /v1/openapi.json or docs/api.md.".into(),
            Self::Unauthorized => "This needs a valid token in `Authorization: Bearer <token>`.".into(),
            Self::Forbidden => "The token does not allow this here.".into(),
            Self::ChangeUnderWay => {
                "The shard count is changing (EDGECOUNT_SHARDS_FROM is set): export and import \
                                     wait until the change is declared over."
                    .into()
            }
            Self::NotOpen => {
                "This service answers reads only: no token and no public namespace is configured, \
                              and open writes were not asked for (EDGECOUNT_OPEN=1). See docs/access.md."
                    .into()
            }
            Self::MethodNotAllowed { allow } => format!("This route only accepts {allow}."),
            Self::UnsupportedMediaType { expected } => {
                format!("The request body must be sent as {expected}.")
            }
            Self::PayloadTooLarge { limit_bytes } => {
                format!("The request body is larger than the limit of {limit_bytes} bytes.")
            }
            Self::BodyTimeout { idle_s } => {
                format!("The request body stopped arriving ({idle_s} s without a byte); nothing was changed.")
            }
            Self::ShardUnavailable => {
                "The shard that owns this key is unavailable; nothing was applied, retry shortly.".into()
            }
            Self::OutcomeUnknown => "The shard did not confirm this write, which may or may not have been \
                                     applied; retry it only with the same Idempotency-Key."
                .into(),
            Self::ShardOverloaded => {
                "The shard that owns this key is overloaded; nothing was applied, retry shortly.".into()
            }
            Self::OneWayBufferFull => "Too many one-way writes wait to be applied here; nothing was \
                                       accepted, retry shortly or send it without `Prefer: respond-async`."
                .into(),
            Self::RateLimited(decision) => format!(
                "Too many requests from this client; nothing was applied, retry in {} s.",
                decision.retry_after_s
            ),
            Self::Misconfigured { var } => {
                format!("The service is misconfigured: {var} is invalid.")
            }
            Self::Internal(_) => "The service failed unexpectedly; retry shortly.".into(),
        }
    }

    /// The error for an op whose shard call failed after it was sent: a write may have been
    /// applied before the failure (its answer lost, or too large to return), so it cannot be
    /// called safe to retry. The runtime's "overloaded" refusal comes before the shard runs
    /// anything, and a read changes nothing, so those keep their error.
    #[must_use]
    pub fn after_send(&self, is_write: bool) -> ApiError {
        match self {
            Self::ShardUnavailable | Self::Internal(_) if is_write => Self::OutcomeUnknown,
            other => other.clone(),
        }
    }

    /// Seconds a client should wait before retrying, for errors that pass (429, 503). Not for
    /// `outcome_unknown`: the write may have been applied, and generic HTTP clients retry a
    /// 503 that names a time on their own, which could apply it twice.
    #[must_use]
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            Self::RateLimited(decision) => Some(decision.retry_after_s),
            Self::OutcomeUnknown => None,
            _ => (self.status() == 503).then_some(1),
        }
    }

    /// The JSON body.
    #[must_use]
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"code": self.code(), "message": self.message()}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_design() {
        assert_eq!(ApiError::Core(CoreError::InvalidKey { reason: "x".into() }).status(), 400);
        assert_eq!(ApiError::Core(CoreError::Overflow).status(), 422);
        assert_eq!(ApiError::Core(CoreError::StorageUnavailable { detail: "x".into() }).status(), 503);
        assert_eq!(ApiError::MethodNotAllowed { allow: "GET" }.status(), 405);
        assert_eq!(ApiError::PayloadTooLarge { limit_bytes: 1 }.status(), 413);
        assert_eq!(ApiError::Core(CoreError::NotFound).status(), 404);
        assert_eq!(ApiError::Core(CoreError::PlacementChanged { kept: 4, configured: 7 }).status(), 500);
        assert_eq!(ApiError::Core(CoreError::TooManyOps { max: 1 }).status(), 413);
        assert_eq!(ApiError::Core(CoreError::EntryTooLarge { limit_bytes: 1 }).status(), 413);
    }

    #[test]
    fn only_transient_errors_ask_for_a_retry() {
        assert_eq!(ApiError::ShardUnavailable.retry_after_seconds(), Some(1));
        assert_eq!(ApiError::ShardOverloaded.retry_after_seconds(), Some(1));
        assert_eq!(ApiError::OutcomeUnknown.retry_after_seconds(), None, "the write may have been applied");
        let decision = Decision { allowed: false, limit: 5, remaining: 0, reset_s: 3, retry_after_s: 2 };
        assert_eq!(ApiError::RateLimited(decision).status(), 429);
        assert_eq!(ApiError::RateLimited(decision).retry_after_seconds(), Some(2));
        assert_eq!(ApiError::Core(CoreError::Overflow).retry_after_seconds(), None);
    }

    #[test]
    fn a_write_whose_call_failed_after_sending_has_an_unknown_outcome() {
        assert_eq!(ApiError::ShardUnavailable.after_send(true), ApiError::OutcomeUnknown);
        assert_eq!(ApiError::Internal("x".into()).after_send(true), ApiError::OutcomeUnknown);
        assert_eq!(ApiError::ShardUnavailable.after_send(false), ApiError::ShardUnavailable);
        assert_eq!(ApiError::ShardOverloaded.after_send(true), ApiError::ShardOverloaded);
        assert_eq!(ApiError::OutcomeUnknown.status(), 503);
        assert_eq!(ApiError::OutcomeUnknown.code(), "outcome_unknown");
        assert!(ApiError::OutcomeUnknown.message().contains("Idempotency-Key"));
    }

    #[test]
    fn storage_details_stay_out_of_the_message() {
        let error = ApiError::Core(CoreError::StorageUnavailable { detail: "SQLITE_FULL at /x".into() });
        assert!(!error.message().contains("SQLITE"));
    }
}
