//! The memory that reviews in flight may hold together: bodies while they are read and
//! evaluated, answers until they are delivered.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
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
    /// What the reviews of one client address may hold together.
    source_limit: usize,
    /// Bytes held per client address (entries at 0 are removed).
    sources: Mutex<HashMap<IpAddr, usize>>,
    used: AtomicUsize,
    waiting: AtomicUsize,
    released: Notify,
    port: OnceLock<Weak<dyn Relief>>,
}

impl Budget {
    /// A budget of `limit` bytes, of which one client address may hold `source_limit`.
    pub fn new(limit: usize, source_limit: usize) -> Budget {
        Budget {
            limit,
            source_limit,
            sources: Mutex::default(),
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

    pub fn source_limit(&self) -> usize {
        self.source_limit
    }

    /// Bytes the reviews of `source` hold.
    #[cfg(test)]
    pub fn used_by(&self, source: IpAddr) -> usize {
        self.sources().get(&source).copied().unwrap_or(0)
    }

    fn sources(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `bytes` for `source` if they fit both the budget and the source's share of it; for
    /// the budget, also if nothing but the caller's `own` bytes is in use and no one else waits
    /// (a review larger than the whole budget is still served, alone, and never ahead of
    /// ordinary ones). `waiting_self`: 1 when the caller counts among the waiters.
    pub fn try_take(
        &self,
        bytes: usize,
        own: usize,
        waiting_self: usize,
        source: Option<IpAddr>,
    ) -> Result<(), Short> {
        let mut sources = source.map(|_| self.sources());
        if let (Some(sources), Some(source)) = (&sources, source)
            && sources.get(&source).copied().unwrap_or(0) + bytes > self.source_limit
        {
            return Err(Short::Source);
        }
        let alone_allowed = self.waiting.load(Ordering::Acquire) <= waiting_self;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + bytes <= self.limit || (used == own && alone_allowed))
                    .then_some(used + bytes)
            })
            .map_err(|_| Short::Budget)?;
        if let (Some(sources), Some(source)) = (&mut sources, source) {
            *sources.entry(source).or_default() += bytes;
        }
        Ok(())
    }

    pub fn take_anyway(&self, bytes: usize) {
        if self.used.fetch_add(bytes, Ordering::AcqRel) + bytes > self.limit {
            self.relieve();
        }
    }

    /// Gives back `bytes` taken for `source`.
    pub fn give(&self, bytes: usize, source: Option<IpAddr>) {
        if let Some(source) = source {
            let mut sources = self.sources();
            if let Some(held) = sources.get_mut(&source) {
                *held = held.saturating_sub(bytes);
                if *held == 0 {
                    sources.remove(&source);
                }
            }
        }
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

    /// Waits until `bytes` fit (see [`Budget::try_take`] for `own` and `source`).
    pub async fn take(&self, bytes: usize, own: usize, source: Option<IpAddr>) {
        if self.try_take(bytes, own, 0, source).is_ok() {
            return;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if self.try_take(bytes, own, 1, source).is_ok() {
                return;
            }
            self.relieve();
            // Stuck answers become "stuck" only after STUCK_AFTER: look again now and then even
            // if nothing is released meanwhile.
            let _ = tokio::time::timeout(Duration::from_millis(100), released).await;
        }
    }
}

/// Why [`Budget::try_take`] could not take what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// The budget is spent.
    Budget,
    /// The client's share of it is.
    Source,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Bytes of a review taken from the [`Budget`] for its client, given back when dropped.
pub struct Reservation {
    budget: Arc<Budget>,
    source: Option<IpAddr>,
    bytes: usize,
}

impl Reservation {
    /// Holds nothing yet; `source`: the client's address, whose share it counts against.
    pub fn new(budget: Arc<Budget>, source: Option<IpAddr>) -> Self {
        Reservation {
            budget,
            source,
            bytes: 0,
        }
    }

    pub async fn grow(&mut self, bytes: usize) {
        self.budget.take(bytes, self.bytes, self.source).await;
        self.bytes += bytes;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives back all but `bytes` (nothing when it holds no more).
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            self.budget.give(self.bytes - bytes, self.source);
            self.bytes = bytes;
        }
    }

    /// Holds exactly `bytes`: gives back what is over, or waits for what is missing.
    pub async fn resize(&mut self, bytes: usize) {
        if bytes > self.bytes {
            self.grow(bytes - self.bytes).await;
        } else {
            self.shrink_to(bytes);
        }
    }

    /// Grows the reservation if `bytes` fit now; otherwise leaves it as it is and says why.
    pub fn try_grow(&mut self, bytes: usize) -> Result<(), Short> {
        let taken = self.budget.try_take(bytes, self.bytes, 0, self.source);
        match taken {
            Ok(()) => self.bytes += bytes,
            Err(Short::Budget) => self.budget.relieve(),
            Err(Short::Source) => {}
        }
        taken
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.bytes, self.source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_budget_lets_one_oversized_review_through_and_makes_others_wait() {
        let budget = Arc::new(Budget::new(100, 1000));
        budget.take(50, 0, None).await;
        budget.take(100, 50, None).await;
        assert_eq!(
            budget.used(),
            150,
            "alone, a review larger than the budget is served"
        );
        let waiter = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(10, 0, None).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "no room: the next body waits");
        budget.give(150, None);
        waiter.await.expect("woken when memory is given back");
        assert_eq!(budget.used(), 10);
        budget.give(10, None);
        // An oversized review does not go ahead of an ordinary one waiting with it.
        budget.take(95, 0, None).await;
        let ordinary = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(20, 0, None).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let giant = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(500, 0, None).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        budget.give(95, None);
        ordinary.await.expect("the ordinary review goes first");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!giant.is_finished(), "the giant waits for an empty budget");
        budget.give(20, None);
        giant.await.expect("then the giant, alone");
        assert_eq!(budget.used(), 500);
    }

    #[tokio::test]
    async fn one_client_holds_at_most_its_share_and_others_still_get_theirs() {
        let budget = Arc::new(Budget::new(100, 50));
        let (hog, other) = ("10.0.0.1".parse().ok(), "10.0.0.2".parse().ok());
        let mut first = Reservation::new(budget.clone(), hog);
        assert_eq!(first.try_grow(40), Ok(()));
        let mut second = Reservation::new(budget.clone(), hog);
        assert_eq!(second.try_grow(20), Err(Short::Source), "over its share");
        assert_eq!(second.try_grow(10), Ok(()), "within it");
        let mut theirs = Reservation::new(budget.clone(), other);
        assert_eq!(
            theirs.try_grow(50),
            Ok(()),
            "another client's share is whole"
        );
        assert_eq!(budget.used(), 100);
        // A body of the hog waits for the hog's own reviews, not for everyone's.
        let waiter = tokio::spawn({
            let budget = budget.clone();
            async move {
                let mut r = Reservation::new(budget, hog);
                r.grow(30).await;
                r.bytes()
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(theirs);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "room in the budget is not room in its share"
        );
        drop(first);
        assert_eq!(waiter.await.expect("its own review ended"), 30);
        second.shrink_to(0);
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.used_by(hog.expect("address")), 0);
    }
}
