//! The runtime's clock, read in one place: milliseconds since the Unix epoch, as the core takes
//! time (it never reads a clock itself).

use worker::js_sys::Date;

/// Now, in milliseconds since the Unix epoch. The runtime advances it only across I/O, so two
/// reads in one synchronous stretch agree. (`Date.now()`: one call, no `Date` object made.)
#[must_use]
pub fn now_ms() -> u64 {
    // A whole, non-negative number of milliseconds, far below 2^53.
    Date::now() as u64
}
