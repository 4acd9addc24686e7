//! The node's one clock (issue 10, item 5). The kernel never reads a clock: the ledger writer
//! reads this once per group commit and passes the time in, the Work service party's ticks pass
//! it in, and quarantine timeouts, the breaker, key validity windows and receipts all read the
//! same [`Clock`] handle from [`crate::Node`]. Tests drive a [`ManualClock`] instead of waiting
//! on wall-clock time.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of time in milliseconds since the Unix epoch.
pub trait TimeSource: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now_ms(&self) -> i64;
}

/// The host's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl TimeSource for SystemClock {
    fn now_ms(&self) -> i64 {
        // A clock before 1970 is a misconfigured host; report 0 rather than fail.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to (tests and simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> ManualClock {
        ManualClock(AtomicI64::new(now_ms))
    }

    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl TimeSource for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A cheap, cloneable handle on the node's time source.
#[derive(Clone, Debug)]
pub struct Clock(Arc<dyn TimeSource>);

impl Clock {
    /// The host's wall clock (what `run` uses).
    pub fn system() -> Clock {
        Clock(Arc::new(SystemClock))
    }

    /// A driven clock starting at `now_ms`, and the handle that moves it.
    pub fn manual(now_ms: i64) -> (Clock, Arc<ManualClock>) {
        let m = Arc::new(ManualClock::new(now_ms));
        (Clock(m.clone()), m)
    }

    /// A clock over any time source.
    pub fn from_source(source: Arc<dyn TimeSource>) -> Clock {
        Clock(source)
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let (c, m) = Clock::manual(1_000);
        assert_eq!(c.now_ms(), 1_000);
        m.advance(500);
        assert_eq!(c.clone().now_ms(), 1_500);
        m.set(7);
        assert_eq!(c.now_ms(), 7);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(Clock::system().now_ms() > 1_577_836_800_000);
    }
}
