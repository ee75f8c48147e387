//! Unique visitors and days: what a page-view counter is asked beside its total.
//!
//! - [`sketch`]: a day's distinct visitors, exact while few, a HyperLogLog past that.

pub mod sketch;
