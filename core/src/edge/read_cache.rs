//! The worker isolate's cache of hot counter reads, and the max-age policy that goes with it.
//!
//! The promise: a read answered from the edge is never older than the max age M. An entry's
//! age counts from the moment the worker *sent* the shard call that produced it (the shard
//! read the value no earlier), and the `Cache-Control` sent downstream only grants what is
//! left of M, so a browser or CDN that honours it cannot stretch the bound either.
//!
//! One refresh per key at a time: once a kept read is three quarters of the max age old, the
//! next lookup claims its refresh (that request reads the shard and keeps what it gets) while
//! every other request keeps being answered from the kept read. A hot key's reads thus reach the
//! shard about once per three quarters of the max age per isolate, instead of all at once when
//! the read expires (a stampede). A claim lapses after a quarter of the max age, no earlier than
//! the read it refreshes expires, so a refresh that never comes back blocks nothing.

use lru::LruCache;

use crate::hashing::KeyHashing;
use crate::shard::protocol::{OpResult, ShardOp};
use crate::{Key, Namespace};

/// A counter read as the shard answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedRead {
    pub value: i64,
    pub exists: bool,
    pub version: u64,
    /// When the shard call that produced this read was sent, in ms since the epoch.
    pub read_at_ms: u64,
}

impl CachedRead {
    /// Age at `now_ms`.
    #[must_use]
    pub fn age_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.read_at_ms)
    }
}

/// Whether a counter read may be answered from the isolate's kept read: only for a hot key,
/// and never when the client asked for a fresh answer, with `?strong=1` or a `Cache-Control:
/// no-cache` request header (RFC 9111 5.2.1.4: the answer must be validated with the origin,
/// here the shard).
#[must_use]
pub fn may_serve_kept_read(hot: bool, strong: bool, request_cache_control: Option<&str>) -> bool {
    let no_cache = request_cache_control.is_some_and(|header| {
        header.split(',').any(|directive| directive.trim().eq_ignore_ascii_case("no-cache"))
    });
    hot && !strong && !no_cache
}

/// What an op's outcome does to the isolate's kept read of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterOp {
    /// Keep it as it is.
    Keep,
    /// Replace it with the value the write produced.
    Refresh(CachedRead),
    /// Drop it: the key was deleted, or a write's outcome is unknown.
    Forget,
}

/// The one rule, for single writes and batches alike, for what an op does to the kept read of
/// its key. `outcome` is `None` when the op's call failed, so a write may or may not have
/// happened; `sent_at_ms` is when that call was sent. Reads, refused ops and replayed answers
/// (old ones) change nothing; a counter's new value refreshes it; a delete drops it.
#[must_use]
pub fn after_op(op: &ShardOp, outcome: Option<&OpResult>, sent_at_ms: u64) -> AfterOp {
    if !op.is_write() || op.is_cache() {
        // Only counters are kept, and a read changes nothing.
        return AfterOp::Keep;
    }
    match outcome {
        None => AfterOp::Forget,
        Some(OpResult::Value { value, exists, version }) => AfterOp::Refresh(CachedRead {
            value: *value,
            exists: *exists,
            version: *version,
            read_at_ms: sent_at_ms,
        }),
        Some(OpResult::Changed { value, version, .. } | OpResult::Created { value, version, .. }) => {
            AfterOp::Refresh(CachedRead {
                value: *value,
                exists: true,
                version: *version,
                read_at_ms: sent_at_ms,
            })
        }
        Some(OpResult::Deleted { .. }) => AfterOp::Forget,
        Some(_) => AfterOp::Keep,
    }
}

/// A kept read and, if a request is refreshing it, when that request claimed the refresh.
#[derive(Debug, Clone, Copy)]
struct Kept {
    read: CachedRead,
    refresh_claimed_at_ms: Option<u64>,
}

/// What [`EdgeCache::lookup`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Answer with this read.
    Hit(CachedRead),
    /// This request refreshes the key: read the shard (and keep what it answers). Other
    /// requests are answered from the kept read meanwhile.
    Refresh,
    /// Nothing fresh enough is kept: read the shard.
    Miss,
}

/// Hot counter reads kept for at most `max_age_ms`, at most `capacity` of them.
#[derive(Debug)]
pub struct EdgeCache {
    entries: LruCache<(Namespace, Key), Kept, KeyHashing>,
    /// When each key was last forgotten (see [`Self::forget`]), at most `capacity` of them: no
    /// read sent by then may be kept again.
    forgotten: LruCache<(Namespace, Key), u64, KeyHashing>,
    capacity: usize,
    max_age_ms: u64,
}

impl EdgeCache {
    #[must_use]
    pub fn new(capacity: usize, max_age_ms: u64) -> Self {
        Self {
            entries: LruCache::unbounded_with_hasher(KeyHashing::default()),
            forgotten: LruCache::unbounded_with_hasher(KeyHashing::default()),
            capacity: capacity.max(1),
            max_age_ms,
        }
    }

    /// A read younger than the max age, if one is kept; older ones are dropped.
    pub fn get(&mut self, ns: &Namespace, key: &Key, now_ms: u64) -> Option<CachedRead> {
        self.fresh(ns, key, now_ms).map(|kept| kept.read)
    }

    /// Like [`Self::get`], and claims the key's refresh for this request once the kept read is
    /// three quarters of the max age old and nobody holds a live claim (see the module's
    /// documentation).
    pub fn lookup(&mut self, ns: &Namespace, key: &Key, now_ms: u64) -> Lookup {
        let claim_lasts_ms = self.max_age_ms / 4;
        let refresh_after_ms = self.max_age_ms - claim_lasts_ms;
        let Some(kept) = self.fresh(ns, key, now_ms) else {
            return Lookup::Miss;
        };
        let claim_live =
            kept.refresh_claimed_at_ms.is_some_and(|at| now_ms.saturating_sub(at) < claim_lasts_ms);
        if kept.read.age_ms(now_ms) < refresh_after_ms || claim_live {
            return Lookup::Hit(kept.read);
        }
        kept.refresh_claimed_at_ms = Some(now_ms);
        Lookup::Refresh
    }

    /// The kept entry if it is younger than the max age; an older one is dropped, and so is one
    /// stamped later than `now_ms` (the clock stepped back: its age cannot be told).
    fn fresh(&mut self, ns: &Namespace, key: &Key, now_ms: u64) -> Option<&mut Kept> {
        let slot = (ns.clone(), key.clone());
        let read = self.entries.get(&slot)?.read;
        if read.read_at_ms > now_ms || read.age_ms(now_ms) >= self.max_age_ms {
            self.entries.pop(&slot);
            return None;
        }
        self.entries.peek_mut(&slot)
    }

    /// Keeps a read from the shard, unless a newer read of the key is already kept: one of a
    /// later version, or of the same version and sent later. A read that comes back after a
    /// write through this isolate must not replace the write's value, whichever was sent first:
    /// a read sent after the write may reach the shard before it (a read runs at once, a write
    /// may wait for the group before it). A counter deleted and made again elsewhere starts its
    /// versions again; its kept read then stays at most the max age, as any kept read does.
    /// Nor is a read kept if it was sent no later than the key was last forgotten (it may
    /// predate the delete).
    pub fn put(&mut self, ns: &Namespace, key: &Key, read: CachedRead) {
        if self.is_kept_newer(ns, key, &read) {
            return;
        }
        self.keep(ns, key, read);
    }

    /// Updates a kept read after a write through this isolate, answered at `now_ms`, so this
    /// isolate reads its own writes and the kept read never goes back to a lower version:
    /// - the write's answer replaces the kept read unless that one is newer (as for [`put`]);
    /// - an answer of a lower version to a write sent later than the kept read means the
    ///   counter was made again since (after a delete or an expiry elsewhere, its versions
    ///   start again), or that two writes were applied in the other order than sent. Neither
    ///   value is known to be the latest, so the key is forgotten at `now_ms`: its next read
    ///   asks the shard, which has both.
    ///
    /// A key that is not kept is kept from now on if it is `hot`: a read of it sent before the
    /// write and answered after would otherwise fill in the older value. A cold key stays
    /// uncached (its reads are not served from here).
    ///
    /// [`put`]: EdgeCache::put
    pub fn refresh(&mut self, ns: &Namespace, key: &Key, write: CachedRead, hot: bool, now_ms: u64) {
        let slot = (ns.clone(), key.clone());
        let lower_and_later = self
            .entries
            .peek(&slot)
            .is_some_and(|kept| write.version < kept.read.version && write.read_at_ms > kept.read.read_at_ms);
        if lower_and_later {
            self.forget(ns, key, now_ms);
        } else if (hot || self.entries.contains(&slot)) && !self.is_kept_newer(ns, key, &write) {
            self.keep(ns, key, write);
        }
    }

    /// Whether the kept read of the key is of a later version than `read`, or of the same one
    /// and sent no earlier.
    fn is_kept_newer(&self, ns: &Namespace, key: &Key, read: &CachedRead) -> bool {
        let slot = (ns.clone(), key.clone());
        self.entries
            .peek(&slot)
            .is_some_and(|kept| (kept.read.version, kept.read.read_at_ms) >= (read.version, read.read_at_ms))
    }

    /// Keeps `read`, unless the key was forgotten since `read` was sent.
    fn keep(&mut self, ns: &Namespace, key: &Key, read: CachedRead) {
        if self.max_age_ms == 0 {
            return;
        }
        let slot = (ns.clone(), key.clone());
        if self.forgotten.peek(&slot).is_some_and(|&at| read.read_at_ms <= at) {
            return;
        }
        self.entries.put(slot, Kept { read, refresh_claimed_at_ms: None });
        while self.entries.len() > self.capacity {
            self.entries.pop_lru();
        }
    }

    /// Forgets a key at `now_ms` (after a delete, or a write whose result is unknown), and
    /// keeps no read of it sent by then: an answer to an op sent before, which its shard may
    /// have applied before the delete, can come back after it, and would undo it here. A read
    /// sent after `now_ms` reaches the shard after the delete was answered, so it is kept. The
    /// marks are bounded like the reads; a mark older than the max age refuses only reads too
    /// old to be kept anyway.
    pub fn forget(&mut self, ns: &Namespace, key: &Key, now_ms: u64) {
        let slot = (ns.clone(), key.clone());
        self.entries.pop(&slot);
        self.forgotten.put(slot, now_ms);
        while self.forgotten.len() > self.capacity {
            self.forgotten.pop_lru();
        }
    }

    /// Keys whose forgetting is remembered.
    #[must_use]
    pub fn forgotten_len(&self) -> usize {
        self.forgotten.len()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Who may keep a read's answer downstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Reads need no token: any cache, shared ones included, may keep the answer.
    Public,
    /// Reads need a token: only the caller's own cache may keep the answer, or a shared cache
    /// would hand it to callers without one.
    Private,
}

impl Audience {
    /// The audience of every read answer: private when reads need a token.
    #[must_use]
    pub fn for_reads(reads_need_a_token: bool) -> Self {
        if reads_need_a_token {
            Self::Private
        } else {
            Self::Public
        }
    }

    /// Whether a shared cache may keep the answer, and so whether a CDN tag to purge it by
    /// (`Cache-Tag`) means anything.
    #[must_use]
    pub fn allows_shared_caches(self) -> bool {
        self == Self::Public
    }
}

/// The `Cache-Control` for a read (counters, badges, cache entries): hot reads may be cached
/// downstream for what is left of the max age (whole seconds, rounded down so the bound holds),
/// cold ones must revalidate; a private audience is said on both, never `public`.
#[must_use]
pub fn cache_control(audience: Audience, hot: bool, max_age_ms: u64, age_ms: u64) -> String {
    if !hot || max_age_ms == 0 {
        return revalidate(audience).to_owned();
    }
    let remaining_s = max_age_ms.saturating_sub(age_ms) / 1000;
    match audience {
        Audience::Public => format!("public, max-age={remaining_s}"),
        Audience::Private => format!("private, max-age={remaining_s}"),
    }
}

/// The `Cache-Control` for a read that may be kept only if revalidated before each use: cold
/// counters and cache entries.
#[must_use]
pub fn revalidate(audience: Audience) -> &'static str {
    match audience {
        Audience::Public => "no-cache",
        Audience::Private => "private, no-cache",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoreError;
    fn counter_op(kind: &str) -> ShardOp {
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("k").unwrap());
        match kind {
            "get" => ShardOp::Get { ns, key },
            "incr" => ShardOp::Incr { ns, key, by: 1, ttl: None },
            "delete" => ShardOp::Delete { ns, key },
            _ => ShardOp::CacheDelete { ns, key },
        }
    }

    #[test]
    fn only_hot_keys_without_a_request_for_freshness_are_served_from_the_kept_read() {
        assert!(may_serve_kept_read(true, false, None));
        assert!(may_serve_kept_read(true, false, Some("max-age=0")));
        assert!(!may_serve_kept_read(false, false, None), "cold");
        assert!(!may_serve_kept_read(true, true, None), "?strong=1");
        for header in ["no-cache", "No-Cache", "max-age=5, no-cache", " no-cache "] {
            assert!(!may_serve_kept_read(true, false, Some(header)), "{header}");
        }
    }

    #[test]
    fn a_counter_write_refreshes_the_kept_read_with_its_value_as_of_the_call() {
        let value = OpResult::Value { value: 7, exists: true, version: 3 };
        let read = CachedRead { value: 7, exists: true, version: 3, read_at_ms: 100 };
        assert_eq!(after_op(&counter_op("incr"), Some(&value), 100), AfterOp::Refresh(read));
    }

    #[test]
    fn deletes_and_writes_of_unknown_outcome_drop_the_kept_read() {
        let deleted = OpResult::Deleted { deleted: true };
        assert_eq!(after_op(&counter_op("delete"), Some(&deleted), 0), AfterOp::Forget);
        assert_eq!(after_op(&counter_op("incr"), None, 0), AfterOp::Forget);
    }

    #[test]
    fn reads_refusals_replays_and_cache_entries_change_nothing() {
        let value = OpResult::Value { value: 1, exists: true, version: 1 };
        let replay = OpResult::Replayed { first: Box::new(value.clone()) };
        let refused = OpResult::Failed { error: CoreError::Overflow };
        assert_eq!(after_op(&counter_op("get"), Some(&value), 0), AfterOp::Keep);
        assert_eq!(after_op(&counter_op("get"), None, 0), AfterOp::Keep);
        assert_eq!(after_op(&counter_op("incr"), Some(&replay), 0), AfterOp::Keep);
        assert_eq!(after_op(&counter_op("incr"), Some(&refused), 0), AfterOp::Keep);
        let gone = OpResult::Deleted { deleted: true };
        assert_eq!(after_op(&counter_op("cache_delete"), Some(&gone), 0), AfterOp::Keep);
    }

    fn names() -> (Namespace, Key) {
        (Namespace::new("n").unwrap(), Key::new("k").unwrap())
    }

    fn read(value: i64, at: u64) -> CachedRead {
        CachedRead { value, exists: true, version: 1, read_at_ms: at }
    }

    #[test]
    fn reads_expire_at_the_max_age() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        cache.put(&ns, &key, read(5, 100));
        assert_eq!(cache.get(&ns, &key, 1_099).map(|r| r.value), Some(5));
        assert_eq!(cache.get(&ns, &key, 1_100), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn one_request_at_a_time_refreshes_a_read_past_three_quarters_of_its_max_age_while_the_rest_hit() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        assert_eq!(cache.lookup(&ns, &key, 0), Lookup::Miss);
        cache.put(&ns, &key, read(5, 100));
        assert_eq!(cache.lookup(&ns, &key, 849), Lookup::Hit(read(5, 100)));
        assert_eq!(cache.lookup(&ns, &key, 850), Lookup::Refresh, "3/4 of the max age: one refresh");
        for now in [851, 1_000, 1_099] {
            assert_eq!(cache.lookup(&ns, &key, now), Lookup::Hit(read(5, 100)), "the others hit");
        }
        // The refresh comes back: a new read, refreshed again at 3/4 of its own max age.
        cache.put(&ns, &key, read(6, 900));
        assert_eq!(cache.lookup(&ns, &key, 1_100), Lookup::Hit(read(6, 900)));
        assert_eq!(cache.lookup(&ns, &key, 1_650), Lookup::Refresh);
        // That one never comes back: its claim lapses after a quarter of the max age, with the
        // read itself.
        assert_eq!(cache.lookup(&ns, &key, 1_899), Lookup::Hit(read(6, 900)));
        assert_eq!(cache.lookup(&ns, &key, 1_900), Lookup::Miss);
        cache.put(&ns, &key, read(7, 1_900));
        assert_eq!(cache.lookup(&ns, &key, 2_650), Lookup::Refresh);
        assert_eq!(cache.lookup(&ns, &key, 2_899), Lookup::Hit(read(7, 1_900)));
    }

    #[test]
    fn an_older_read_never_replaces_a_newer_one() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        cache.put(&ns, &key, read(2, 200));
        cache.put(&ns, &key, read(1, 100));
        assert_eq!(cache.get(&ns, &key, 250).map(|r| r.value), Some(2));
    }

    #[test]
    fn refresh_keeps_a_cold_key_uncached_and_a_hot_one_from_its_write_on() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        cache.refresh(&ns, &key, read(1, 0), false, 1);
        assert!(cache.is_empty());
        cache.put(&ns, &key, read(1, 0));
        cache.refresh(&ns, &key, read(2, 10), false, 11);
        assert_eq!(cache.get(&ns, &key, 20).map(|r| r.value), Some(2), "kept keys follow writes");
        cache.forget(&ns, &key, 20);
        cache.refresh(&ns, &key, read(3, 30), true, 31);
        assert_eq!(cache.get(&ns, &key, 40).map(|r| r.value), Some(3), "a hot key is kept from its write");
    }

    #[test]
    fn a_read_that_comes_back_after_a_write_does_not_undo_it() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        // A read sent at 100 waits in the shard's queue; a write sent at 105 is answered first.
        cache.refresh(
            &ns,
            &key,
            CachedRead { value: 1, exists: true, version: 2, read_at_ms: 105 },
            true,
            106,
        );
        cache.put(&ns, &key, CachedRead { value: 0, exists: true, version: 1, read_at_ms: 100 });
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.version), Some(2));
        // The same within one millisecond: the later version stays.
        cache.put(&ns, &key, CachedRead { value: 0, exists: true, version: 1, read_at_ms: 105 });
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.version), Some(2));
        // A read sent after the write that reached the shard before it: the write's value stays.
        cache.put(&ns, &key, CachedRead { value: 0, exists: true, version: 1, read_at_ms: 110 });
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.version), Some(2));
        // A later read of the same version is kept: it is as true, and younger.
        cache.put(&ns, &key, CachedRead { value: 1, exists: true, version: 2, read_at_ms: 120 });
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.read_at_ms), Some(120));
    }

    #[test]
    fn a_write_answered_with_a_lower_version_than_kept_never_lowers_it() {
        let (ns, key) = names();
        let at = |value: i64, version: u64, read_at_ms: u64| CachedRead {
            value,
            exists: true,
            version,
            read_at_ms,
        };
        // Two writes sent in one millisecond, answered in the other order than applied.
        let mut cache = EdgeCache::new(10, 1_000);
        cache.refresh(&ns, &key, at(10, 10, 100), true, 101);
        cache.refresh(&ns, &key, at(9, 9, 100), true, 102);
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.version), Some(10));
        // A write sent later but applied first: its lower version is not kept over the other.
        cache.refresh(&ns, &key, at(12, 12, 110), true, 111);
        cache.refresh(&ns, &key, at(11, 11, 120), true, 121);
        assert_eq!(cache.get(&ns, &key, 150), None, "forgotten: the next read asks the shard");
        cache.put(&ns, &key, at(12, 12, 115));
        assert_eq!(cache.get(&ns, &key, 150), None, "a read sent before the forgetting is not kept");
        cache.put(&ns, &key, at(12, 12, 130));
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.value), Some(12));
    }

    #[test]
    fn a_write_through_this_isolate_is_read_after_the_counter_was_made_again_elsewhere() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        // Kept at version 500; the counter is then deleted elsewhere and counted again here.
        cache.put(&ns, &key, CachedRead { value: 500, exists: true, version: 500, read_at_ms: 100 });
        cache.refresh(
            &ns,
            &key,
            CachedRead { value: 1, exists: true, version: 1, read_at_ms: 110 },
            true,
            115,
        );
        assert_eq!(cache.get(&ns, &key, 150), None, "the old value is not served over this isolate's write");
        // A read sent after the write was answered saw it, and is kept over the write's answer.
        cache.put(&ns, &key, CachedRead { value: 2, exists: true, version: 2, read_at_ms: 130 });
        cache.refresh(
            &ns,
            &key,
            CachedRead { value: 2, exists: true, version: 2, read_at_ms: 120 },
            true,
            135,
        );
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.read_at_ms), Some(130));
    }

    #[test]
    fn a_delete_is_not_undone_by_an_older_answer_that_comes_back_after_it() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        let at = |value: i64, version: u64, read_at_ms: u64| CachedRead {
            value,
            exists: true,
            version,
            read_at_ms,
        };
        cache.put(&ns, &key, at(5, 5, 100));
        // The delete is answered at 101; an increment sent at 100, applied before it, resumes after.
        cache.forget(&ns, &key, 101);
        cache.refresh(&ns, &key, at(6, 6, 100), true, 102);
        assert_eq!(cache.get(&ns, &key, 150), None, "the increment's answer predates the delete");
        // A read sent before the delete (or in its millisecond) and answered after it, the same.
        cache.put(&ns, &key, at(6, 6, 101));
        assert_eq!(cache.get(&ns, &key, 150), None, "the read may have been served before the delete");
        // Anything sent after the delete was answered saw it.
        cache.refresh(&ns, &key, at(1, 1, 102), true, 103);
        assert_eq!(cache.get(&ns, &key, 150).map(|r| r.value), Some(1));
    }

    #[test]
    fn forgotten_keys_are_bounded_like_kept_ones() {
        let mut cache = EdgeCache::new(3, 1_000);
        let ns = Namespace::new("n").unwrap();
        for i in 0..10 {
            cache.forget(&ns, &Key::new(&i.to_string()).unwrap(), 50);
        }
        assert_eq!(cache.forgotten_len(), 3);
        // The oldest marks went first: a key forgotten long ago is kept again.
        cache.put(&ns, &Key::new("0").unwrap(), read(1, 40));
        assert_eq!(cache.get(&ns, &Key::new("0").unwrap(), 60).map(|r| r.value), Some(1));
        cache.put(&ns, &Key::new("9").unwrap(), read(1, 40));
        assert_eq!(cache.get(&ns, &Key::new("9").unwrap(), 60), None);
    }

    #[test]
    fn a_read_stamped_after_now_is_dropped_when_the_clock_steps_back() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 1_000);
        cache.put(&ns, &key, read(1, 10_000));
        // Its age cannot be told: dropped, and the next read is kept.
        assert_eq!(cache.get(&ns, &key, 5_000), None);
        cache.put(&ns, &key, read(2, 5_000));
        assert_eq!(cache.get(&ns, &key, 5_500).map(|r| r.value), Some(2));
    }

    #[test]
    fn capacity_is_bounded() {
        let mut cache = EdgeCache::new(3, 1_000);
        let ns = Namespace::new("n").unwrap();
        for i in 0..10 {
            cache.put(&ns, &Key::new(&i.to_string()).unwrap(), read(i, 0));
        }
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn zero_max_age_caches_nothing() {
        let (ns, key) = names();
        let mut cache = EdgeCache::new(10, 0);
        cache.put(&ns, &key, read(1, 0));
        assert!(cache.get(&ns, &key, 0).is_none());
    }

    #[test]
    fn cache_control_grants_only_what_is_left() {
        let public = Audience::Public;
        assert_eq!(cache_control(public, false, 1_000, 0), "no-cache");
        assert_eq!(cache_control(public, true, 1_000, 0), "public, max-age=1");
        assert_eq!(cache_control(public, true, 1_000, 1), "public, max-age=0");
        assert_eq!(cache_control(public, true, 5_000, 1_500), "public, max-age=3");
        assert_eq!(cache_control(public, true, 0, 0), "no-cache");
    }

    #[test]
    fn private_reads_are_never_marked_public() {
        let private = Audience::for_reads(true);
        assert_eq!(cache_control(private, true, 5_000, 1_500), "private, max-age=3");
        assert_eq!(cache_control(private, false, 5_000, 0), "private, no-cache");
        assert_eq!(cache_control(private, true, 0, 0), "private, no-cache");
        for (hot, max_age_ms, age_ms) in [(true, 1_000, 0), (true, 86_400_000, 7), (false, 1_000, 0)] {
            let header = cache_control(private, hot, max_age_ms, age_ms);
            assert!(header.starts_with("private, ") && !header.contains("public"), "{header}");
        }
        assert_eq!(revalidate(private), "private, no-cache");
        assert_eq!(revalidate(Audience::Public), "no-cache");
        assert!(!private.allows_shared_caches());
        assert!(Audience::for_reads(false).allows_shared_caches());
    }
}
