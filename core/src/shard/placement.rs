//! The shard count keys were placed under, remembered so that a changed `EDGECOUNT_SHARDS` is
//! refused instead of silently reading zeros, and a declared change is let through.
//!
//! A key's shard depends on the count (`jump_consistent_hash(hash, N)`): under another count
//! about (N'-N)/N' of the keys map to shards that never held them, where they read 0 and start
//! again. The first shard (`shard-0`) keeps the count the deployment first ran with; every
//! isolate compares its own count with it once, before its first request touches a shard. A
//! change is declared with `EDGECOUNT_SHARDS_FROM` (see [`crate::shard::migration`]) and kept
//! as such until a deployment without it says the change is over.

use serde::{Deserialize, Serialize};

use crate::shard::migration::Migration;
use crate::CoreError;

/// A placement: the count keys are placed under and, while a change is under way, the count
/// being left. Both what `shard-0` keeps and what an isolate is configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub shards: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
}

impl Kept {
    /// A placement with no change under way.
    #[must_use]
    pub fn settled(shards: u32) -> Self {
        Self { shards, from: None }
    }
}

/// What the keeper of the placement does with an isolate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Keep this placement from now on: the first one, or a declared change starting (or
    /// starting again: see [`check`]).
    Remember(Kept),
    /// The change `kept` was under is declared over: keep `settled` once every shard has
    /// handed over the keys that left it (else nothing may be read or written).
    Finish { change: Migration, settled: Kept },
    /// The isolate may go on and nothing changes: the same placement, or an isolate of the
    /// deployment being left while a change is under way.
    Agrees,
}

/// Compares the kept placement (if any) with an isolate's.
///
/// # Errors
/// [`CoreError::PlacementChanged`] when the isolate's count is neither the kept one nor a
/// declared change from it: nothing may be read or written.
pub fn check(kept: Option<Kept>, configured: Kept) -> Result<Placement, CoreError> {
    let Some(kept) = kept else { return Ok(Placement::Remember(configured)) };
    if kept == configured {
        return Ok(Placement::Agrees);
    }
    let answer = match configured.from {
        Some(from) if kept == Kept::settled(from) => Some(Placement::Remember(configured)),
        // A change already declared over, declared again (a rollback to the release that
        // declared it, or one of its isolates still running): the shards take it up again
        // under that release, so it is kept as under way again, for the next deployment
        // without the var to declare over once more. Kept as over, nothing would ever tell the
        // shards, and they would refuse every op once the var was gone.
        Some(from) if kept == Kept::settled(configured.shards) && from != configured.shards => {
            Some(Placement::Remember(configured))
        }
        None if kept.shards == configured.shards => kept.from.map(|from| Placement::Finish {
            change: Migration { from, to: kept.shards },
            settled: configured,
        }),
        None if kept.from == Some(configured.shards) => Some(Placement::Agrees),
        _ => None,
    };
    answer.ok_or(CoreError::PlacementChanged { kept: kept.shards, configured: configured.shards })
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn moving(from: u32, shards: u32) -> Kept {
        Kept { shards, from: Some(from) }
    }

    #[test]
    fn the_first_count_is_kept_and_a_silent_change_refused() {
        assert_eq!(check(None, Kept::settled(16)), Ok(Placement::Remember(Kept::settled(16))));
        assert_eq!(check(Some(Kept::settled(16)), Kept::settled(16)), Ok(Placement::Agrees));
        let refused = check(Some(Kept::settled(4)), Kept::settled(7)).unwrap_err();
        assert_eq!(refused, CoreError::PlacementChanged { kept: 4, configured: 7 });
        assert!(refused.to_string().contains("EDGECOUNT_SHARDS=4"), "{refused}");
        assert!(refused.to_string().contains("EDGECOUNT_SHARDS=7"), "{refused}");
        assert!(refused.to_string().contains("EDGECOUNT_SHARDS_FROM=4"), "{refused}");
    }

    #[test]
    fn a_declared_change_starts_only_from_the_kept_count() {
        assert_eq!(check(Some(Kept::settled(4)), moving(4, 7)), Ok(Placement::Remember(moving(4, 7))));
        assert_eq!(check(Some(moving(4, 7)), moving(4, 7)), Ok(Placement::Agrees));
        assert!(check(Some(Kept::settled(4)), moving(5, 7)).is_err());
        // Another change while one is under way is refused, turning it back included: keys not
        // yet moved would be looked for at homes that never held them.
        assert!(check(Some(moving(4, 7)), moving(7, 9)).is_err());
        assert!(check(Some(moving(4, 7)), moving(7, 4)).is_err());
    }

    #[test]
    fn the_deployment_being_left_goes_on_until_the_change_is_declared_over() {
        assert_eq!(check(Some(moving(4, 7)), Kept::settled(4)), Ok(Placement::Agrees));
        assert_eq!(
            check(Some(moving(4, 7)), Kept::settled(7)),
            Ok(Placement::Finish { change: Migration { from: 4, to: 7 }, settled: Kept::settled(7) })
        );
        assert!(check(Some(Kept::settled(7)), Kept::settled(4)).is_err());
        // A change already declared over, declared again, is under way again until a deployment
        // without the var declares it over again.
        assert_eq!(check(Some(Kept::settled(7)), moving(4, 7)), Ok(Placement::Remember(moving(4, 7))));
        assert_eq!(
            check(Some(moving(4, 7)), Kept::settled(7)),
            Ok(Placement::Finish { change: Migration { from: 4, to: 7 }, settled: Kept::settled(7) })
        );
    }
}
