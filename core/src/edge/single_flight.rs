//! One question asked at a time, its answer reused for a while: what an isolate does with the
//! shards' statistics, so that however many requests ask at once, and however often, each
//! shard is asked at most once per reuse period (and once at a time).
//!
//! Takes the time as an argument. A request that finds the question in flight waits on its own
//! timers and looks again (nothing here wakes one request from another); an asker that never
//! reports back, its request cancelled say, loses its claim after [`SingleFlight::lease_ms`].

/// What a request is to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T> {
    /// Use this answer, at most the reuse period old.
    Use(T),
    /// Ask, and report with [`SingleFlight::finish`] (or [`SingleFlight::abandon`]).
    Ask,
    /// Another request is asking: look again shortly.
    Wait,
}

/// The state of one reused question.
#[derive(Debug, Clone)]
pub struct SingleFlight<T> {
    reuse_ms: u64,
    lease_ms: u64,
    answer: Option<(u64, T)>,
    asking_since: Option<u64>,
}

impl<T: Clone> SingleFlight<T> {
    /// Answers are reused for `reuse_ms` (0: only by requests that waited for them), a claim to
    /// ask lapses after `lease_ms`.
    #[must_use]
    pub fn new(reuse_ms: u64, lease_ms: u64) -> Self {
        Self { reuse_ms, lease_ms, answer: None, asking_since: None }
    }

    /// How long a claim to ask holds.
    #[must_use]
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// What to do at `now_ms`, for a request that started waiting at `since_ms`: an answer
    /// made after it started waiting is always good for it, whatever the reuse period.
    pub fn step(&mut self, now_ms: u64, since_ms: u64) -> Step<T> {
        if let Some((at, answer)) = &self.answer {
            if *at >= since_ms || now_ms.saturating_sub(*at) < self.reuse_ms {
                return Step::Use(answer.clone());
            }
        }
        match self.asking_since {
            Some(since) if now_ms.saturating_sub(since) < self.lease_ms => Step::Wait,
            _ => {
                self.asking_since = Some(now_ms);
                Step::Ask
            }
        }
    }

    /// The asker's answer, at `now_ms`.
    pub fn finish(&mut self, now_ms: u64, answer: T) {
        self.answer = Some((now_ms, answer));
        self.asking_since = None;
    }

    /// The asker got no answer (or was cancelled): the next request to look asks again.
    pub fn abandon(&mut self) {
        self.asking_since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_asks_while_the_others_wait_then_all_use_its_answer() {
        let mut flight = SingleFlight::new(2_000, 15_000);
        assert_eq!(flight.step(0, 0), Step::Ask);
        for _ in 0..1_000 {
            assert_eq!(flight.step(5, 5), Step::Wait);
        }
        flight.finish(10, "figures");
        assert_eq!(flight.step(11, 5), Step::Use("figures"));
        assert_eq!(flight.step(1_999, 1_999), Step::Use("figures"));
        assert_eq!(flight.step(2_010, 2_010), Step::Ask);
    }

    #[test]
    fn without_reuse_only_waiters_share_an_answer() {
        let mut flight = SingleFlight::new(0, 15_000);
        assert_eq!(flight.step(0, 0), Step::Ask);
        assert_eq!(flight.step(1, 1), Step::Wait);
        flight.finish(3, 7);
        assert_eq!(flight.step(4, 1), Step::Use(7));
        assert_eq!(flight.step(4, 4), Step::Ask);
    }

    #[test]
    fn a_claim_that_never_reports_lapses_and_an_abandoned_one_at_once() {
        let mut flight: SingleFlight<u8> = SingleFlight::new(2_000, 15_000);
        assert_eq!(flight.step(0, 0), Step::Ask);
        assert_eq!(flight.step(14_999, 0), Step::Wait);
        assert_eq!(flight.step(15_000, 0), Step::Ask);
        flight.abandon();
        assert_eq!(flight.step(15_001, 15_001), Step::Ask);
    }
}
