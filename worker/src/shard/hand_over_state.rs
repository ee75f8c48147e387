//! Where a shard is in a change of the shard count: what [`crate::shard::hand_over`] reads and
//! updates as keys arrive and leave, kept beside the shard's other state
//! ([`crate::shard::object::ShardObject`]).

use std::cell::{Cell, RefCell};

use edgecount_core::hashing::{key_set, KeySet};
use edgecount_core::shard::migration::Migration;
use edgecount_core::{Key, Namespace, ShardId};
use worker::console_error;

use crate::shard::sql_store::SqlShardStore;

/// Names read per page when counting the keys to move (as the alarm's sweep reads them).
pub(super) const SWEEP_PAGE: u64 = 500;
/// Arrived keys remembered in memory (beyond it, storage is asked again): a bound on the set.
const MAX_REMEMBERED_ARRIVALS: usize = 100_000;

/// Where a shard is in the change of count under way.
pub struct HandOverState {
    /// The change this deployment declares, if any.
    pub migration: Option<Migration>,
    /// A change this shard ran under, not declared over, that this deployment does not declare
    /// (it declares none, or another): every op is refused, and no key handed over or taken,
    /// until it is declared again or over.
    pub(super) interrupted: Cell<Option<Migration>>,
    /// This shard's index, once a caller has told it.
    pub(super) shard: Cell<Option<u32>>,
    /// Whether every key leaving this shard has been handed over.
    pub(super) done: Cell<bool>,
    /// The last name the alarm's sweep handed over or passed.
    pub(super) cursor: RefCell<Option<(String, String)>>,
    /// Keys known to have arrived here: storage need not be asked again. Every key that
    /// arrives while the object runs is added, so a key not in it arrived earlier, or not at
    /// all, unless the set was emptied since (see [`Self::forgotten`]).
    pub(super) arrived: RefCell<KeySet<(Namespace, Key)>>,
    /// How many times [`Self::arrived`] was emptied, at its bound.
    pub(super) forgotten: Cell<u64>,
    /// Keys a request is taking over here now (see [`TakeOverClaim`]): a later request that
    /// needs one waits for it instead of asking its old home for it again.
    pub(super) taking: RefCell<KeySet<(Namespace, Key)>>,
    /// Most keys one alarm hands over (`EDGECOUNT_HAND_OVER_KEYS`).
    pub(super) keys_per_alarm: usize,
    /// Keys still to leave, once counted (see [`HandOverState::keys_to_move`]).
    pub(super) leaving_left: Cell<Option<u64>>,
}

impl HandOverState {
    /// The state kept in `store` for `migration`. A change this shard ran under that was never
    /// declared over, and that this deployment does not declare (it declares none, or another),
    /// interrupts it (see [`Route::Refused`]): its arrival marks are kept, untouched, for when it
    /// is declared again. Otherwise, under a change, arrivals of any other change (one declared
    /// over) are forgotten and the change is kept as this shard's.
    ///
    /// Forgetting the marks of a change still under way would let this shard take the stale
    /// copy a key's old home still holds for the key, written (or deleted) here since it arrived.
    pub fn open(store: &SqlShardStore, migration: Option<Migration>, keys_per_alarm: usize) -> Self {
        let declared = store.declared_change().unwrap_or_else(|detail| {
            console_error!("reading the change of count this shard ran under failed: {detail}");
            None
        });
        let interrupted = declared.filter(|&declared| migration != Some(declared));
        if let (Some(migration), None) = (migration, interrupted) {
            let kept = store.settle_arrivals(migration).and_then(|()| {
                if declared == Some(migration) {
                    Ok(())
                } else {
                    store.declare_change(migration)
                }
            });
            if let Err(detail) = kept {
                console_error!("keeping the change of count failed: {detail}");
            }
        }
        let kept =
            if migration.is_some() { store.hand_overs().unwrap_or_default() } else { Default::default() };
        Self {
            migration,
            interrupted: Cell::new(interrupted),
            shard: Cell::new(kept.shard),
            done: Cell::new(migration.is_some() && kept.done == migration),
            cursor: RefCell::new(None),
            arrived: RefCell::new(key_set()),
            forgotten: Cell::new(0),
            taking: RefCell::new(key_set()),
            keys_per_alarm: keys_per_alarm.max(1),
            leaving_left: Cell::new(None),
        }
    }

    /// Forgets `change`, declared over: its arrival marks, and that this shard ran under it.
    /// A shard it interrupted takes up the change this deployment declares, if any, as one
    /// started afresh (every shard has handed `change` over by then).
    ///
    /// # Errors
    /// A storage failure.
    pub fn settle(&self, store: &SqlShardStore, change: Migration) -> Result<(), String> {
        store.settle_change(change)?;
        if self.interrupted.get() == Some(change) {
            if let Some(migration) = self.migration {
                store.settle_arrivals(migration)?;
                store.declare_change(migration)?;
            }
            self.interrupted.set(None);
        }
        Ok(())
    }

    /// Remembers this shard's index (kept in storage while a change is under way, for the
    /// alarm after a restart).
    ///
    /// # Errors
    /// A failure to store it.
    pub fn learn_shard(&self, store: &SqlShardStore, shard: u32) -> Result<(), String> {
        if self.shard.get() == Some(shard) {
            return Ok(());
        }
        if self.migration.is_some() {
            store.learn_shard(shard)?;
        }
        self.shard.set(Some(shard));
        Ok(())
    }

    /// Whether keys may still have to leave this shard.
    pub fn pending(&self) -> bool {
        self.migration.is_some() && !self.done.get() && self.interrupted.get().is_none()
    }

    /// How many keys stored here belong elsewhere under the count being reached. Counted by
    /// reading every name once per start of the object, then kept by subtracting what the
    /// sweep hands over (no key starts to leave during a change), so that `/v1/stats` stays
    /// cheap while keys move.
    ///
    /// # Errors
    /// A storage failure.
    pub fn keys_to_move(&self, store: &SqlShardStore, shard: u32) -> Result<u64, String> {
        let Some(migration) = self.migration.filter(|_| self.pending()) else { return Ok(0) };
        if let Some(left) = self.leaving_left.get() {
            return Ok(left);
        }
        let (mut after, mut leaving) = (None, 0);
        loop {
            let page = store.names_after(after.as_ref(), SWEEP_PAGE)?;
            leaving += page.names.iter().filter(|(ns, key)| migration.leaves(ShardId(shard), ns, key)).count()
                as u64;
            if !page.full {
                self.leaving_left.set(Some(leaving));
                return Ok(leaving);
            }
            after = page.last;
        }
    }

    pub(super) fn remember_arrived<'a>(&self, keys: impl IntoIterator<Item = (&'a Namespace, &'a Key)>) {
        let mut arrived = self.arrived.borrow_mut();
        for (ns, key) in keys {
            if arrived.len() >= MAX_REMEMBERED_ARRIVALS {
                arrived.clear();
                self.forgotten.set(self.forgotten.get() + 1);
            }
            arrived.insert((ns.clone(), key.clone()));
        }
    }
}

/// The keys one request is taking over, of those it needs, claimed in `taking` so that no
/// other request here asks their old homes for them meanwhile; released when the claim is
/// dropped, whether the take-over was done, failed or was abandoned with its request.
pub(super) struct TakeOverClaim<'s> {
    taking: &'s RefCell<KeySet<(Namespace, Key)>>,
    keys: Vec<(Namespace, Key)>,
}

impl<'s> TakeOverClaim<'s> {
    /// Claims those of `keys` that no other request is taking over; answers the claim and the
    /// others.
    pub(super) fn claim(
        taking: &'s RefCell<KeySet<(Namespace, Key)>>,
        keys: Vec<(Namespace, Key)>,
    ) -> (Self, Vec<(Namespace, Key)>) {
        let mut claimed = taking.borrow_mut();
        let (keys, others): (Vec<_>, Vec<_>) =
            keys.into_iter().partition(|name| claimed.insert(name.clone()));
        (Self { taking, keys }, others)
    }

    /// The keys claimed.
    pub(super) fn keys(&self) -> &[(Namespace, Key)] {
        &self.keys
    }
}

impl Drop for TakeOverClaim<'_> {
    fn drop(&mut self) {
        let mut claimed = self.taking.borrow_mut();
        for name in &self.keys {
            claimed.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(key: &str) -> (Namespace, Key) {
        (Namespace::new("moving").unwrap(), Key::new(key).unwrap())
    }

    #[test]
    fn a_key_is_claimed_by_one_take_over_at_a_time_until_its_claim_is_dropped() {
        let taking = RefCell::new(key_set());
        let (first, others) = TakeOverClaim::claim(&taking, vec![name("a"), name("b")]);
        assert_eq!(first.keys().to_vec(), vec![name("a"), name("b")]);
        assert!(others.is_empty());
        let (second, others) = TakeOverClaim::claim(&taking, vec![name("b"), name("c")]);
        assert_eq!(second.keys().to_vec(), vec![name("c")]);
        assert_eq!(others, vec![name("b")], "b is the first claim's");
        drop(first);
        let (third, others) = TakeOverClaim::claim(&taking, vec![name("a"), name("b"), name("c")]);
        assert_eq!(third.keys().to_vec(), vec![name("a"), name("b")], "released with the first claim");
        assert_eq!(others, vec![name("c")]);
        drop((second, third));
        assert!(taking.borrow().is_empty());
    }
}
