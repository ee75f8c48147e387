//! What a shard reads for an export and stores for an import (see
//! [`edgecount_core::shard::transfer`]): pages of its names in name order with their counters
//! and cache entries, and parcels stored over whatever their names hold.

use edgecount_core::shard::cache_table::entry_charge;
use edgecount_core::shard::migration::{Parcel, ParcelEntry};
use edgecount_core::shard::transfer::{ExportPage, MAX_EXPORT_LINES, MAX_EXPORT_VALUE_BYTES};
use edgecount_core::{CoreError, Counter, CounterStore, Key, Namespace};

use crate::shard::sql_store::SqlShardStore;
use crate::shard::visit_store;

type Result<T> = edgecount_core::StoreResult<T>;

impl SqlShardStore {
    /// Up to `most` names after `after` (only those of `ns`, if given) with what they hold live
    /// at `now_ms`, and about `budget` bytes of them (one larger parcel still travels, alone):
    /// what is left of an export page's bounds.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn export_page(
        &self,
        after: Option<&(String, String)>,
        ns: Option<&str>,
        (most, budget): (u64, usize),
        now_ms: u64,
    ) -> Result<ExportPage> {
        let page = self.names_after(after, most.clamp(1, MAX_EXPORT_LINES))?;
        let names: Vec<(Namespace, Key)> =
            page.names.into_iter().filter(|(name, _)| ns.is_none_or(|ns| name.as_str() == ns)).collect();
        let fitting = self.fitting(&names, budget.min(MAX_EXPORT_VALUE_BYTES))?;
        let mut parcels = self.parcels_with(&names[..fitting])?;
        // Cut short by the budget: the next page starts after the last name carried.
        let resume_after = if parcels.len() < names.len() {
            parcels.last().map(|p| (p.ns.as_str().to_owned(), p.key.as_str().to_owned()))
        } else if page.full {
            page.last
        } else {
            None
        };
        for parcel in &mut parcels {
            parcel.counter = parcel.counter.filter(|c| !c.is_expired(now_ms));
            if parcel.counter.is_none() {
                // Days and visitors belong to a live counter: a lapsed one's go unexported.
                parcel.days.clear();
                parcel.sketches.clear();
            }
            parcel.cache = parcel.cache.take().filter(|e| e.expires_at_ms.is_none_or(|at| at > now_ms));
        }
        parcels.retain(|p| !p.holds_nothing());
        Ok(ExportPage { parcels, resume_after })
    }

    /// Stores each parcel's counter and cache entry over what its name holds (what it does not
    /// carry is left as it is), and answers the places of those refused, with why. A counter
    /// already stored goes on from its own version, so that kept reads of the old value are
    /// replaced. With `respect_owners` (an open service, where nobody is an operator) no line
    /// replaces a live counter owned by an admin key: its owner changes it with the key, through
    /// the routes. A cache entry must fit
    /// the shard's `cache_bytes` whole, and is stamped written no later than `now_ms`.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn import(
        &self,
        parcels: &[Parcel],
        respect_owners: bool,
        cache_bytes: u64,
        now_ms: u64,
    ) -> Result<Vec<(usize, CoreError)>> {
        let names: Vec<(Namespace, Key)> = parcels.iter().map(|p| (p.ns.clone(), p.key.clone())).collect();
        let stored = self.load_many(&names)?;
        let mut refused = Vec::new();
        let mut counters: Vec<(Namespace, Key, Counter)> = Vec::new();
        let mut entries: Vec<(&Parcel, ParcelEntry)> = Vec::new();
        let mut with_days: Vec<&Parcel> = Vec::new();
        for (place, (parcel, stored)) in parcels.iter().zip(stored).enumerate() {
            // A line carries an owner's key only as its hash, which an export shows to anyone
            // in an open service: it proves nothing, so no line replaces an owned counter there.
            let owned =
                stored.filter(|c| !c.is_expired(now_ms)).is_some_and(|c| c.rules().admin_key_hash.is_some());
            if respect_owners && owned && parcel.counter.is_some() {
                refused.push((place, CoreError::OwnedCounter));
                continue;
            }
            if let Some(entry) = &parcel.cache {
                let (type_bytes, value_bytes) = (entry.content_type.len() as u64, entry.value.len() as u64);
                if entry_charge(&parcel.ns, &parcel.key, type_bytes, value_bytes) > cache_bytes {
                    refused.push((place, CoreError::EntryTooLarge { limit_bytes: cache_bytes }));
                    continue;
                }
                entries.push((
                    parcel,
                    ParcelEntry { written_at_ms: entry.written_at_ms.min(now_ms), ..entry.clone() },
                ));
            }
            if let Some(mut counter) = parcel.counter {
                match stored {
                    // A lapsed counter goes first, with its days and visitors (see
                    // `visit_store`), as a write would have it go.
                    Some(stored) if stored.is_expired(now_ms) => self.remove(&parcel.ns, &parcel.key)?,
                    Some(stored) => {
                        counter.version = counter.version.max(stored.version + 1);
                        // The stored latest day stays, as a finished day, unless the line
                        // carries that day: an import replaces the days it carries.
                        let kept = stored.today.filter(|t| {
                            counter.today.is_none_or(|n| n.day != t.day)
                                && parcel.days.iter().all(|d| d.day != t.day)
                        });
                        if let Some(kept) = kept {
                            self.finish_day(&parcel.ns, &parcel.key, kept)?;
                        }
                    }
                    None => {}
                }
                counters.push((parcel.ns.clone(), parcel.key.clone(), counter));
                with_days.push(parcel);
            }
        }
        self.save_all(&counters)?;
        // Days belong to a counter: a line without one brings none.
        visit_store::save_parcel_days(self, &with_days)?;
        for (parcel, entry) in &entries {
            self.save_parcel_entry(&parcel.ns, &parcel.key, entry)
                .map_err(|detail| format!("storing a cache entry failed: {detail}"))?;
        }
        Ok(refused)
    }
}
