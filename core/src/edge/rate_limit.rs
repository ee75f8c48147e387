//! Rate limits: a token bucket per client (a bearer token, or else the client's address, an
//! IPv6 one by its /64: [`ClientId`]), as `governor`'s GCRA, which lets through exactly what a
//! token bucket of the same rate and burst would.
//!
//! Time comes in as milliseconds from the caller (a shared clock that every bucket reads), so
//! the limiter runs the same natively and in Wasm. Memory is bounded: a client idle long enough
//! for its bucket to refill is indistinguishable from a new one and is forgotten first.
//!
//! A request costs one per op, at most the burst ([`RateLimit::cost`]), so any request fits a
//! full bucket. A batch is charged one on arrival, before its body is read, and topped up to its
//! cost once its ops are counted ([`RequestCharge`]); so is a read of visitors over many days,
//! as many requests as [`visitors_read_cost`] says.

use std::cell::Cell;
use std::num::NonZeroU32;
use std::rc::Rc;
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter as Gcra};

use crate::hashing::{key_map, KeyMap};
use crate::shard::visit_table::MAX_SKETCH_DAYS;

mod client_id;
pub use client_id::ClientId;

/// How many clients' buckets an isolate keeps at most.
pub const MAX_TRACKED_CLIENTS: usize = 20_000;

/// Days of visitors one request's worth of the rate pays for (see [`visitors_read_cost`]).
pub const VISITOR_DAYS_A_REQUEST: u32 = 40;

/// What a read of the visitors of `days` days costs, in requests: one for each
/// [`VISITOR_DAYS_A_REQUEST`] days or part of them, counted up to the days a key keeps
/// sketches ([`MAX_SKETCH_DAYS`]). A read its shard has not kept yet merges a sketch for each
/// day (the first of a period each day, or any new range): one of 400 days took 18 times a
/// counter read's time (loadtest/reports/2026-11-28-visitor-reads), and costs 10.
#[must_use]
pub fn visitors_read_cost(days: u32) -> usize {
    let sketches = days.clamp(1, MAX_SKETCH_DAYS.unsigned_abs());
    usize::try_from(sketches.div_ceil(VISITOR_DAYS_A_REQUEST)).unwrap_or(usize::MAX)
}

/// The configured limit: `per_second` requests refill each second, up to `burst` saved up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_second: NonZeroU32,
    pub burst: NonZeroU32,
}

impl RateLimit {
    /// What a request of `ops` ops costs: one per op (a single-key request is one op), at least
    /// one, and at most the burst, so that any request passes once its client's bucket is full.
    #[must_use]
    pub fn cost(self, ops: usize) -> u32 {
        u32::try_from(ops).unwrap_or(u32::MAX).clamp(1, self.burst.get())
    }

    fn quota(self) -> Quota {
        Quota::per_second(self.per_second).allow_burst(self.burst)
    }

    /// Time for an empty bucket to fill up again.
    fn refill_ms(self) -> u64 {
        (u64::from(self.burst.get()) * 1000).div_ceil(u64::from(self.per_second.get()))
    }
}

/// What one request has paid so far, so a later charge for the same request (a batch's ops,
/// known once its body is read) tops it up to the request's cost instead of adding to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestCharge {
    client: ClientId,
    paid: u32,
}

impl RequestCharge {
    /// A request from `client` that has paid nothing yet.
    #[must_use]
    pub fn new(client: ClientId) -> Self {
        Self { client, paid: 0 }
    }

    /// Whose request it is.
    #[must_use]
    pub fn client(&self) -> ClientId {
        self.client
    }

    /// How many requests' worth it has paid.
    #[must_use]
    pub fn paid(&self) -> u32 {
        self.paid
    }
}

/// What the limiter decided, with the figures for the `RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// `RateLimit-Limit`: the burst size.
    pub limit: u32,
    /// `RateLimit-Remaining`: requests that would pass right now.
    pub remaining: u32,
    /// `RateLimit-Reset`: seconds until the bucket is full again.
    pub reset_s: u64,
    /// `Retry-After` when refused: seconds until the request's cost fits (at least 1).
    pub retry_after_s: u64,
}

/// A clock every bucket shares, set to the request's time before each check.
#[derive(Debug, Clone, Default)]
struct SharedClock(Rc<Cell<Duration>>);

impl Clock for SharedClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.0.get()
    }
}

type Bucket = Gcra<NotKeyed, InMemoryState, SharedClock, StateInformationMiddleware>;

struct Tracked {
    bucket: Bucket,
    last_seen_ms: u64,
}

/// The buckets of one isolate's clients.
pub struct ClientLimiter {
    limit: RateLimit,
    clock: SharedClock,
    clients: KeyMap<ClientId, Tracked>,
    max_clients: usize,
}

impl ClientLimiter {
    #[must_use]
    pub fn new(limit: RateLimit) -> Self {
        Self::with_capacity(limit, MAX_TRACKED_CLIENTS)
    }

    /// A limiter that tracks at most `max_clients` clients.
    #[must_use]
    pub fn with_capacity(limit: RateLimit, max_clients: usize) -> Self {
        Self { limit, clock: SharedClock::default(), clients: key_map(), max_clients: max_clients.max(1) }
    }

    /// Charges `request` as a request of `ops` ops at `now_ms`: it pays what its cost
    /// ([`RateLimit::cost`]) exceeds what it paid already, so a batch's arrival charge is part of
    /// its cost, not added to it. `None` when nothing more is due.
    pub fn charge(&mut self, request: &mut RequestCharge, ops: usize, now_ms: u64) -> Option<Decision> {
        let due = self.limit.cost(ops).saturating_sub(request.paid);
        if due == 0 {
            return None;
        }
        let decision = self.take(request.client, due, request.paid, now_ms);
        if decision.allowed {
            request.paid += due;
        }
        Some(decision)
    }

    /// Charges `client` `cost` requests at `now_ms`. A cost above the burst is charged as the
    /// whole burst, so a large batch empties the bucket rather than never passing.
    pub fn check(&mut self, client: ClientId, cost: u32, now_ms: u64) -> Decision {
        self.take(client, cost, 0, now_ms)
    }

    /// Takes `cost` from `client`'s bucket. A refusal's Retry-After also waits for the `prepaid`
    /// requests paid earlier in the same request: its retry will pay them again.
    fn take(&mut self, client: ClientId, cost: u32, prepaid: u32, now_ms: u64) -> Decision {
        let now = Duration::from_millis(now_ms);
        // The clock never runs backwards for the buckets, even if the caller's clock does.
        if now > self.clock.0.get() {
            self.clock.0.set(now);
        }
        if !self.clients.contains_key(&client) && self.clients.len() >= self.max_clients {
            self.forget_idle(now_ms);
        }
        let (quota, clock) = (self.limit.quota(), self.clock.clone());
        let tracked = self.clients.entry(client).or_insert_with(|| Tracked {
            bucket: Gcra::direct_with_clock(quota, clock).with_middleware(),
            last_seen_ms: now_ms,
        });
        tracked.last_seen_ms = now_ms;
        let burst = self.limit.burst.get();
        let cost = NonZeroU32::new(cost.clamp(1, burst)).unwrap_or(NonZeroU32::MIN);
        let per_request_ms = 1000.0 / f64::from(self.limit.per_second.get());
        let seconds_for = |requests: u32| (f64::from(requests) * per_request_ms / 1000.0).ceil() as u64;
        match tracked.bucket.check_n(cost) {
            Ok(Ok(snapshot)) => {
                let remaining = snapshot.remaining_burst_capacity().min(burst);
                Decision {
                    allowed: true,
                    limit: burst,
                    remaining,
                    reset_s: seconds_for(burst - remaining),
                    retry_after_s: 0,
                }
            }
            Ok(Err(not_until)) => {
                // For a cost of n, governor's earliest time already waits for all n cells; each
                // prepaid request adds one more refill interval.
                let wait = not_until.wait_time_from(self.clock.now())
                    + quota.replenish_interval().saturating_mul(prepaid.min(burst));
                Decision {
                    allowed: false,
                    limit: burst,
                    remaining: 0,
                    reset_s: seconds_for(burst),
                    retry_after_s: u64::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(u64::MAX).max(1),
                }
            }
            // Unreachable: the cost is clamped to the burst.
            Err(_) => Decision { allowed: false, limit: burst, remaining: 0, reset_s: 1, retry_after_s: 1 },
        }
    }

    /// How many clients are tracked.
    #[must_use]
    pub fn tracked_clients(&self) -> usize {
        self.clients.len()
    }

    /// Makes room: first drops clients whose buckets have refilled (forgetting them changes
    /// nothing), then, if every client is recent, the least recently seen half.
    fn forget_idle(&mut self, now_ms: u64) {
        let refill_ms = self.limit.refill_ms();
        self.clients.retain(|_, t| now_ms.saturating_sub(t.last_seen_ms) < refill_ms);
        if self.clients.len() >= self.max_clients {
            let mut seen: Vec<u64> = self.clients.values().map(|t| t.last_seen_ms).collect();
            seen.sort_unstable();
            let cutoff = seen[seen.len() / 2];
            self.clients.retain(|_, t| t.last_seen_ms > cutoff);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_second: u32, burst: u32) -> RateLimit {
        RateLimit { per_second: NonZeroU32::new(per_second).unwrap(), burst: NonZeroU32::new(burst).unwrap() }
    }

    #[test]
    fn a_burst_passes_then_the_next_request_is_refused() {
        let mut limiter = ClientLimiter::new(limit(2, 5));
        let client = ClientId::address("192.0.2.1");
        for expected_remaining in (0..5).rev() {
            let decision = limiter.check(client, 1, 1_000);
            assert!(decision.allowed);
            assert_eq!((decision.limit, decision.remaining), (5, expected_remaining));
        }
        let refused = limiter.check(client, 1, 1_000);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        // One request refills every 500 ms: Retry-After rounds that up to a whole second.
        assert_eq!(refused.retry_after_s, 1);
        assert_eq!(refused.reset_s, 3);
    }

    #[test]
    fn the_bucket_refills_at_the_rate() {
        let mut limiter = ClientLimiter::new(limit(2, 2));
        let client = ClientId::token("t");
        assert!(limiter.check(client, 2, 0).allowed);
        assert!(!limiter.check(client, 1, 100).allowed);
        assert!(limiter.check(client, 1, 500).allowed);
        assert!(!limiter.check(client, 1, 600).allowed);
        assert!(limiter.check(client, 2, 1_600).allowed);
    }

    #[test]
    fn clients_have_their_own_buckets() {
        let mut limiter = ClientLimiter::new(limit(1, 1));
        assert!(limiter.check(ClientId::address("192.0.2.1"), 1, 0).allowed);
        assert!(limiter.check(ClientId::address("192.0.2.2"), 1, 0).allowed);
        assert!(limiter.check(ClientId::token("192.0.2.1"), 1, 0).allowed);
        assert!(!limiter.check(ClientId::address("192.0.2.1"), 1, 0).allowed);
    }

    #[test]
    fn a_cost_above_the_burst_takes_the_whole_burst() {
        let mut limiter = ClientLimiter::new(limit(10, 10));
        let client = ClientId::address("192.0.2.1");
        let decision = limiter.check(client, 1_000, 0);
        assert!(decision.allowed);
        assert_eq!(decision.remaining, 0);
        assert!(!limiter.check(client, 1, 0).allowed);
    }

    #[test]
    fn a_refused_batch_is_told_when_its_whole_cost_fits() {
        let mut limiter = ClientLimiter::new(limit(1, 10));
        let client = ClientId::address("192.0.2.1");
        assert!(limiter.check(client, 10, 0).allowed);
        let refused = limiter.check(client, 5, 0);
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_s, 5);
    }

    #[test]
    fn memory_is_bounded_and_idle_clients_go_first() {
        let mut limiter = ClientLimiter::with_capacity(limit(1, 1), 100);
        let address = |i: u32| ClientId::address(&format!("10.0.{}.{}", i / 256, i % 256));
        for i in 0..1_000_u32 {
            limiter.check(address(i), 1, u64::from(i));
            assert!(limiter.tracked_clients() <= 100);
        }
        assert!(limiter.tracked_clients() > 1);
        // A recent client keeps its empty bucket.
        assert!(!limiter.check(address(999), 1, 999).allowed);
    }

    #[test]
    fn a_request_costs_one_per_op_at_least_one_and_at_most_the_burst() {
        let limit = limit(1, 5);
        let costs: Vec<u32> = [0, 1, 4, 5, 6, 1_000, usize::MAX].map(|ops| limit.cost(ops)).to_vec();
        assert_eq!(costs, [1, 1, 4, 5, 5, 5, 5]);
    }

    #[test]
    fn a_read_of_visitors_costs_one_request_for_each_forty_days_up_to_the_days_of_sketches() {
        let costs = [0, 1, 7, 30, 40, 41, 80, 81, 365, 400, 401, 3_660, u32::MAX].map(visitors_read_cost);
        assert_eq!(costs, [1, 1, 1, 1, 1, 2, 2, 3, 10, 10, 10, 10, 10]);
        // The default public burst (20) holds two reads of the days kept.
        let mut limiter = ClientLimiter::new(limit(10, 20));
        let mut request = RequestCharge::new(ClientId::address("192.0.2.1"));
        assert!(limiter.charge(&mut request, 1, 0).is_some_and(|d| d.allowed));
        let topped_up = limiter.charge(&mut request, visitors_read_cost(400), 0).expect("nine more are due");
        assert_eq!((topped_up.allowed, topped_up.remaining, request.paid()), (true, 10, 10));
    }

    #[test]
    fn a_batch_larger_than_the_burst_passes_a_full_bucket_after_its_arrival_charge() {
        let mut limiter = ClientLimiter::new(limit(1, 5));
        let mut request = RequestCharge::new(ClientId::address("192.0.2.1"));
        assert!(limiter.charge(&mut request, 1, 0).is_some_and(|d| d.allowed));
        let topped_up = limiter.charge(&mut request, 8, 0).expect("four more are due");
        assert!(topped_up.allowed);
        assert_eq!((request.paid(), topped_up.remaining), (5, 0));
    }

    #[test]
    fn a_request_of_one_op_owes_nothing_after_its_arrival_charge() {
        let mut limiter = ClientLimiter::new(limit(1, 5));
        let mut request = RequestCharge::new(ClientId::address("192.0.2.1"));
        assert!(limiter.charge(&mut request, 1, 0).is_some_and(|d| d.allowed));
        assert_eq!(limiter.charge(&mut request, 1, 0), None);
        assert_eq!(limiter.charge(&mut request, 0, 0), None);
        assert_eq!(request.paid(), 1);
    }

    #[test]
    fn a_refused_top_up_waits_for_the_arrival_charge_its_retry_pays_again() {
        let mut limiter = ClientLimiter::new(limit(1, 5));
        let client = ClientId::address("192.0.2.1");
        assert!(limiter.check(client, 3, 0).allowed);
        // Two left: the batch of five pays one on arrival, then cannot top up four.
        let mut request = RequestCharge::new(client);
        assert!(limiter.charge(&mut request, 1, 0).is_some_and(|d| d.allowed));
        let refused = limiter.charge(&mut request, 5, 0).expect("four more are due");
        assert!(!refused.allowed);
        assert_eq!((request.paid(), refused.retry_after_s), (1, 4));
        // Sent again after Retry-After, the whole batch fits: arrival and top-up.
        let now = refused.retry_after_s * 1000;
        let mut retry = RequestCharge::new(client);
        assert!(limiter.charge(&mut retry, 1, now).is_some_and(|d| d.allowed));
        assert!(limiter.charge(&mut retry, 5, now).is_some_and(|d| d.allowed));
    }
}
