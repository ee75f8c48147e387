//! Configuration: the `EDGECOUNT_*` vars of `wrangler.toml`, read into one typed value.

use edgecount_core::partition::MAX_SHARDS;
use worker::Env;

use crate::api_error::ApiError;

/// Shard count used when `EDGECOUNT_SHARDS` is not set.
pub const DEFAULT_SHARDS: u32 = 16;

/// Which origins may call the API from a browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    Any,
    List(Vec<String>),
}

/// The service's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub shards: u32,
    pub cors_origins: CorsOrigins,
}

impl Config {
    /// Reads the configuration from the Worker's vars.
    ///
    /// # Errors
    /// [`ApiError::Misconfigured`] when a var is present but malformed: better to refuse every
    /// request than to place keys on the wrong shards.
    pub fn from_env(env: &Env) -> Result<Self, ApiError> {
        let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
        let shards = match var("EDGECOUNT_SHARDS") {
            None => DEFAULT_SHARDS,
            Some(raw) => raw
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_SHARDS).contains(n))
                .ok_or(ApiError::Misconfigured {
                    var: "EDGECOUNT_SHARDS",
                })?,
        };
        Ok(Self {
            shards,
            cors_origins: parse_origins(var("EDGECOUNT_CORS_ORIGINS").as_deref()),
        })
    }
}

fn parse_origins(raw: Option<&str>) -> CorsOrigins {
    let origins: Vec<String> = raw
        .unwrap_or("*")
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_owned)
        .collect();
    if origins.is_empty() || origins.iter().any(|o| o == "*") {
        CorsOrigins::Any
    } else {
        CorsOrigins::List(origins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_default_to_any() {
        assert_eq!(parse_origins(None), CorsOrigins::Any);
        assert_eq!(parse_origins(Some(" ")), CorsOrigins::Any);
    }

    #[test]
    fn origins_list_is_trimmed() {
        assert_eq!(
            parse_origins(Some("https://a.example, https://b.example")),
            CorsOrigins::List(vec!["https://a.example".into(), "https://b.example".into()])
        );
    }
}
