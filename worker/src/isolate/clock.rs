//! The runtime's clock, read in one place: milliseconds since the Unix epoch, as the core takes
//! time (it never reads a clock itself).

use worker::Date;

/// Now, in milliseconds since the Unix epoch. The runtime advances it only across I/O, so two
/// reads in one synchronous stretch agree.
#[must_use]
pub fn now_ms() -> u64 {
    Date::now().as_millis()
}
