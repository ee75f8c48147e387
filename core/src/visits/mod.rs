//! Unique visitors and days: what a page-view counter is asked beside its total.
//!
//! - [`day`]: which day a count lands in (the namespace's time zone) and which days a read asks.
//! - [`namespace`]: a namespace's counts across its keys, by day, and its top keys.
//! - [`sketch`]: a day's distinct visitors, exact while few, a HyperLogLog past that.
//! - [`visitor`]: who a visitor is (an address and user agent on a key and day), hashed so
//!   that it is not kept.

pub mod day;
pub mod namespace;
pub mod sketch;
pub mod visitor;
