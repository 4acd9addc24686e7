//! Refused envelopes and calls, kept for the operator (`AdminService.ListRefusals`,
//! `accordctl admin refusals`) as a bounded ring (issue 8, "Bounded resources"):
//!
//! - at most `limits.refusals_max` entries and none older than `limits.refusals_max_age_ms`
//!   (the oldest are deleted as new ones arrive);
//! - per source (the claimed peer name, or the remote IP of a caller without a peer identity) a
//!   token bucket of `limits.refusals_burst` refilled at `limits.refusals_per_minute`: over the
//!   rate a refusal is answered and counted ([`Refusals::not_stored`]) but not stored;
//! - every field cut to [`MAX_FIELD_BYTES`] bytes with an ellipsis, so a 10 MB `sender` costs
//!   256 bytes.
//!
//! Kept in cf `inbox` by [`super::decisions`] (`x ‖ at ‖ n` → [`Refusal`]). Refusals write
//! nothing to the ledger.
//!
//! Retention (issue 15, item 4): the count and age bounds are applied as refusals arrive, and
//! also every `limits.refusals_prune_interval_ms` by [`run_retention`] (so refusals age out
//! when none arrive), on its own task: never on the ledger writer's path.

use super::FedContext;
use super::decisions;
use super::error::FedError;
use crate::config::LimitsConfig;
use crate::error::Error;
use crate::ident::truncate;
use crate::ledger::Store;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Longest stored field (peer, code, detail), in bytes.
pub const MAX_FIELD_BYTES: usize = 256;
/// Sources whose buckets are remembered; beyond, sources share one bucket.
const MAX_SOURCES: usize = 4096;
/// Largest page of `ListRefusals`.
pub const MAX_PAGE: usize = 1000;

pub use super::decisions::Refusal;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: i64,
}

#[derive(Debug, Default)]
struct State {
    /// Stored entries, counted on first use.
    count: Option<usize>,
    buckets: HashMap<String, Bucket>,
    n: u64,
}

/// The refusal ring of a node.
#[derive(Debug)]
pub struct Refusals {
    max: usize,
    max_age_ms: i64,
    burst: f64,
    per_ms: f64,
    state: Mutex<State>,
    /// Refusals answered (stored or not).
    pub refused: AtomicU64,
    /// Refusals answered but not stored (their source was over the rate).
    pub not_stored: AtomicU64,
}

impl Refusals {
    /// A ring with the bounds of `[limits]`.
    pub fn new(l: &LimitsConfig) -> Refusals {
        Refusals {
            max: l.refusals_max,
            max_age_ms: i64::try_from(l.refusals_max_age_ms).unwrap_or(i64::MAX),
            burst: f64::from(l.refusals_burst),
            per_ms: f64::from(l.refusals_per_minute) / 60_000.0,
            state: Mutex::new(State::default()),
            refused: AtomicU64::new(0),
            not_stored: AtomicU64::new(0),
        }
    }

    /// Takes a token from `source`'s bucket.
    fn admit(&self, st: &mut State, source: &str, now: i64) -> bool {
        let source = truncate(source, 64);
        if st.buckets.len() >= MAX_SOURCES && !st.buckets.contains_key(&source) {
            // Forget the sources whose buckets have refilled; if none, share one bucket.
            let (burst, per_ms) = (self.burst, self.per_ms);
            st.buckets
                .retain(|_, b| b.tokens + (now - b.at) as f64 * per_ms < burst);
            if st.buckets.len() >= MAX_SOURCES {
                return self.take(st, "(many sources)".into(), now);
            }
        }
        self.take(st, source, now)
    }

    fn take(&self, st: &mut State, source: String, now: i64) -> bool {
        let b = st.buckets.entry(source).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        b.tokens = (b.tokens + (now - b.at).max(0) as f64 * self.per_ms).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Keeps a refusal from `source` (rate-limited, truncated, within the ring's bounds).
    pub fn record(&self, store: &Store, source: &str, r: Refusal) -> Result<(), Error> {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut st = self
            .state
            .lock()
            .map_err(|_| Error::Internal("refusals lock poisoned".into()))?;
        if !self.admit(&mut st, source, r.at) {
            self.not_stored.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if st.count.is_none() {
            st.count = Some(decisions::refusal_count(store)?);
        }
        let r = Refusal {
            peer: truncate(&r.peer, MAX_FIELD_BYTES),
            code: truncate(&r.code, MAX_FIELD_BYTES),
            detail: truncate(&r.detail, MAX_FIELD_BYTES),
            at: r.at,
        };
        st.n += 1;
        // The oldest go: beyond the count, or older than the age bound.
        let cutoff = r.at.saturating_sub(self.max_age_ms);
        let count =
            decisions::put_refusal(store, &r, st.n, st.count.unwrap_or(0), self.max, cutoff)?;
        st.count = Some(count);
        Ok(())
    }

    /// Applies retention at `now`: deletes the oldest refusals beyond the count bound and those
    /// older than the age bound. Returns how many are kept.
    pub fn prune(&self, store: &Store, now: i64) -> Result<usize, Error> {
        let mut st = self
            .state
            .lock()
            .map_err(|_| Error::Internal("refusals lock poisoned".into()))?;
        let count = match st.count {
            Some(c) => c,
            None => decisions::refusal_count(store)?,
        };
        let kept =
            decisions::prune_refusals(store, count, self.max, now.saturating_sub(self.max_age_ms))?;
        st.count = Some(kept);
        Ok(kept)
    }

    /// A page of refusals, newest first, starting after `token` (from a previous page; "" for
    /// the first). Returns the page and the token of the next ("" at the end).
    pub fn page(
        &self,
        store: &Store,
        token: &str,
        size: usize,
    ) -> Result<(Vec<Refusal>, String), Error> {
        decisions::refusal_page(store, token, size.clamp(1, MAX_PAGE))
    }
}

/// Records a refusal whose source is the claimed `peer` (logged with its code, kept within the
/// ring's bounds) and returns the error to answer.
pub fn refuse(cx: &FedContext, peer: &str, code: &'static str, detail: String) -> FedError {
    refuse_from(cx, peer, peer, code, detail)
}

/// [`refuse`] with an explicit rate-limit source (a remote IP for callers without a peer
/// identity).
pub fn refuse_from(
    cx: &FedContext,
    source: &str,
    peer: &str,
    code: &'static str,
    detail: String,
) -> FedError {
    let detail = truncate(&detail, MAX_FIELD_BYTES);
    let peer = truncate(peer, MAX_FIELD_BYTES);
    tracing::warn!(peer = %peer, source = %truncate(source, 64), code, detail = %detail, "federation: refused");
    cx.metrics.refusal(code);
    let r = Refusal {
        peer,
        code: code.to_string(),
        detail: detail.clone(),
        at: cx.clock.now_ms(),
    };
    if let Err(e) = cx.refusals.record(cx.ledger.store(), source, r) {
        tracing::warn!(error = %e, "refusal not stored");
    }
    FedError::refused(code, detail)
}

/// Applies the refusal ring's retention every `interval` until `shutdown` (blocking RocksDB work
/// off the async runtime; never on the ledger writer's path).
pub async fn run_retention(
    refusals: std::sync::Arc<Refusals>,
    store: std::sync::Arc<Store>,
    clock: crate::clock::Clock,
    interval: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let (r, s, now) = (refusals.clone(), store.clone(), clock.now_ms());
        match tokio::task::spawn_blocking(move || r.prune(&s, now)).await {
            Ok(Ok(kept)) => tracing::trace!(kept, "refusal retention"),
            Ok(Err(e)) => tracing::warn!(error = %e, "refusal retention failed"),
            Err(e) => tracing::warn!(error = %e, "refusal retention panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), super::super::db::CFS).unwrap();
        (dir, s)
    }

    fn ring(max: usize, max_age_ms: u64) -> Refusals {
        Refusals::new(&LimitsConfig {
            refusals_max: max,
            refusals_max_age_ms: max_age_ms,
            refusals_burst: 1000,
            ..LimitsConfig::default()
        })
    }

    fn refusal(n: u32, at: i64) -> Refusal {
        Refusal {
            peer: "globex".into(),
            code: "bad_signature".into(),
            detail: format!("refusal {n}"),
            at,
        }
    }

    fn details(r: &Refusals, s: &Store) -> Vec<String> {
        let (page, _) = r.page(s, "", MAX_PAGE).unwrap();
        page.into_iter().map(|r| r.detail).collect()
    }

    #[test]
    fn retention_keeps_the_newest_by_count() {
        let (_d, s) = store();
        let (clock, manual) = Clock::manual(1_000_000);
        let r = ring(3, 3_600_000);
        for n in 0..5 {
            r.record(&s, "globex", refusal(n, clock.now_ms())).unwrap();
            manual.advance(1000);
        }
        assert_eq!(details(&r, &s), ["refusal 4", "refusal 3", "refusal 2"]);
        // A stricter bound at restart: the periodic prune applies it without a new refusal.
        let stricter = ring(1, 3_600_000);
        assert_eq!(stricter.prune(&s, clock.now_ms()).unwrap(), 1);
        assert_eq!(details(&stricter, &s), ["refusal 4"]);
    }

    #[test]
    fn retention_drops_refusals_older_than_the_age_bound_on_a_driven_clock() {
        let (_d, s) = store();
        let (clock, manual) = Clock::manual(1_000_000);
        let r = ring(100, 15_000);
        for n in 0..4 {
            r.record(&s, "globex", refusal(n, clock.now_ms())).unwrap();
            manual.advance(3_000);
        }
        // Now 1_012_000: all four (1_000_000 .. 1_009_000) are within 15 s.
        assert_eq!(r.prune(&s, clock.now_ms()).unwrap(), 4);
        // 8 s later the first two (at 1_000_000 and 1_003_000) are older than 15 s.
        manual.advance(8_000);
        assert_eq!(r.prune(&s, clock.now_ms()).unwrap(), 2);
        assert_eq!(details(&r, &s), ["refusal 3", "refusal 2"]);
        // Much later: none left, and pruning an empty ring is a no-op.
        manual.advance(60_000);
        assert_eq!(r.prune(&s, clock.now_ms()).unwrap(), 0);
        assert!(details(&r, &s).is_empty());
        assert_eq!(r.prune(&s, clock.now_ms()).unwrap(), 0);
    }
}
