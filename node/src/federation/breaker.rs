//! Retry with exponential backoff and jitter behind a circuit breaker, per peer (DESIGN.md,
//! "Federation": "Delivery is durable and retried per peer with backoff and a circuit breaker").
//!
//! Closed: every failure waits `base · 2^(failures-1)` (capped at `max`, with jitter in
//! `[d/2, d]`) before the next try. After `threshold` consecutive failures the breaker opens for
//! the same kind of delay; when that passes it is half-open and lets one try through: success
//! closes it, failure opens it again for longer. The clock is an argument, so tests drive it.

use std::time::{Duration, Instant};

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Delivering.
    Closed,
    /// Not trying until the open period ends.
    Open,
    /// One try allowed.
    HalfOpen,
}

impl State {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }
}

/// Backoff and breaker of one peer.
#[derive(Debug, Clone)]
pub struct Breaker {
    state: State,
    failures: u32,
    retry_at: Option<Instant>,
    threshold: u32,
    base: Duration,
    max: Duration,
}

impl Breaker {
    /// A closed breaker that opens after `threshold` consecutive failures.
    pub fn new(threshold: u32, base: Duration, max: Duration) -> Self {
        Self {
            state: State::Closed,
            failures: 0,
            retry_at: None,
            threshold: threshold.max(1),
            base,
            max: max.max(base),
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Consecutive failures.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long to wait before the next try; `None` means try now (an open breaker whose period
    /// has passed becomes half-open).
    pub fn ready_in(&mut self, now: Instant) -> Option<Duration> {
        match self.retry_at {
            Some(t) if now < t => Some(t - now),
            _ => {
                if self.state == State::Open {
                    self.state = State::HalfOpen;
                }
                None
            }
        }
    }

    /// A try succeeded.
    pub fn success(&mut self) {
        self.state = State::Closed;
        self.failures = 0;
        self.retry_at = None;
    }

    /// The delay after `failures` consecutive failures, before jitter.
    pub fn delay(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(20);
        self.base.saturating_mul(1u32 << exp).min(self.max)
    }

    /// A try failed: returns how long until the next one.
    pub fn failure(&mut self, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let d = self.delay(self.failures);
        let half = d / 2;
        let jitter = Duration::from_micros(rand::random::<u64>() % (half.as_micros() as u64 + 1));
        let wait = half + jitter;
        if self.state == State::HalfOpen || self.failures >= self.threshold {
            self.state = State::Open;
        }
        self.retry_at = Some(now + wait);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_then_half_opens_and_closes() {
        let mut b = Breaker::new(3, Duration::from_millis(100), Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(b.ready_in(t0), None);
        let w1 = b.failure(t0);
        assert!(
            w1 >= Duration::from_millis(50) && w1 <= Duration::from_millis(100),
            "{w1:?}"
        );
        assert_eq!(b.state(), State::Closed);
        assert!(b.ready_in(t0).is_some());
        b.failure(t0);
        let w3 = b.failure(t0);
        assert_eq!(b.state(), State::Open);
        assert!(
            w3 >= Duration::from_millis(200) && w3 <= Duration::from_millis(400),
            "{w3:?}"
        );
        assert!(b.ready_in(t0 + Duration::from_millis(10)).is_some());
        assert_eq!(b.ready_in(t0 + Duration::from_secs(1)), None);
        assert_eq!(b.state(), State::HalfOpen);
        // A failed half-open try opens it again, for longer.
        let w4 = b.failure(t0);
        assert_eq!(b.state(), State::Open);
        assert!(w4 >= Duration::from_millis(400), "{w4:?}");
        assert_eq!(b.ready_in(t0 + Duration::from_secs(2)), None);
        b.success();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.failures(), 0);
        assert_eq!(b.ready_in(t0), None);
    }

    #[test]
    fn delay_is_capped() {
        let b = Breaker::new(5, Duration::from_millis(100), Duration::from_millis(800));
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(4), Duration::from_millis(800));
        assert_eq!(b.delay(40), Duration::from_millis(800));
    }
}
