//! Drills: test-only faults the specs ask for by environment variable, compiled in only with
//! the `drills` cargo feature (the build `make test` runs; `make dev`, `make deploy` and the
//! bench build without it, where each drill is a constant `false` the compiler removes).
//!
//! A call's faults (stalled, answer lost) come in at the shard client (`shared::shard_client`),
//! the seam every call to a shard or relay goes through, so no caller knows of them; a shard's
//! own (a failed alarm, a held group or hand-over) at the one place in the shard each perturbs.
//!
//! - `EDGECOUNT_DRILL_STALLED_CALLS=N`: this isolate's first N shard calls are sent and then
//!   waited on as if their shard never answered (the answer deadline's path).
//! - `EDGECOUNT_DRILL_LOST_FLUSH_ANSWERS=N`: this isolate's first N one-way flush answers are
//!   discarded as if lost on the way back, after the shard applied them (the resend's replay).
//! - `EDGECOUNT_DRILL_HELD_HAND_OVERS=1`: during a change of the shard count, no shard's alarm
//!   hands keys over, so that a spec takes keys over by request before any is handed over.
//! - `EDGECOUNT_DRILL_FAILED_ALARMS=N`: the first N tries of this isolate's shards at setting
//!   their alarm after storing a call's writes fail, with a storage error whose text says
//!   "overloaded" (the rejection that follows must still read as stored).
//! - `EDGECOUNT_DRILL_GROUP_AFTER=N`: a shard's first group waits until N calls have arrived
//!   while it waited, queued, refused or run at once (20 seconds at most), so that a spec
//!   knows which calls ran together.

use worker::Env;

/// Whether this shard call, once sent, is to be waited on as if its shard never answered.
#[cfg(feature = "drills")]
pub fn stalls_call(env: &Env) -> bool {
    thread_local! {
        static FIRED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    FIRED.with(|fired| fires(fired, limit(env, "EDGECOUNT_DRILL_STALLED_CALLS")))
}

/// Whether this one-way flush's answer is to be discarded as if lost on the way back.
#[cfg(feature = "drills")]
pub fn loses_flush_answer(env: &Env) -> bool {
    thread_local! {
        static FIRED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    FIRED.with(|fired| fires(fired, limit(env, "EDGECOUNT_DRILL_LOST_FLUSH_ANSWERS")))
}

/// Whether this try at setting a shard's alarm is to fail.
#[cfg(feature = "drills")]
pub fn fails_alarm(env: &Env) -> bool {
    thread_local! {
        static FIRED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    FIRED.with(|fired| fires(fired, limit(env, "EDGECOUNT_DRILL_FAILED_ALARMS")))
}

#[cfg(not(feature = "drills"))]
#[inline(always)]
pub fn fails_alarm(_env: &Env) -> bool {
    false
}

/// Whether this shard's alarm is to hand no key over.
#[cfg(feature = "drills")]
pub fn holds_hand_overs(env: &Env) -> bool {
    limit(env, "EDGECOUNT_DRILL_HELD_HAND_OVERS") > 0
}

#[cfg(not(feature = "drills"))]
#[inline(always)]
pub fn holds_hand_overs(_env: &Env) -> bool {
    false
}

#[cfg(not(feature = "drills"))]
#[inline(always)]
pub fn stalls_call(_env: &Env) -> bool {
    false
}

#[cfg(not(feature = "drills"))]
#[inline(always)]
pub fn loses_flush_answer(_env: &Env) -> bool {
    false
}

/// The drill's N: its variable as a number, 0 when unset. A value that is not a number is a
/// mistake in a spec, so it stops the isolate rather than running the spec without its fault.
#[cfg(feature = "drills")]
fn limit(env: &Env, var: &str) -> u32 {
    env.var(var).map_or(0, |value| {
        value.to_string().trim().parse().unwrap_or_else(|_| panic!("{var} is not a number: {value}"))
    })
}

/// Whether the drill fires this time: `fired` counts its firings so far, `limit` is its N.
#[cfg(feature = "drills")]
fn fires(fired: &std::cell::Cell<u32>, limit: u32) -> bool {
    let firing = fired.get() < limit;
    if firing {
        fired.set(fired.get() + 1);
    }
    firing
}

/// Whether this shard's group is to wait for arrivals first (`EDGECOUNT_DRILL_GROUP_AFTER=N`):
/// only the first group of the isolate.
#[cfg(feature = "drills")]
pub fn holds_group(env: &Env) -> bool {
    thread_local! {
        static FIRED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    limit(env, "EDGECOUNT_DRILL_GROUP_AFTER") > 0 && FIRED.with(|fired| fires(fired, 1))
}

#[cfg(not(feature = "drills"))]
#[inline(always)]
pub fn holds_group(_env: &Env) -> bool {
    false
}

/// Waits until `arrived` counts `EDGECOUNT_DRILL_GROUP_AFTER` calls (queued, refused or run at
/// once), 20 s at most: a spec then knows which calls ran together.
pub async fn wait_for_arrivals(env: &Env, arrived: impl Fn() -> usize) {
    let wanted = env
        .var("EDGECOUNT_DRILL_GROUP_AFTER")
        .ok()
        .and_then(|value| value.to_string().trim().parse::<usize>().ok())
        .unwrap_or(0);
    let deadline = crate::shared::clock::now_ms() + 20_000;
    while arrived() < wanted && crate::shared::clock::now_ms() < deadline {
        crate::shared::tasks::sleep(2).await;
    }
}
