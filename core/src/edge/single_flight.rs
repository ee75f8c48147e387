//! One question asked at a time, its answer reused for a while: what an isolate does with the
//! shards' statistics, so that however many requests ask at once, and however often, each
//! shard is asked at most once per reuse period (and once at a time).
//!
//! Takes the time as an argument. A request that finds the question in flight waits on its own
//! timers and looks again (nothing here wakes one request from another). A failure is shared
//! with the requests that were waiting for it, so that a failing shard is not asked again by
//! each of them in turn; a request that comes after it asks afresh. An asker that never reports
//! back, its request cancelled say, loses its claim after [`SingleFlight::lease_ms`]; each claim
//! has a ticket, so an asker whose claim lapsed cannot end the claim of the one after it.

/// What a request is to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T, E> {
    /// Use this answer, at most the reuse period old.
    Use(T),
    /// The asking this request waited for failed so.
    Failed(E),
    /// Ask, and report with [`SingleFlight::finish`], [`SingleFlight::fail`] or
    /// [`SingleFlight::abandon`], giving this ticket.
    Ask(Ticket),
    /// Another request is asking: look again shortly.
    Wait,
}

/// Names one claim to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// The state of one reused question.
#[derive(Debug, Clone)]
pub struct SingleFlight<T, E> {
    reuse_ms: u64,
    lease_ms: u64,
    answer: Option<(u64, T)>,
    failure: Option<(u64, E)>,
    /// The claim to ask now held, and when it was made.
    asking: Option<(Ticket, u64)>,
    tickets: u64,
}

impl<T: Clone, E: Clone> SingleFlight<T, E> {
    /// Answers are reused for `reuse_ms` (0: only by requests that waited for them), a claim to
    /// ask lapses after `lease_ms`.
    #[must_use]
    pub fn new(reuse_ms: u64, lease_ms: u64) -> Self {
        Self { reuse_ms, lease_ms, answer: None, failure: None, asking: None, tickets: 0 }
    }

    /// How long a claim to ask holds.
    #[must_use]
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// What to do at `now_ms`, for a request that started waiting at `since_ms`: an answer
    /// made after it started waiting is always good for it, whatever the reuse period.
    pub fn step(&mut self, now_ms: u64, since_ms: u64) -> Step<T, E> {
        let answered_at = self.answer.as_ref().map(|(at, _)| *at);
        if let Some((at, answer)) = &self.answer {
            if *at >= since_ms || now_ms.saturating_sub(*at) < self.reuse_ms {
                return Step::Use(answer.clone());
            }
        }
        if let Some((at, error)) = &self.failure {
            if *at >= since_ms && answered_at.is_none_or(|answered| answered < *at) {
                return Step::Failed(error.clone());
            }
        }
        match self.asking {
            Some((_, since)) if now_ms.saturating_sub(since) < self.lease_ms => Step::Wait,
            _ => {
                self.tickets += 1;
                let ticket = Ticket(self.tickets);
                self.asking = Some((ticket, now_ms));
                Step::Ask(ticket)
            }
        }
    }

    /// The answer got with `ticket`, at `now_ms`: kept even if the claim lapsed meanwhile (it
    /// is an answer all the same), but only the claim it names is ended.
    pub fn finish(&mut self, ticket: Ticket, now_ms: u64, answer: T) {
        self.answer = Some((now_ms, answer));
        self.end(ticket);
    }

    /// The asking with `ticket` failed at `now_ms`: those waiting for it get `error`.
    pub fn fail(&mut self, ticket: Ticket, now_ms: u64, error: E) {
        self.failure = Some((now_ms, error));
        self.end(ticket);
    }

    /// The asker with `ticket` gave up (its request was cancelled): the next to look asks.
    pub fn abandon(&mut self, ticket: Ticket) {
        self.end(ticket);
    }

    fn end(&mut self, ticket: Ticket) {
        if self.asking.is_some_and(|(held, _)| held == ticket) {
            self.asking = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asks<T, E>(step: Step<T, E>) -> Ticket {
        match step {
            Step::Ask(ticket) => ticket,
            _ => panic!("expected to ask"),
        }
    }

    #[test]
    fn one_asks_while_the_others_wait_then_all_use_its_answer() {
        let mut flight: SingleFlight<&str, ()> = SingleFlight::new(2_000, 15_000);
        let ticket = asks(flight.step(0, 0));
        for _ in 0..1_000 {
            assert_eq!(flight.step(5, 5), Step::Wait);
        }
        flight.finish(ticket, 10, "figures");
        assert_eq!(flight.step(11, 5), Step::Use("figures"));
        assert_eq!(flight.step(1_999, 1_999), Step::Use("figures"));
        assert!(matches!(flight.step(2_010, 2_010), Step::Ask(_)));
    }

    #[test]
    fn without_reuse_only_waiters_share_an_answer() {
        let mut flight: SingleFlight<u8, ()> = SingleFlight::new(0, 15_000);
        let ticket = asks(flight.step(0, 0));
        assert_eq!(flight.step(1, 1), Step::Wait);
        flight.finish(ticket, 3, 7);
        assert_eq!(flight.step(4, 1), Step::Use(7));
        assert!(matches!(flight.step(4, 4), Step::Ask(_)));
    }

    #[test]
    fn a_failure_reaches_those_who_waited_for_it_and_no_one_after() {
        let mut flight: SingleFlight<u8, &str> = SingleFlight::new(2_000, 15_000);
        let ticket = asks(flight.step(0, 0));
        for _ in 0..1_000 {
            assert_eq!(flight.step(5, 5), Step::Wait);
        }
        flight.fail(ticket, 10, "shard_unavailable");
        assert_eq!(flight.step(11, 5), Step::Failed("shard_unavailable"));
        let again = asks(flight.step(12, 12));
        flight.finish(again, 20, 9);
        // A waiter from before the failure takes the newer answer.
        assert_eq!(flight.step(21, 5), Step::Use(9));
    }

    #[test]
    fn a_claim_that_never_reports_lapses_and_cannot_end_the_next_one() {
        let mut flight: SingleFlight<u8, ()> = SingleFlight::new(2_000, 15_000);
        let lapsed = asks(flight.step(0, 0));
        assert_eq!(flight.step(14_999, 0), Step::Wait);
        let next = asks(flight.step(15_000, 0));
        // The lapsed asker gives up late: the claim it ends is not the one now held.
        flight.abandon(lapsed);
        assert_eq!(flight.step(15_001, 15_001), Step::Wait);
        flight.abandon(next);
        assert!(matches!(flight.step(15_002, 15_002), Step::Ask(_)));
    }
}
