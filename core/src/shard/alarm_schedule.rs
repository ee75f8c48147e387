//! What a shard remembers of its reclaiming alarm, and what it must do so that an alarm fires
//! by the next expiry.
//!
//! Remembering the alarm spares most writes with a TTL a storage call. But a remembered alarm
//! that is no longer set would stop expiries from ever being reclaimed, since every later write
//! would think an early enough alarm is pending. So the schedule never claims more than it
//! knows: the alarm firing clears it (the runtime deletes an alarm when it fires), any failed
//! storage call forgets it (the next write asks storage again), and an alarm whose reclaiming
//! failed sets a retry rather than ending with no alarm at all.

/// How long after a failed reclaim the alarm tries again.
pub const RETRY_AFTER_FAILURE_MS: u64 = 60_000;
/// The shortest time between two reclaiming alarms: however often things lapse (a counter every
/// 100 ms, say), the alarm runs at most this often and reclaims what lapsed meanwhile in one go.
/// Reads hide a lapsed counter at once; only its storage waits.
pub const MIN_ALARM_GAP_MS: u64 = 2_000;

/// The shard's knowledge of its alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AlarmSchedule {
    /// `None`: not known, ask storage. `Some(None)`: no alarm is set. `Some(Some(ms))`: an
    /// alarm is set for that time.
    known: Option<Option<u64>>,
}

/// What to do so that an alarm fires no later than a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmStep {
    /// An alarm at or before that time is set already.
    AlreadyDue,
    /// The schedule is not known: read the stored alarm, tell [`AlarmSchedule::learned`], and
    /// ask again.
    ReadStored,
    /// Set the alarm for this time, then tell [`AlarmSchedule::scheduled`].
    Set { at: u64 },
}

impl AlarmSchedule {
    /// A schedule that knows nothing yet, as when the shard's object starts.
    #[must_use]
    pub fn unknown() -> Self {
        Self::default()
    }

    /// What to do so that an alarm fires no later than `at` (ms since the epoch).
    #[must_use]
    pub fn step_for(&self, at: u64) -> AlarmStep {
        match self.known {
            None => AlarmStep::ReadStored,
            Some(Some(scheduled)) if scheduled <= at => AlarmStep::AlreadyDue,
            Some(_) => AlarmStep::Set { at },
        }
    }

    /// Storage says which alarm is set (`None`: none).
    pub fn learned(&mut self, stored: Option<u64>) {
        self.known = Some(stored);
    }

    /// An alarm was set for `at`, replacing any other.
    pub fn scheduled(&mut self, at: u64) {
        self.known = Some(Some(at));
    }

    /// The alarm fired: the runtime has deleted it, whatever the handler then manages to do.
    pub fn fired(&mut self) {
        self.known = Some(None);
    }

    /// A storage call about the alarm failed, so what is set is no longer known.
    pub fn forget(&mut self) {
        self.known = None;
    }
}

/// When the alarm should fire after a reclaim that ran at `now_ms`: the next expiry it found,
/// but no sooner than [`MIN_ALARM_GAP_MS`] on; or, if it failed, a retry
/// [`RETRY_AFTER_FAILURE_MS`] later, so that reclaiming never stops.
#[must_use]
pub fn next_alarm_after<E>(now_ms: u64, reclaimed: &Result<Option<u64>, E>) -> Option<u64> {
    match reclaimed {
        Ok(next_expiry) => next_expiry.map(|at| at.max(now_ms + MIN_ALARM_GAP_MS)),
        Err(_) => Some(now_ms + RETRY_AFTER_FAILURE_MS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a step as the shard does, with storage holding `stored` and every call succeeding.
    fn ensure(schedule: &mut AlarmSchedule, at: u64, stored: Option<u64>) -> Option<u64> {
        if schedule.step_for(at) == AlarmStep::ReadStored {
            schedule.learned(stored);
        }
        match schedule.step_for(at) {
            AlarmStep::Set { at } => {
                schedule.scheduled(at);
                Some(at)
            }
            AlarmStep::AlreadyDue => None,
            AlarmStep::ReadStored => unreachable!("the schedule was just learned"),
        }
    }

    #[test]
    fn an_earlier_alarm_is_kept_and_a_later_one_replaced() {
        let mut schedule = AlarmSchedule::unknown();
        assert_eq!(schedule.step_for(5_000), AlarmStep::ReadStored);
        assert_eq!(ensure(&mut schedule, 5_000, Some(3_000)), None);
        assert_eq!(ensure(&mut schedule, 2_000, None), Some(2_000));
        assert_eq!(schedule.step_for(2_000), AlarmStep::AlreadyDue);
    }

    #[test]
    fn a_fired_alarm_is_never_remembered_as_pending() {
        let mut schedule = AlarmSchedule::unknown();
        assert_eq!(ensure(&mut schedule, 1_000, None), Some(1_000));
        schedule.fired();
        // Even if the handler fails before it schedules anything, a later expiry sets an alarm.
        assert_eq!(schedule.step_for(90_000), AlarmStep::Set { at: 90_000 });
    }

    #[test]
    fn a_failed_reclaim_leaves_a_retry_scheduled() {
        let mut schedule = AlarmSchedule::unknown();
        ensure(&mut schedule, 1_000, None);
        schedule.fired();
        let retry = next_alarm_after(1_000, &Err("storage failed")).unwrap();
        assert_eq!(retry, 1_000 + RETRY_AFTER_FAILURE_MS);
        assert_eq!(ensure(&mut schedule, retry, None), Some(retry));
        assert_eq!(schedule.step_for(retry + 1), AlarmStep::AlreadyDue);
        assert_eq!(schedule.step_for(5_000), AlarmStep::Set { at: 5_000 });
    }

    #[test]
    fn a_failed_storage_call_forgets_the_schedule() {
        let mut schedule = AlarmSchedule::unknown();
        ensure(&mut schedule, 1_000, None);
        schedule.forget();
        assert_eq!(schedule.step_for(9_000), AlarmStep::ReadStored);
        // Storage has no alarm after all (the set failed): the next expiry sets one.
        assert_eq!(ensure(&mut schedule, 9_000, None), Some(9_000));
    }

    #[test]
    fn a_successful_reclaim_schedules_the_next_expiry_or_nothing() {
        assert_eq!(next_alarm_after::<()>(1_000, &Ok(Some(70_000))), Some(70_000));
        assert_eq!(next_alarm_after::<()>(1_000, &Ok(None)), None);
    }

    #[test]
    fn alarms_keep_their_gap_however_soon_the_next_lapse() {
        // The next record lapses 100 ms on, or more were left than one alarm reclaims.
        assert_eq!(next_alarm_after::<()>(1_000, &Ok(Some(1_100))), Some(1_000 + MIN_ALARM_GAP_MS));
        assert_eq!(next_alarm_after::<()>(1_000, &Ok(Some(900))), Some(1_000 + MIN_ALARM_GAP_MS));
    }
}
