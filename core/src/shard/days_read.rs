//! A read of a counter's days ([`tally`]): the counts of each day of a range, the counter's
//! latest day (in its own row) added to the finished ones, and with `unique` the visitors of
//! each day and of the whole range, a union kept for the days before its last and the last
//! day's sketch ([`crate::shard::visit_union`]).

use crate::shard::protocol::{DayTally, DaysAnswer};
use crate::shard::visit_table::VisitStore;
use crate::shard::visit_union;
use crate::visits::day::Day;
use crate::{CoreError, Counter, Key, Namespace};

/// The counts of `counter` (`None`: it does not exist) in the days `from` to `to`, and with
/// `unique` the distinct visitors of each day and of the range.
///
/// # Errors
/// [`CoreError::StorageUnavailable`] when a read fails.
pub fn tally(
    store: &impl VisitStore,
    ns: &Namespace,
    key: &Key,
    counter: Option<&Counter>,
    (from, to): (Day, Day),
    unique: bool,
) -> Result<DaysAnswer, CoreError> {
    let mut days: Vec<DayTally> = store
        .stored_days(ns, key, from, to)
        .map_err(CoreError::storage)?
        .into_iter()
        .map(|d| DayTally { day: d.day, count: d.count, uniques: None })
        .collect();
    if let Some(today) = counter.and_then(|c| c.today).filter(|t| (from..=to).contains(&t.day)) {
        match days.iter_mut().find(|d| d.day == today.day) {
            // A day moved to its own row and written again later (a zone changed): both count.
            Some(day) => day.count = day.count.saturating_add(today.count),
            None => days.push(DayTally { day: today.day, count: today.count, uniques: None }),
        }
    }
    let mut uniques = None;
    if unique {
        let counting = counter.and_then(|c| c.today).map(|t| t.day);
        let visitors =
            visit_union::visitors(store, ns, key, (from, to), counting).map_err(CoreError::storage)?;
        for (day, estimate) in visitors.days {
            match days.iter_mut().find(|d| d.day == day) {
                Some(tally) => tally.uniques = Some(estimate),
                None => days.push(DayTally { day, count: 0, uniques: Some(estimate) }),
            }
        }
        days.iter_mut().for_each(|d| d.uniques = d.uniques.or(Some(0)));
        uniques = Some(visitors.sketch.estimate());
    }
    days.sort_by_key(|d| d.day);
    Ok(DaysAnswer { value: counter.map_or(0, |c| c.value), exists: counter.is_some(), days, uniques })
}
