//! One watcher of a counter (Abacus's `/stream`): the shard keeps the sending half, the
//! reader's stream the other. It holds only the latest value not yet read, so a reader slower
//! than the writes skips values instead of piling them up in the shard's memory.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures_util::Stream;

#[derive(Default)]
struct Slot {
    latest: Option<i64>,
    closed: bool,
    waker: Option<Waker>,
}

/// The shard's half.
pub struct WatchSender(Rc<RefCell<Slot>>);

/// The reader's half: the values, latest first-come, until the counter is deleted.
pub struct WatchStream(Rc<RefCell<Slot>>);

/// A watcher whose reader first reads `initial`.
pub fn watcher(initial: i64) -> (WatchSender, WatchStream) {
    let slot = Rc::new(RefCell::new(Slot { latest: Some(initial), ..Slot::default() }));
    (WatchSender(Rc::clone(&slot)), WatchStream(slot))
}

impl WatchSender {
    /// Whether the reader is still there (its stream not yet dropped).
    pub fn is_read(&self) -> bool {
        Rc::strong_count(&self.0) > 1
    }

    /// Hands over a new value, or (`None`) ends the stream; answers whether the watcher stays.
    pub fn send(&self, value: Option<i64>) -> bool {
        if !self.is_read() {
            return false;
        }
        let mut slot = self.0.borrow_mut();
        match value {
            Some(value) => slot.latest = Some(value),
            None => slot.closed = true,
        }
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        value.is_some()
    }
}

impl Stream for WatchStream {
    type Item = i64;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<i64>> {
        let mut slot = self.0.borrow_mut();
        if let Some(value) = slot.latest.take() {
            return Poll::Ready(Some(value));
        }
        if slot.closed {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[test]
    fn a_reader_gets_the_latest_value_then_the_end() {
        let (sender, mut stream) = watcher(1);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(Some(1)));
        assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Pending);
        assert!(sender.send(Some(2)) && sender.send(Some(3)));
        assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(Some(3)), "2 was skipped, not kept");
        assert!(!sender.send(None));
        assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(None));
        drop(stream);
        assert!(!sender.is_read() && !sender.send(Some(4)));
    }
}
