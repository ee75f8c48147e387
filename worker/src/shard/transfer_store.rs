//! What a shard reads for an export and stores for an import (see
//! [`edgecount_core::shard::transfer`]): pages of its names in name order with their counters
//! and cache entries, and parcels stored over whatever their names hold.

use edgecount_core::shard::migration::Parcel;
use edgecount_core::shard::transfer::{ExportPage, MAX_EXPORT_LINES, MAX_EXPORT_VALUE_BYTES};
use edgecount_core::{Counter, CounterStore, Key, Namespace};
use worker::SqlStorageValue;

use crate::shard::sql_store::{integer, text, SqlShardStore};

type Result<T> = std::result::Result<T, String>;

impl SqlShardStore {
    /// Up to [`MAX_EXPORT_LINES`] names after `after` (only those of `ns`, if given) with what
    /// they hold live at `now_ms`, and at most [`MAX_EXPORT_VALUE_BYTES`] of cache values.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn export_page(
        &self,
        after: Option<&(String, String)>,
        ns: Option<&str>,
        now_ms: u64,
    ) -> Result<ExportPage> {
        let page = self.names_after(after, MAX_EXPORT_LINES)?;
        let names: Vec<(Namespace, Key)> =
            page.names.into_iter().filter(|(name, _)| ns.is_none_or(|ns| name.as_str() == ns)).collect();
        let mut parcels = self.parcels_with(&names, MAX_EXPORT_VALUE_BYTES, false)?;
        // Cut short by the value budget: the next page starts after the last name carried.
        let resume_after = if parcels.len() < names.len() {
            parcels.last().map(|p| (p.ns.as_str().to_owned(), p.key.as_str().to_owned()))
        } else if page.full {
            page.last
        } else {
            None
        };
        for parcel in &mut parcels {
            parcel.counter = parcel.counter.filter(|c| !c.is_expired(now_ms));
            parcel.cache = parcel.cache.take().filter(|e| e.expires_at_ms.is_none_or(|at| at > now_ms));
        }
        parcels.retain(|p| !p.holds_nothing());
        Ok(ExportPage { parcels, resume_after })
    }

    /// Stores each parcel's counter and cache entry over what its name holds (what it does not
    /// carry is left as it is). A counter already stored goes on from its own version, so that
    /// kept reads of the old value are replaced.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn import(&self, parcels: &[Parcel]) -> Result<()> {
        let with_counters: Vec<&Parcel> = parcels.iter().filter(|p| p.counter.is_some()).collect();
        let names: Vec<(Namespace, Key)> =
            with_counters.iter().map(|p| (p.ns.clone(), p.key.clone())).collect();
        let stored = self.load_many(&names)?;
        let counters: Vec<(Namespace, Key, Counter)> = with_counters
            .iter()
            .zip(stored)
            .filter_map(|(parcel, stored)| {
                let mut counter = parcel.counter?;
                if let Some(stored) = stored {
                    counter.version = counter.version.max(stored.version + 1);
                }
                Some((parcel.ns.clone(), parcel.key.clone(), counter))
            })
            .collect();
        self.save_all(&counters).map_err(|failed| failed.detail)?;
        for parcel in parcels {
            let Some(entry) = &parcel.cache else { continue };
            self.write(
                "INSERT INTO cache_entries (ns, key, value, content_type, expires_at_ms, written_at_ms) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, \
                 content_type = excluded.content_type, expires_at_ms = excluded.expires_at_ms, \
                 written_at_ms = excluded.written_at_ms",
                vec![
                    text(parcel.ns.as_str()),
                    text(parcel.key.as_str()),
                    SqlStorageValue::Blob(entry.value.clone()),
                    text(&entry.content_type),
                    integer(entry.expires_at_ms),
                    integer(Some(entry.written_at_ms)),
                ],
            )
            .map_err(|e| format!("storing a cache entry failed: {e}"))?;
        }
        Ok(())
    }
}
