//! The per-peer budget of records rejected at the door (issue 8, "rejected peer records are
//! bounded per peer"). A record rejected before the kernel (`malformed`, `unauthorized_author`,
//! `unknown_key`, `bad_signature`, `key_not_for_author`) or quarantined `unproven` still costs an
//! admission declaration in the ledger; an honest peer sends almost none. Each peer has a token
//! bucket of [`BURST`] such records, refilled at [`PER_MINUTE`] a minute. An envelope that needs
//! more tokens than are left is answered RESOURCE_EXHAUSTED before anything of it is written (the
//! sender retries smaller and slower); the bucket is in memory, so a restart refills it.
//! Kernel rejections (`invalid_operation:*`) are ordinary outcomes and cost nothing here.

use std::collections::HashMap;
use std::sync::Mutex;

/// Door rejections a peer may cause at once.
pub const BURST: u32 = 256;
/// Door rejections a peer may cause per minute, sustained.
pub const PER_MINUTE: u32 = 60;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: i64,
}

/// Buckets by (receiving node, peer): several nodes may run in one process (tests, demo).
static BUCKETS: Mutex<Option<HashMap<(String, String), Bucket>>> = Mutex::new(None);

/// Takes `n` tokens from the bucket of `peer` at node `own` at time `now` (Unix ms), or none
/// and returns false when fewer are left.
pub fn take(own: &str, peer: &str, n: u32, now: i64) -> bool {
    if n == 0 {
        return true;
    }
    let Ok(mut g) = BUCKETS.lock() else {
        return false;
    };
    let map = g.get_or_insert_with(HashMap::new);
    let b = map
        .entry((own.to_string(), peer.to_string()))
        .or_insert(Bucket {
            tokens: f64::from(BURST),
            at: now,
        });
    let elapsed = (now - b.at).max(0) as f64;
    b.tokens = (b.tokens + elapsed * f64::from(PER_MINUTE) / 60_000.0).min(f64::from(BURST));
    b.at = now;
    if b.tokens >= f64::from(n) {
        b.tokens -= f64::from(n);
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refill_per_peer() {
        assert!(take("t-own", "p1", BURST, 0));
        assert!(!take("t-own", "p1", 1, 0), "the burst is spent");
        assert!(take("t-own", "p2", 1, 0), "another peer has its own bucket");
        assert!(!take("t-own", "p1", 2, 1_000), "one token a second");
        assert!(take("t-own", "p1", 1, 1_000));
        assert!(take("t-own", "p1", 60, 61_000));
        assert!(
            !take("t-own", "p1", BURST + 1, i64::MAX / 2),
            "never more than the burst"
        );
    }
}
