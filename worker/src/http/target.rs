//! The key a request names: its namespace and key validated once, from the path, with the shard
//! that owns them. The router resolves it and hands it to the handlers, so names are checked in
//! one place and every answer on a key's route can name its shard.

use edgecount_core::{shard_for, CoreError, Key, Namespace, ShardId};

use crate::shared::api_error::ApiError;
use crate::shared::config::Config;

/// A validated key and the shard that owns it.
#[derive(Clone)]
pub struct Target {
    pub ns: Namespace,
    pub key: Key,
    pub shard: ShardId,
}

impl Target {
    /// Validates the raw (percent-encoded) names of a path.
    pub fn from_path(config: &Config, raw_ns: &str, raw_key: &str) -> Result<Self, ApiError> {
        Ok(Self::new(config, Namespace::new(raw_ns)?, Key::from_segment(raw_key)?))
    }

    /// Names already validated, with the shard that owns them.
    pub fn new(config: &Config, ns: Namespace, key: Key) -> Self {
        let shard = shard_for(&ns, &key, config.shards);
        Self { ns, key, shard }
    }
}

/// A clearer error than 404 for counter paths with an empty namespace or key, which the router
/// cannot match because its parameters are never empty.
#[must_use]
pub fn unmatched_path_error(path: &str) -> Option<ApiError> {
    let rest = path.strip_prefix("/v1/counters/").or_else(|| path.strip_prefix("/v1/cache/"))?;
    let mut segments = rest.split('/');
    let ns = segments.next().unwrap_or_default();
    let key = segments.next();
    if let Err(error) = Namespace::new(ns) {
        return Some(error.into());
    }
    match (key, segments.next()) {
        (Some(""), None | Some("incr" | "decr")) => {
            Some(CoreError::InvalidKey { reason: "is empty".to_owned() }.into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_names_get_name_errors() {
        assert_eq!(unmatched_path_error("/v1/counters//k").unwrap().code(), "invalid_namespace");
        assert_eq!(unmatched_path_error("/v1/counters/ns/").unwrap().code(), "invalid_key");
        assert_eq!(unmatched_path_error("/v1/counters/ns//incr").unwrap().code(), "invalid_key");
        assert!(unmatched_path_error("/v1/counters/ns/k/zzz").is_none());
        assert!(unmatched_path_error("/v1/other").is_none());
        assert_eq!(unmatched_path_error("/v1/cache/ns/").unwrap().code(), "invalid_key");
    }
}
