//! Who is watching which counter of a shard: the server-sent event streams of Abacus's
//! `/stream/:ns/:key`. After each request the shard works out what its writes changed
//! ([`changes`]) and hands each watcher of a changed key the new value ([`Watchers::notify`]).
//!
//! Generic over the sender, so the runtime's streams stay in the worker. Bounded: a shard keeps
//! at most [`MAX_WATCHERS_PER_SHARD`] watchers, at most [`MAX_WATCHERS_PER_CLIENT`] of them for
//! one client whichever isolates its streams came through, and a watcher holds at most one
//! undelivered value (the sender keeps only the latest; a slow reader skips values, never piles
//! them up).

use crate::hashing::{key_map, KeyMap};
use crate::shard::protocol::{OpResult, ShardCall, ShardOp};
use crate::{Key, Namespace};

/// Most open streams one shard serves.
pub const MAX_WATCHERS_PER_SHARD: usize = 256;
/// Most open streams one shard serves one client (an address, an IPv6 /64): so that one client
/// cannot take a shard's places from everyone else.
pub const MAX_WATCHERS_PER_CLIENT: usize = 8;

/// A counter's new value after a request, or `None` when the request deleted it.
pub type Change = (Namespace, Key, Option<i64>);

/// The watchers of one shard's counters.
#[derive(Debug)]
pub struct Watchers<S> {
    /// Each watcher with the client it streams to.
    by_key: KeyMap<(Namespace, Key), Vec<(String, S)>>,
    count: usize,
}

impl<S> Default for Watchers<S> {
    fn default() -> Self {
        Self { by_key: key_map(), count: 0 }
    }
}

impl<S> Watchers<S> {
    /// Adds a watcher of `ns`/`key` for `client`; refused (given back) when the shard, or the
    /// client on this shard, has its most. Prune first, so that readers who left do not count.
    ///
    /// # Errors
    /// The sender, when [`MAX_WATCHERS_PER_SHARD`] are open, or [`MAX_WATCHERS_PER_CLIENT`] for
    /// `client`.
    pub fn add(&mut self, ns: Namespace, key: Key, client: &str, sender: S) -> Result<(), S> {
        // At most 256 watchers to look through: cheaper than keeping a count per client.
        let clients = self.by_key.values().flatten().filter(|(of, _)| of == client).count();
        if self.count >= MAX_WATCHERS_PER_SHARD || clients >= MAX_WATCHERS_PER_CLIENT {
            return Err(sender);
        }
        self.by_key.entry((ns, key)).or_default().push((client.to_owned(), sender));
        self.count += 1;
        Ok(())
    }

    /// Open watchers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Hands each watcher of a changed key its new value; `deliver` answers whether the watcher
    /// stays (false: its reader left, or the counter was deleted), and those that do not are
    /// dropped.
    pub fn notify(&mut self, changes: &[Change], mut deliver: impl FnMut(&S, Option<i64>) -> bool) {
        for (ns, key, value) in changes {
            let slot = (ns.clone(), key.clone());
            let Some(senders) = self.by_key.get_mut(&slot) else { continue };
            let before = senders.len();
            senders.retain(|(_, sender)| deliver(sender, *value));
            self.count -= before - senders.len();
            if senders.is_empty() {
                self.by_key.remove(&slot);
            }
        }
    }

    /// Drops the watchers whose readers left, found by `alive`.
    pub fn prune(&mut self, alive: impl Fn(&S) -> bool) {
        self.by_key.retain(|_, senders| {
            senders.retain(|(_, sender)| alive(sender));
            !senders.is_empty()
        });
        self.count = self.by_key.values().map(Vec::len).sum();
    }
}

/// What a request's writes changed: each counter's value after its last applied write, in
/// order of first change. Refused ops and replays (nothing applied now) change nothing.
#[must_use]
pub fn changes(calls: &[ShardCall], results: &[OpResult]) -> Vec<Change> {
    let mut changed: Vec<Change> = Vec::new();
    for (call, result) in calls.iter().zip(results) {
        if !call.op.is_write() || call.op.is_cache() {
            continue;
        }
        let value = match (&call.op, result) {
            (
                _,
                OpResult::Value { value, .. }
                | OpResult::Changed { value, .. }
                | OpResult::Created { value, .. },
            ) => Some(*value),
            (ShardOp::Delete { .. } | ShardOp::Guarded { .. }, OpResult::Deleted { deleted: true }) => None,
            _ => continue,
        };
        let (ns, key) = call.op.target();
        match changed.iter_mut().find(|(n, k, _)| n == ns && k == key) {
            Some(entry) => entry.2 = value,
            None => changed.push((ns.clone(), key.clone(), value)),
        }
    }
    changed
}

/// One server-sent event carrying a value, as Abacus sends it.
#[must_use]
pub fn event(value: i64) -> String {
    format!("data: {{\"value\":{value}}}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoreError;

    fn names(key: &str) -> (Namespace, Key) {
        (Namespace::new("n").unwrap(), Key::new(key).unwrap())
    }

    fn incr(key: &str) -> ShardCall {
        let (ns, key) = names(key);
        ShardOp::Incr { ns, key, by: 1, ttl: None }.into()
    }

    #[test]
    fn a_request_changes_each_key_once_to_its_last_value() {
        let (ns, a) = names("a");
        let calls = vec![
            incr("a"),
            incr("b"),
            incr("a"),
            ShardOp::Get { ns: ns.clone(), key: a.clone() }.into(),
            ShardOp::Delete { ns: ns.clone(), key: Key::new("c").unwrap() }.into(),
            incr("d"),
        ];
        let results = vec![
            OpResult::Value { value: 1, exists: true, version: 1 },
            OpResult::Value { value: 7, exists: true, version: 3 },
            OpResult::Value { value: 2, exists: true, version: 2 },
            OpResult::Value { value: 2, exists: true, version: 2 },
            OpResult::Deleted { deleted: true },
            OpResult::Failed { error: CoreError::Overflow },
        ];
        let changed = changes(&calls, &results);
        let summary: Vec<(&str, Option<i64>)> = changed.iter().map(|(_, k, v)| (k.as_str(), *v)).collect();
        assert_eq!(summary, [("a", Some(2)), ("b", Some(7)), ("c", None)]);
        let replayed = vec![OpResult::Replayed { first: Box::new(results[0].clone()) }];
        assert!(changes(&calls[..1], &replayed).is_empty());
    }

    #[test]
    fn watchers_are_bounded_told_of_changes_and_dropped_when_gone() {
        let mut watchers: Watchers<u32> = Watchers::default();
        let (ns, a) = names("a");
        for id in 0..MAX_WATCHERS_PER_SHARD as u32 {
            watchers.add(ns.clone(), a.clone(), &format!("client {}", id / 8), id).unwrap();
        }
        assert_eq!(watchers.add(ns.clone(), a.clone(), "another", 9_999), Err(9_999));
        let mut told = Vec::new();
        // Odd watchers have left.
        watchers.notify(&[(ns.clone(), a.clone(), Some(5))], |id, value| {
            told.push((*id, value));
            id % 2 == 0
        });
        assert_eq!(told.len(), MAX_WATCHERS_PER_SHARD);
        assert_eq!(watchers.len(), MAX_WATCHERS_PER_SHARD / 2);
        watchers.prune(|id| *id < 10);
        assert_eq!(watchers.len(), 5);
        watchers.notify(&[(ns, a, None)], |_, _| false);
        assert!(watchers.is_empty());
        assert_eq!(event(-3), "data: {\"value\":-3}\n\n");
    }

    #[test]
    fn one_client_holds_at_most_its_share_of_a_shard() {
        let mut watchers: Watchers<u32> = Watchers::default();
        let (ns, a) = names("a");
        let b = Key::new("b").unwrap();
        for id in 0..MAX_WATCHERS_PER_CLIENT as u32 {
            let key = if id % 2 == 0 { a.clone() } else { b.clone() };
            watchers.add(ns.clone(), key, "one", id).unwrap();
        }
        assert_eq!(watchers.add(ns.clone(), b.clone(), "one", 100), Err(100), "on any key");
        watchers.add(ns.clone(), a.clone(), "other", 101).unwrap();
        // A stream that ends gives its place back.
        watchers.prune(|id| *id != 0);
        watchers.add(ns, a, "one", 102).unwrap();
    }
}
