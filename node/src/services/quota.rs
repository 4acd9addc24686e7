//! Stream quotas (issue 27, item 3: "a party cannot take everyone's share; the operator keeps a
//! reserve"). Every open `ListRecords`, `WatchCommitments` and `WatchAttention` stream holds a
//! [`Share`] until it ends or its client goes away. Three bounds, all in `[limits]`:
//!
//! - `list_streams`: streams open on the node at once, every caller together;
//! - `streams_per_party`: streams one party holds at once (default `list_streams / 8`, at
//!   least 1), so one party's client cannot take every stream;
//! - `operator_stream_reserve`: streams only the operator may take (default
//!   `list_streams / 16`), so the operator can still read and watch when the parties have
//!   taken all theirs.
//!
//! A refusal is `RESOURCE_EXHAUSTED` (`accord-reason: resource_exhausted`) naming the bound.

use crate::auth::Caller;
use crate::error::Error;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The node-wide stream accounts.
#[derive(Debug)]
pub struct Quota {
    limits: Limits,
    open: Mutex<Open>,
}

/// The three bounds, resolved from `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Every stream.
    pub total: usize,
    /// One party's streams.
    pub per_party: usize,
    /// Streams only the operator may take.
    pub reserve: usize,
}

#[derive(Debug, Default)]
struct Open {
    /// Every open stream.
    total: usize,
    /// Open streams of each party (absent: none).
    party: HashMap<String, usize>,
}

impl Quota {
    /// Accounts with these bounds.
    pub fn new(limits: Limits) -> Arc<Quota> {
        Arc::new(Quota {
            limits,
            open: Mutex::default(),
        })
    }

    /// A share for one more stream of `caller`'s, or the bound it would pass. `call` names the
    /// RPC in the refusal.
    pub fn take(self: &Arc<Self>, caller: &Caller, call: &str) -> Result<Share, Error> {
        let l = self.limits;
        let mut open = self
            .open
            .lock()
            .map_err(|_| Error::Internal("stream quota lock poisoned".into()))?;
        let full = |why: String| {
            Err(Error::ResourceExhausted(format!(
                "{why}; {call} refused, retry when a stream ends"
            )))
        };
        if open.total >= l.total {
            return full(format!(
                "{} streams are open (limits.list_streams)",
                l.total
            ));
        }
        if let Caller::Party(p) = caller {
            let mine = open.party.get(p).copied().unwrap_or(0);
            if mine >= l.per_party {
                return full(format!(
                    "party {p} has {mine} streams open (limits.streams_per_party)"
                ));
            }
            let parties: usize = open.party.values().sum();
            if parties >= l.total - l.reserve {
                return full(format!(
                    "the parties have {parties} streams open; the other {} are the operator's \
                     (limits.operator_stream_reserve)",
                    l.reserve
                ));
            }
            *open.party.entry(p.clone()).or_default() += 1;
        }
        open.total += 1;
        Ok(Share {
            quota: self.clone(),
            party: match caller {
                Caller::Party(p) => Some(p.clone()),
                Caller::Operator => None,
            },
        })
    }

    /// Streams open now (every caller).
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.open.lock().map_or(0, |o| o.total)
    }
}

/// One open stream's share; given back when dropped.
#[derive(Debug)]
pub struct Share {
    quota: Arc<Quota>,
    party: Option<String>,
}

impl Drop for Share {
    fn drop(&mut self) {
        let Ok(mut open) = self.quota.open.lock() else {
            return;
        };
        open.total = open.total.saturating_sub(1);
        if let Some(p) = &self.party
            && let Some(n) = open.party.get_mut(p)
        {
            *n -= 1;
            if *n == 0 {
                open.party.remove(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn party(p: &str) -> Caller {
        Caller::Party(p.into())
    }

    #[test]
    fn a_party_takes_its_share_the_parties_leave_the_reserve_and_shares_come_back() {
        // 6 streams: 2 a party, 2 kept for the operator.
        let q = Quota::new(Limits {
            total: 6,
            per_party: 2,
            reserve: 2,
        });
        let a1 = q.take(&party("alice"), "T").unwrap();
        let _a2 = q.take(&party("alice"), "T").unwrap();
        let e = q.take(&party("alice"), "T").unwrap_err().to_string();
        assert!(e.contains("limits.streams_per_party"), "{e}");
        let _b1 = q.take(&party("bob"), "T").unwrap();
        let _b2 = q.take(&party("bob"), "T").unwrap();
        // Four party streams: the last two are the operator's.
        let e = q.take(&party("carol"), "T").unwrap_err().to_string();
        assert!(e.contains("limits.operator_stream_reserve"), "{e}");
        let _o1 = q.take(&Caller::Operator, "T").unwrap();
        let o2 = q.take(&Caller::Operator, "T").unwrap();
        let e = q.take(&Caller::Operator, "T").unwrap_err().to_string();
        assert!(e.contains("limits.list_streams"), "{e}");
        assert_eq!(q.open(), 6);
        // A share given back is free again, for a party within its bounds.
        drop(a1);
        let _c1 = q.take(&party("carol"), "T").unwrap();
        assert_eq!(q.open(), 6);
        // An operator's share given back stays the operator's: the parties hold their four.
        drop(o2);
        let e = q.take(&party("dave"), "T").unwrap_err().to_string();
        assert!(e.contains("limits.operator_stream_reserve"), "{e}");
        let _o2 = q.take(&Caller::Operator, "T").unwrap();
    }
}
