//! The shard count keys were placed under, remembered so that a changed `EDGECOUNT_SHARDS` is
//! refused instead of silently reading zeros.
//!
//! A key's shard depends on the count (`jump_consistent_hash(hash, N)`): under another count
//! about (N'-N)/N' of the keys map to shards that never held them, where they read 0 and start
//! again. The first shard (`shard-0`) keeps the count the deployment first ran with; every
//! isolate compares its own count with it once, before its first request touches a shard.

use crate::CoreError;

/// What the keeper of the count does with the count an isolate was configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Nothing is kept yet: keep this count from now on.
    Remember(u32),
    /// The counts agree.
    Agrees,
}

/// Compares the kept count (if any) with an isolate's.
///
/// # Errors
/// [`CoreError::PlacementChanged`] when they differ: nothing may be read or written.
pub fn check(kept: Option<u32>, configured: u32) -> Result<Placement, CoreError> {
    match kept {
        None => Ok(Placement::Remember(configured)),
        Some(kept) if kept == configured => Ok(Placement::Agrees),
        Some(kept) => Err(CoreError::PlacementChanged { kept, configured }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_count_is_kept_and_another_refused() {
        assert_eq!(check(None, 16), Ok(Placement::Remember(16)));
        assert_eq!(check(Some(16), 16), Ok(Placement::Agrees));
        let refused = check(Some(4), 7).unwrap_err();
        assert_eq!(refused, CoreError::PlacementChanged { kept: 4, configured: 7 });
        assert!(refused.to_string().contains("EDGECOUNT_SHARDS=4"), "{refused}");
        assert!(refused.to_string().contains("EDGECOUNT_SHARDS=7"), "{refused}");
    }
}
