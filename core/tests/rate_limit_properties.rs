//! Properties of the per-client token bucket, on a fake clock: it never lets through more
//! than the burst plus what the rate refills, a client that waits as told gets through, any
//! batch passes a full bucket, and addresses are grouped as they are handed out.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::num::NonZeroU32;

use edgecount_core::edge::rate_limit::{ClientId, ClientLimiter, RateLimit, RequestCharge};
use proptest::prelude::*;

fn limit(per_second: u32, burst: u32) -> RateLimit {
    RateLimit { per_second: NonZeroU32::new(per_second).unwrap(), burst: NonZeroU32::new(burst).unwrap() }
}

proptest! {
    #[test]
    fn never_more_than_burst_plus_refill(
        per_second in 1_u32..200,
        burst in 1_u32..200,
        steps in prop::collection::vec((0_u64..300, 1_u32..20), 1..300),
    ) {
        let mut limiter = ClientLimiter::new(limit(per_second, burst));
        let client = ClientId::address("198.51.100.7");
        let (mut now, mut passed) = (0_u64, 0_u64);
        for (gap_ms, cost) in steps {
            now += gap_ms;
            let decision = limiter.check(client, cost, now);
            if decision.allowed {
                passed += u64::from(cost.min(burst));
            }
            prop_assert!(decision.remaining <= burst);
            // Over [0, now] the bucket refills per_second * now / 1000 requests (+1 for rounding).
            let refilled = u64::from(per_second) * now / 1000 + 1;
            prop_assert!(passed <= u64::from(burst) + refilled, "passed {passed} by {now} ms");
        }
    }

    #[test]
    fn waiting_retry_after_lets_the_request_through(
        per_second in 1_u32..50,
        burst in 1_u32..50,
        cost in 1_u32..50,
    ) {
        let mut limiter = ClientLimiter::new(limit(per_second, burst));
        let client = ClientId::token("reader");
        let mut now = 0;
        // Empty the bucket, then ask until refused.
        while limiter.check(client, burst, now).allowed {}
        let refused = limiter.check(client, cost, now);
        prop_assert!(!refused.allowed);
        prop_assert!(refused.retry_after_s >= 1);
        now += refused.retry_after_s * 1000;
        prop_assert!(limiter.check(client, cost, now).allowed);
    }

    #[test]
    fn any_batch_passes_a_full_bucket_after_its_arrival_charge(
        per_second in 1_u32..50,
        burst in 1_u32..50,
        ops in 0_usize..500,
    ) {
        let mut limiter = ClientLimiter::new(limit(per_second, burst));
        let mut request = RequestCharge::new(ClientId::token("batcher"));
        prop_assert!(limiter.charge(&mut request, 1, 0).is_some_and(|d| d.allowed));
        let top_up = limiter.charge(&mut request, ops, 0);
        prop_assert!(top_up.is_none_or(|d| d.allowed));
        prop_assert_eq!(request.paid(), u32::try_from(ops).unwrap().clamp(1, burst));
    }

    #[test]
    fn a_batch_refused_at_its_top_up_passes_when_sent_again_after_retry_after(
        per_second in 1_u32..50,
        burst in 2_u32..50,
        spent in 1_u32..50,
        ops in 2_usize..100,
    ) {
        let mut limiter = ClientLimiter::new(limit(per_second, burst));
        let client = ClientId::token("batcher");
        prop_assert!(limiter.check(client, spent, 0).allowed);
        let mut request = RequestCharge::new(client);
        if limiter.charge(&mut request, 1, 0).is_some_and(|d| d.allowed) {
            if let Some(refused) = limiter.charge(&mut request, ops, 0).filter(|d| !d.allowed) {
                let now = refused.retry_after_s * 1000;
                let mut retry = RequestCharge::new(client);
                prop_assert!(limiter.charge(&mut retry, 1, now).is_some_and(|d| d.allowed));
                prop_assert!(limiter.charge(&mut retry, ops, now).is_none_or(|d| d.allowed));
            }
        }
    }

    #[test]
    fn ipv6_clients_are_their_slash_64(prefix: u64, first: u64, second: u64, other_prefix: u64) {
        let address = |prefix: u64, host: u64| {
            let ip = Ipv6Addr::from((u128::from(prefix) << 64) | u128::from(host));
            ClientId::address(&ip.to_string())
        };
        // Skip the one /64 that holds IPv4-mapped addresses, which count as IPv4.
        prop_assume!(prefix != 0 && other_prefix != 0);
        prop_assert_eq!(address(prefix, first), address(prefix, second));
        if other_prefix != prefix {
            prop_assert_ne!(address(prefix, first), address(other_prefix, first));
        }
    }

    #[test]
    fn ipv4_clients_are_their_address_however_written(a: u32, b: u32) {
        let v4 = Ipv4Addr::from(a);
        let client = ClientId::address(&v4.to_string());
        prop_assert_eq!(client, ClientId::address(&v4.to_ipv6_mapped().to_string()));
        if a != b {
            prop_assert_ne!(client, ClientId::address(&Ipv4Addr::from(b).to_string()));
        }
    }

    #[test]
    fn whatever_is_not_an_address_is_one_client(garbage in "[^0-9a-fA-F:.]*") {
        prop_assert_eq!(ClientId::address(&garbage), ClientId::address(""));
    }
}
