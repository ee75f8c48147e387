//! Where a shard is in a change of the shard count: what [`crate::shard::resharding::hand_over`] reads and
//! updates as keys arrive and leave, kept beside the shard's other state
//! ([`crate::shard::object::ShardObject`]).

use std::cell::{Cell, RefCell};

use edgecount_core::hashing::{key_map, key_set, KeyMap, KeySet};
use edgecount_core::shard::migration::{Migration, RecordsAfter};
use edgecount_core::{Key, Namespace, ShardId, StoreResult};
use worker::console_error;

use crate::shard::sql_store::SqlShardStore;

/// Names read per page when counting the keys to move (as the alarm's sweep reads them).
pub(in crate::shard) const SWEEP_PAGE: u64 = 500;
/// Arrived keys remembered in memory (beyond it, storage is asked again): a bound on the set.
const MAX_REMEMBERED_ARRIVALS: usize = 100_000;
/// Keys still arriving whose furthest stored page is remembered (beyond it, a take-over of
/// another such key starts from its first page, as after a restart): a bound on the map.
const MAX_REMEMBERED_PAGES: usize = 10_000;

/// Where a shard is in the change of count under way.
pub struct HandOverState {
    /// The change this deployment declares, if any.
    pub migration: Option<Migration>,
    /// A change this shard ran under, not declared over, that this deployment does not declare
    /// (it declares none, or another): every op is refused, and no key handed over or taken,
    /// until it is declared again or over.
    pub(in crate::shard) interrupted: Cell<Option<Migration>>,
    /// This shard's index, once a caller has told it.
    pub(in crate::shard) shard: Cell<Option<u32>>,
    /// Whether every key leaving this shard has been handed over.
    pub(in crate::shard) done: Cell<bool>,
    /// The last name the alarm's sweep handed over or passed.
    pub(in crate::shard) cursor: RefCell<Option<(String, String)>>,
    /// Keys known to have arrived here: storage need not be asked again. Every key that
    /// arrives while the object runs is added, so a key not in it arrived earlier, or not at
    /// all, unless the set was emptied since (see [`Self::forgotten`]).
    pub(in crate::shard) arrived: RefCell<KeySet<(Namespace, Key)>>,
    /// How many times [`Self::arrived`] was emptied, at its bound.
    pub(in crate::shard) forgotten: Cell<u64>,
    /// Of keys whose records arrive in pages, the last record of the furthest page stored
    /// here. Every take-over of such a key asks for the page after it, whichever take-over (or
    /// the old home's alarm) stored it: a busy key written to by many requests at once then
    /// moves as fast as one take-over, instead of each starting from the first page and sharing
    /// the old home's time until none finishes. What a stored page held stays stored until it
    /// has lapsed (a record lives at least a window from when it is stored, see
    /// `sql_store::RECORDS`), so starting after it loses nothing.
    stored_through: RefCell<KeyMap<(Namespace, Key), RecordsAfter>>,
    /// Most keys one alarm hands over (`EDGECOUNT_HAND_OVER_KEYS`).
    pub(in crate::shard) keys_per_alarm: usize,
    /// Keys still to leave, once counted (see [`HandOverState::keys_to_move`]).
    pub(in crate::shard) leaving_left: Cell<Option<u64>>,
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
            stored_through: RefCell::new(key_map()),
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
    pub fn settle(&self, store: &SqlShardStore, change: Migration) -> StoreResult<()> {
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
    pub fn learn_shard(&self, store: &SqlShardStore, shard: u32) -> StoreResult<()> {
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
    pub fn keys_to_move(&self, store: &SqlShardStore, shard: u32) -> StoreResult<u64> {
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

    /// Where a take-over of `name` goes on from, if a page of its records is stored here.
    pub(in crate::shard) fn stored_through(&self, name: &(Namespace, Key)) -> Option<RecordsAfter> {
        self.stored_through.borrow().get(name).cloned()
    }

    /// Remembers that `name`'s records are stored here through `last`, unless a further page
    /// is, the key has arrived, or the map is at its bound.
    pub(in crate::shard) fn remember_page(&self, name: &(Namespace, Key), last: RecordsAfter) {
        if self.arrived.borrow().contains(name) {
            return;
        }
        let mut stored = self.stored_through.borrow_mut();
        let room = stored.len() < MAX_REMEMBERED_PAGES;
        match stored.get_mut(name) {
            Some(furthest) if *furthest < last => *furthest = last,
            Some(_) => {}
            None if room => {
                stored.insert(name.clone(), last);
            }
            None => {}
        }
    }

    pub(in crate::shard) fn remember_arrived<'a>(
        &self,
        keys: impl IntoIterator<Item = (&'a Namespace, &'a Key)>,
    ) {
        let mut arrived = self.arrived.borrow_mut();
        let mut stored = self.stored_through.borrow_mut();
        for (ns, key) in keys {
            let name = (ns.clone(), key.clone());
            stored.remove(&name);
            if arrived.len() >= MAX_REMEMBERED_ARRIVALS {
                arrived.clear();
                self.forgotten.set(self.forgotten.get() + 1);
            }
            arrived.insert(name);
        }
    }
}
