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
//! Keys in cf `inbox`: `x ‖ 0 ‖ at (i64 BE) ‖ 0 ‖ n (u64 BE)` → [`Refusal`]. Refusals write
//! nothing to the ledger.

use super::db;
use super::inbox::CF;
use crate::config::LimitsConfig;
use crate::error::Error;
use crate::ident::truncate;
use crate::ledger::Store;
use crate::node::Node;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Longest stored field (peer, code, detail), in bytes.
pub const MAX_FIELD_BYTES: usize = 256;
/// Sources whose buckets are remembered; beyond, sources share one bucket.
const MAX_SOURCES: usize = 4096;
/// Largest page of `ListRefusals`.
pub const MAX_PAGE: usize = 1000;

/// A refused envelope or call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refusal {
    /// The peer it claimed to come from.
    pub peer: String,
    /// The reason code.
    pub code: String,
    /// Detail.
    pub detail: String,
    /// When.
    pub at: i64,
}

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
        let cf = store.cf(CF)?;
        if st.count.is_none() {
            let mut it = store.db().raw_iterator_cf(cf);
            it.seek(b"x\0");
            let mut n = 0;
            while it.key().is_some_and(|k| k.starts_with(b"x\0")) {
                n += 1;
                it.next();
            }
            st.count = Some(n);
        }
        let r = Refusal {
            peer: truncate(&r.peer, MAX_FIELD_BYTES),
            code: truncate(&r.code, MAX_FIELD_BYTES),
            detail: truncate(&r.detail, MAX_FIELD_BYTES),
            at: r.at,
        };
        st.n += 1;
        let mut batch = rocksdb::WriteBatch::default();
        let k = db::key(&[b"x", &r.at.to_be_bytes(), &st.n.to_be_bytes()]);
        db::put(&mut batch, store, CF, &k, &r)?;
        let mut count = st.count.unwrap_or(0) + 1;
        // The oldest go: beyond the count, or older than the age bound.
        let cutoff = r.at.saturating_sub(self.max_age_ms);
        let mut it = store.db().raw_iterator_cf(cf);
        it.seek(b"x\0");
        while let Some(key) = it.key() {
            if !key.starts_with(b"x\0") {
                break;
            }
            let at = key
                .get(2..10)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(i64::from_be_bytes)
                .unwrap_or(i64::MIN);
            if count <= self.max && at >= cutoff {
                break;
            }
            batch.delete_cf(cf, key);
            count -= 1;
            it.next();
        }
        it.status().map_err(|e| Error::Storage(e.into_string()))?;
        db::write(store, batch, false)?;
        st.count = Some(count);
        Ok(())
    }

    /// A page of refusals, newest first, starting after `token` (from a previous page; "" for
    /// the first). Returns the page and the token of the next ("" at the end).
    pub fn page(
        &self,
        store: &Store,
        token: &str,
        size: usize,
    ) -> Result<(Vec<Refusal>, String), Error> {
        let size = size.clamp(1, MAX_PAGE);
        let mut it = store.db().raw_iterator_cf(store.cf(CF)?);
        if token.is_empty() {
            it.seek_for_prev(b"x\x01");
        } else {
            let k = hex::decode(token)
                .ok()
                .filter(|k| k.starts_with(b"x\0"))
                .ok_or_else(|| Error::invalid("page_token", "not a token from ListRefusals"))?;
            it.seek_for_prev(&k);
            if it.key() == Some(k.as_slice()) {
                it.prev();
            }
        }
        let mut out = Vec::new();
        let mut last = Vec::new();
        while out.len() < size {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            if !k.starts_with(b"x\0") {
                break;
            }
            out.push(db::decode(CF, v)?);
            last = k.to_vec();
            it.prev();
        }
        it.status().map_err(|e| Error::Storage(e.into_string()))?;
        let more = it.key().is_some_and(|k| k.starts_with(b"x\0"));
        let next = if more && !last.is_empty() {
            hex::encode(last)
        } else {
            String::new()
        };
        Ok((out, next))
    }
}

/// Records a refusal whose source is the claimed `peer` (logged with its code, kept within the
/// ring's bounds) and returns the error to answer.
pub fn refuse(node: &Node, peer: &str, code: &'static str, detail: String) -> Error {
    refuse_from(node, peer, peer, code, detail)
}

/// [`refuse`] with an explicit rate-limit source (a remote IP for callers without a peer
/// identity).
pub fn refuse_from(
    node: &Node,
    source: &str,
    peer: &str,
    code: &'static str,
    detail: String,
) -> Error {
    let detail = truncate(&detail, MAX_FIELD_BYTES);
    let peer = truncate(peer, MAX_FIELD_BYTES);
    tracing::warn!(peer = %peer, source = %truncate(source, 64), code, detail = %detail, "federation: refused");
    node.metrics.refusal(code);
    let r = Refusal {
        peer,
        code: code.to_string(),
        detail: detail.clone(),
        at: node.clock.now_ms(),
    };
    if let Err(e) = node.refusals.record(node.ledger.store(), source, r) {
        tracing::warn!(error = %e, "refusal not stored");
    }
    Error::Refused { code, detail }
}
