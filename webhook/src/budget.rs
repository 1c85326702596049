//! The memory that reviews in flight may hold together: bodies while they are read and
//! evaluated, answers until they are delivered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// Where the budget asks for room when it runs short: the review port, which closes the
/// connections whose answers do not move.
pub trait Relief: Send + Sync {
    fn relieve(&self);
}

/// Memory for reviews in flight: bodies while they are read and evaluated, answers until they
/// are delivered. A body that does not fit waits for room (and the request's own timeout
/// bounds the wait); an answer is always counted (it exists already) and, over the limit, has
/// the connections whose answers do not move closed to make room.
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
    waiting: AtomicUsize,
    released: Notify,
    port: OnceLock<Weak<dyn Relief>>,
}

impl Budget {
    pub fn new(limit: usize) -> Budget {
        Budget {
            limit,
            used: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
            port: OnceLock::new(),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The port whose stuck connections are closed when memory runs short.
    pub fn relieve_with<R: Relief + 'static>(&self, port: &Arc<R>) {
        let port: Weak<R> = Arc::downgrade(port);
        let port: Weak<dyn Relief> = port;
        let _ = self.port.set(port);
    }

    /// Whether more is in use than the limit.
    pub fn pressed(&self) -> bool {
        self.used() > self.limit
    }

    /// Takes `bytes` if they fit, or if nothing but the caller's `own` bytes is in use and no
    /// one else waits (a review larger than the whole budget is still served, alone, and never
    /// ahead of ordinary ones). `waiting_self`: 1 when the caller counts among the waiters.
    pub fn try_take(&self, bytes: usize, own: usize, waiting_self: usize) -> bool {
        let alone_allowed = self.waiting.load(Ordering::Acquire) <= waiting_self;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + bytes <= self.limit || (used == own && alone_allowed))
                    .then_some(used + bytes)
            })
            .is_ok()
    }

    pub fn take_anyway(&self, bytes: usize) {
        if self.used.fetch_add(bytes, Ordering::AcqRel) + bytes > self.limit {
            self.relieve();
        }
    }

    pub fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        if self.waiting.load(Ordering::Acquire) > 0 {
            self.released.notify_waiters();
        }
    }

    pub fn relieve(&self) {
        if let Some(port) = self.port.get().and_then(Weak::upgrade) {
            port.relieve();
        }
    }

    /// Waits until `bytes` fit (see [`Budget::try_take`] for `own`).
    pub async fn take(&self, bytes: usize, own: usize) {
        if self.try_take(bytes, own, 0) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if self.try_take(bytes, own, 1) {
                return;
            }
            self.relieve();
            // Stuck answers become "stuck" only after STUCK_AFTER: look again now and then even
            // if nothing is released meanwhile.
            let _ = tokio::time::timeout(Duration::from_millis(100), released).await;
        }
    }
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Bytes of a request body taken from the [`Budget`], given back when dropped.
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    pub fn new(budget: Arc<Budget>) -> Self {
        Reservation { budget, bytes: 0 }
    }

    pub async fn grow(&mut self, bytes: usize) {
        self.budget.take(bytes, self.bytes).await;
        self.bytes += bytes;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grows the reservation if `bytes` fit now; otherwise leaves it as it is.
    pub fn try_grow(&mut self, bytes: usize) -> bool {
        let taken = self.budget.try_take(bytes, self.bytes, 0);
        if taken {
            self.bytes += bytes;
        } else {
            self.budget.relieve();
        }
        taken
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_budget_lets_one_oversized_review_through_and_makes_others_wait() {
        let budget = Arc::new(Budget::new(100));
        budget.take(50, 0).await;
        budget.take(100, 50).await;
        assert_eq!(
            budget.used(),
            150,
            "alone, a review larger than the budget is served"
        );
        let waiter = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(10, 0).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "no room: the next body waits");
        budget.give(150);
        waiter.await.expect("woken when memory is given back");
        assert_eq!(budget.used(), 10);
        budget.give(10);
        // An oversized review does not go ahead of an ordinary one waiting with it.
        budget.take(95, 0).await;
        let ordinary = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(20, 0).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let giant = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(500, 0).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        budget.give(95);
        ordinary.await.expect("the ordinary review goes first");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!giant.is_finished(), "the giant waits for an empty budget");
        budget.give(20);
        giant.await.expect("then the giant, alone");
        assert_eq!(budget.used(), 500);
    }
}
