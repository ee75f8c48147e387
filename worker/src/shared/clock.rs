//! The runtime's clock, read in one place: milliseconds since the Unix epoch, as the core takes
//! time (it never reads a clock itself).

use worker::js_sys::Date;

use crate::shared::state;

/// Now, in milliseconds since the Unix epoch. The runtime advances it only across I/O, so two
/// reads in one synchronous stretch agree. (`Date.now()`: one call, no `Date` object made.)
#[must_use]
pub fn now_ms() -> u64 {
    // A whole, non-negative number of milliseconds, far below 2^53.
    Date::now() as u64
}

/// Notes that a request arrived: the first one marks when this instance started serving.
pub fn note_request() {
    state::with(|s| {
        let first = &s.first_request_ms;
        if first.get() == 0 {
            first.set(now_ms());
        }
    });
}

/// How long this instance has served, in milliseconds: what Abacus calls its uptime. An
/// instance is one isolate's copy of the worker, so this is not the deployment's age.
#[must_use]
pub fn uptime_ms() -> u64 {
    state::with(|s| now_ms().saturating_sub(s.first_request_ms.get()))
}
