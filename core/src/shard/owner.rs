//! The owner rule: a counter created with an admin key (Abacus's `/create`) may be set, lowered,
//! deleted or given another TTL only by the holder of that key (the guarded routes check it) or
//! by an operator, whatever route the write comes by; anyone may still add to it. The shard
//! checks it in the same turn as the write, so no route, batch or one-way flush gets round it.

use crate::error::CoreError;
use crate::shard::counter::Counter;
use crate::shard::protocol::ShardOp;
use crate::shard::settings::Guard;

/// Whether `op` could be refused by the rule, so that the shard must look at the counter.
#[must_use]
pub fn may_bind(op: &ShardOp) -> bool {
    // Every op named: a new one makes the compiler ask whether an owner key binds it.
    match op {
        ShardOp::Incr { .. } | ShardOp::Decr { .. } | ShardOp::Set { .. } | ShardOp::Delete { .. } => true,
        ShardOp::Guarded { guard, .. } => match guard {
            Guard::Reset | Guard::Bounds => true,
            // These carry their own proof: the key itself, or the operator's right.
            Guard::AdminKey { .. } | Guard::Operator => false,
        },
        ShardOp::Get { .. }
        | ShardOp::CacheGet { .. }
        | ShardOp::CachePut { .. }
        | ShardOp::CacheDelete { .. }
        | ShardOp::Create { .. }
        | ShardOp::Info { .. }
        | ShardOp::Days { .. } => false,
    }
}

/// Whether a caller without the key and without an operator's token may apply `op` to
/// `counter` (`None`: no live counter, so no owner).
///
/// # Errors
/// [`CoreError::OwnedCounter`]: the op must then change nothing.
pub fn permits(counter: Option<&Counter>, op: &ShardOp) -> Result<(), CoreError> {
    let Some(counter) = counter.filter(|c| c.rules().admin_key_hash.is_some()) else {
        return Ok(());
    };
    // Adding keeps the count growing; a TTL other than the counter's own could end it early.
    let adds = matches!(op, ShardOp::Incr { by, ttl, .. } if *by > 0 && (ttl.is_none() || *ttl == counter.ttl_seconds));
    if may_bind(op) && !adds {
        Err(CoreError::OwnedCounter)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::protocol::GuardedChange;
    use crate::shard::settings::{AdminKeyHash, CounterSettings};
    use crate::{Key, Namespace};

    fn owned(ttl_seconds: Option<u32>) -> Counter {
        let settings =
            CounterSettings { admin_key_hash: Some(AdminKeyHash::of("the-key")), ..Default::default() };
        Counter::create(10, ttl_seconds, settings, 0)
    }

    fn names() -> (Namespace, Key) {
        (Namespace::new("blog").unwrap(), Key::new("stars").unwrap())
    }

    #[test]
    fn anyone_may_add_to_an_owned_counter() {
        let (ns, key) = names();
        let counter = owned(Some(60));
        for ttl in [None, Some(60)] {
            let op = ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 5, ttl };
            assert_eq!(permits(Some(&counter), &op), Ok(()));
        }
    }

    #[test]
    fn only_the_owner_may_lower_set_delete_or_shorten_it() {
        let (ns, key) = names();
        let counter = owned(Some(60));
        let refused = [
            ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: -1, ttl: None },
            ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(1) },
            ShardOp::Decr { ns: ns.clone(), key: key.clone(), by: 1, ttl: None },
            ShardOp::Set { ns: ns.clone(), key: key.clone(), value: 0, ttl: None },
            ShardOp::Delete { ns: ns.clone(), key: key.clone() },
            ShardOp::Guarded {
                ns: ns.clone(),
                key: key.clone(),
                change: GuardedChange::Add(-1),
                guard: Guard::Bounds,
                ttl: None,
            },
        ];
        for op in &refused {
            assert_eq!(permits(Some(&counter), op), Err(CoreError::OwnedCounter), "{op:?}");
        }
        let with_key = ShardOp::Guarded {
            ns,
            key,
            change: GuardedChange::Set(0),
            guard: Guard::AdminKey { hash: AdminKeyHash::of("the-key") },
            ttl: None,
        };
        assert_eq!(permits(Some(&counter), &with_key), Ok(()));
    }

    #[test]
    fn counters_without_an_owner_are_not_bound() {
        let (ns, key) = names();
        let plain = Counter::create(1, None, CounterSettings::default(), 0);
        let op = ShardOp::Delete { ns, key };
        assert_eq!(permits(Some(&plain), &op), Ok(()));
        assert_eq!(permits(None, &op), Ok(()));
    }
}
