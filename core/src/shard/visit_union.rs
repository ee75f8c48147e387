//! Kept unions: what a read of visitors keeps, so that the next read of the same period reads
//! and merges two sketches instead of one for each of its days.
//!
//! A period's visitors are the union of its days' sketches, and each day's own. A read of the
//! days `from` to `to` splits them ([`visitors`]): the finished days, before the counter's
//! latest (the day its views still count in), whose union and visitors of each day are kept in
//! the shard the first time they are merged ([`VisitStore::save_union`]) and read back whole
//! after, and the rest (the day still counting, and the days after it, which hold no sketch
//! yet) read from their own sketches each time. A later read of the same period that day reads
//! one kept union and one sketch, whatever its length, a period that ends in the future too.
//!
//! - **Always right.** A kept union is the union of the sketches its store holds in its days:
//!   the store drops it whenever one of those is written or deleted (a late visitor, an import,
//!   a hand-over, the counter's delete or expiry, the days kept moving on), and the next read
//!   merges the days again.
//! - **Bounded.** At most [`UNIONS_PER_KEY`] a key, those ending latest kept first (a rolling
//!   period's union ends a day later each day, and yesterday's is no longer asked for); each at
//!   most [`MAX_UNION_DAYS`] days with visitors, 12 bytes each, and one sketch (12,288 bytes).
//! - **Only where it pays.** A range with fewer than two sketches is read as it is.
//!
//! The first read of a period in a day still merges each of its days: a client that asks for
//! many different ranges pays for them in its rate (`crate::edge::rate_limit`).

use crate::shard::visit_table::{VisitStore, MAX_SKETCH_DAYS};
use crate::visits::day::Day;
use crate::visits::sketch::Sketch;
use crate::{Key, Namespace, StoreResult};

/// Kept unions a key holds at most.
pub const UNIONS_PER_KEY: usize = 4;

/// Days with visitors a kept union holds at most: as many as a key keeps sketches. A range
/// holding more (imported days not yet pruned) is merged each time and not kept.
pub const MAX_UNION_DAYS: usize = MAX_SKETCH_DAYS as usize;

/// The visitors of a range of days: each day's that has a sketch, in order, and their union.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeptUnion {
    pub days: Vec<(Day, u64)>,
    pub sketch: Sketch,
}

/// Bytes that are no kept union (see [`KeptUnion::to_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAUnion;

impl KeptUnion {
    /// Adds `day`'s sketch, of a day after every day already in.
    fn add(&mut self, day: Day, sketch: &Sketch) {
        self.days.push((day, sketch.estimate()));
        self.sketch.merge(sketch);
    }

    /// The stored form: the number of days (`u32`), each day (`i32`) and its visitors (`u64`),
    /// then the union's sketch as [`Sketch::to_bytes`] stores it; little-endian.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = u32::try_from(self.days.len()).unwrap_or(u32::MAX).to_le_bytes().to_vec();
        for (day, visitors) in &self.days {
            bytes.extend(day.0.to_le_bytes());
            bytes.extend(visitors.to_le_bytes());
        }
        bytes.extend(self.sketch.to_bytes());
        bytes
    }

    /// Reads a stored form back.
    ///
    /// # Errors
    /// [`NotAUnion`] when the bytes are none: too short, days out of order or past
    /// [`MAX_UNION_DAYS`], or no sketch after them.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, NotAUnion> {
        let (count, rest) = bytes.split_first_chunk::<4>().ok_or(NotAUnion)?;
        let count = usize::try_from(u32::from_le_bytes(*count)).map_err(|_| NotAUnion)?;
        if count > MAX_UNION_DAYS || rest.len() < count * 12 {
            return Err(NotAUnion);
        }
        let (listed, sketch) = rest.split_at(count * 12);
        let days: Vec<(Day, u64)> = listed
            .chunks_exact(12)
            .map(|entry| {
                let (day, visitors) = entry.split_at(4);
                let day = i32::from_le_bytes(day.try_into().expect("4 bytes"));
                (Day(day), u64::from_le_bytes(visitors.try_into().expect("8 bytes")))
            })
            .collect();
        if days.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
            return Err(NotAUnion);
        }
        let sketch = Sketch::from_bytes(sketch).map_err(|_| NotAUnion)?;
        Ok(Self { days, sketch })
    }
}

/// The visitors of `ns`/`key` from `from` to `to`, where `counting` is the counter's latest
/// day (the one its views still count in, if any): the kept union of the days before it
/// (merged and kept when it is not), and the sketches of the rest read as they are. A union
/// that held the day still counting would be dropped by its next view, and merged again by
/// every read of a period that ends in the future (a month, a year).
///
/// # Errors
/// A storage failure, or a stored sketch that does not read back.
pub fn visitors(
    store: &impl VisitStore,
    ns: &Namespace,
    key: &Key,
    (from, to): (Day, Day),
    counting: Option<Day>,
) -> StoreResult<KeptUnion> {
    let live = counting.map_or(to, |day| day.clamp(from, to));
    let mut union =
        if from < live { kept(store, ns, key, (from, live.before(1)))? } else { KeptUnion::default() };
    store.each_sketch(ns, key, (live, to), &mut |day, bytes| {
        union.add(day, &read_sketch(bytes)?);
        Ok(())
    })?;
    Ok(union)
}

/// The kept union of `days`, or else their sketches merged, and kept when there are two or
/// more and at most [`MAX_UNION_DAYS`].
fn kept(store: &impl VisitStore, ns: &Namespace, key: &Key, days: (Day, Day)) -> StoreResult<KeptUnion> {
    // A kept union that does not read back is only a copy: merged again, and replaced.
    if let Some(union) = store.load_union(ns, key, days)?.and_then(|b| KeptUnion::from_bytes(&b).ok()) {
        return Ok(union);
    }
    let mut union = KeptUnion::default();
    store.each_sketch(ns, key, days, &mut |day, bytes| {
        union.add(day, &read_sketch(bytes)?);
        Ok(())
    })?;
    if (2..=MAX_UNION_DAYS).contains(&union.days.len()) {
        // A read that cannot keep it (a full disk) still answers: the next read merges again.
        let _ = store.save_union(ns, key, days, &union.to_bytes());
    }
    Ok(union)
}

fn read_sketch(bytes: &[u8]) -> StoreResult<Sketch> {
    Sketch::from_bytes(bytes).map_err(|_| "a damaged sketch".into())
}

/// Which of a key's kept unions, by their days `(from, to)`, stay when it holds more than
/// [`UNIONS_PER_KEY`]: those ending latest, and of those ending the same day the longest
/// (the dearest to merge again). Answers the ones to drop.
#[must_use]
pub fn unions_past_bound(mut held: Vec<(Day, Day)>) -> Vec<(Day, Day)> {
    held.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    held.split_off(UNIONS_PER_KEY.min(held.len()))
}

#[cfg(test)]
mod tests;
