//! The Work projection: the ledger's [`Machine`](crate::ledger::Machine). It feeds every record,
//! in ledger order, to the Work kernel and keeps the derived state of every commitment for reads.
//! Records are the truth; the derived state is persisted (issue 15, item 1, [`store`]): it is
//! written in the same synced batch as the records that change it, with the watermark (the
//! number of records it reflects), so start-up opens it and replays only the records after the
//! watermark. A full replay from sequence 0 reaches the same state (the kernel is deterministic
//! and gets the recorded time); `ledger verify` checks exactly that
//! ([`store::load_commitment`], [`store::for_each_commitment`]).
//!
//! Reads see only synced records (issue 11, item 7): the machine applies each batch to its own
//! working copy ([`working::Working`]: the batch's changes over the stored state), and what the
//! batch changed reaches readers only after the group commit's synced write returned
//! ([`machine::WorkMachine`]). The kernel's effects are kept as derived state too: `Notify`
//! becomes an entry in each recipient's attention list, and `PromiseProduced` a promise record
//! the Work service party still has to write, found through the deadline index
//! ([`Projection::service_due`]).

mod cache;
pub(crate) mod due;
pub(crate) mod feed;
pub mod journal;
mod machine;
pub(crate) mod restart;
pub mod store;
pub(crate) mod timed;
mod working;

pub use machine::WorkMachine;
pub use working::AWAITING_SEQUENCE;

use crate::config::{Config, parse_party};
use crate::error::Error;
use accord_kernel as k;
use accord_proto::pb::work::v1::{self as pb, HistoryEntry};
use accord_proto::signing::RecordId;
use std::sync::Arc;
use store::{Persisted, Stored};

/// The name of the Work service party inside the node's organisation.
pub use crate::ident::WORK_SERVICE;

/// One notification delivered to a party (seed 000: "attention and notification"), derived from
/// the kernel's `Notify` effect of an applied record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attention {
    /// The ledger sequence of the record that raised it (its position in the list).
    pub sequence: u64,
    /// The commitment.
    pub commitment: String,
    /// The record that raised it.
    pub record: RecordId,
    /// Who wrote that record.
    pub from: k::Party,
    /// When it was recorded.
    pub at: i64,
    /// About what.
    pub about: k::Notification,
}

/// A cheap handle to one commitment's stored state; derefs to the kernel's commitment.
#[derive(Debug, Clone)]
pub struct CommitmentRef(Arc<Stored>);

impl std::ops::Deref for CommitmentRef {
    type Target = k::Commitment;
    fn deref(&self) -> &k::Commitment {
        &self.0.commitment
    }
}

impl CommitmentRef {
    /// The claim whose produced promise record is still to be written, if any.
    pub fn promise_due(&self) -> Option<RecordId> {
        self.0.promise_due
    }

    /// The execution claims runs of this organisation still owe the commitment.
    pub fn claims_due(&self) -> &[store::OwedClaim] {
        &self.0.claims_due
    }
}

/// The read side of the projection: the stored state (through its bounded caches).
/// Every read answers from synced state only. Before the ledger opened the store (and in a
/// projection never opened) it is empty.
#[derive(Debug, Default)]
pub struct Projection {
    db: Option<Arc<Persisted>>,
    /// The effects of recently applied run records, for the RunService ([`crate::runs`]).
    pub run_effects: crate::runs::RunEffects,
    /// The commit envelopes (seed 003), kept apart too ([`crate::envelopes`]).
    pub envelopes: crate::envelopes::Envelopes,
    /// Records replayed through the kernel at start-up (after the watermark).
    replayed: u64,
    /// The change feed: which commitments each published batch changed ([`feed`]).
    feed: feed::Feed,
    /// This organisation's Access (from its config), for the views: whose move names the
    /// queue owners it lets act (issue 29; seed 000, "Whose move it is").
    pub view_access: Arc<k::Access>,
}

/// Logs a storage error of a read that answers "nothing" rather than failing.
fn logged<T: Default>(r: Result<T, Error>) -> T {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, "projection read failed");
        T::default()
    })
}

impl Projection {
    /// An empty projection whose views name queue owners by `access` (issue 29).
    pub fn with_view_access(access: k::Access) -> Self {
        Projection {
            view_access: Arc::new(access),
            ..Projection::default()
        }
    }

    /// One commitment's derived state.
    pub fn get(&self, id: &str) -> Option<CommitmentRef> {
        let db = self.db.as_ref()?;
        logged(db.stored(id)).map(CommitmentRef)
    }

    /// The commitments due for the Work service party at `now` (the deadline index, earliest
    /// first, at most `max`), each with the claim whose promise record is still to be written.
    pub fn service_due(&self, now: i64, max: usize) -> Vec<CommitmentRef> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.due(now, max))
            .iter()
            .filter_map(|id| self.get(id))
            .collect()
    }

    /// Up to `max` commitments in id order, starting after `after` (exclusive; from the start
    /// when empty), read from the store in key order.
    pub fn commitments_after(&self, after: &str, max: usize) -> Vec<CommitmentRef> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.commitments_after(after, max))
            .into_iter()
            .map(CommitmentRef)
            .collect()
    }

    /// Up to `max` entries of a party's attention list from `after_sequence` (exclusive when
    /// `Some`), in ledger order.
    pub fn attention(
        &self,
        who: &k::Party,
        after_sequence: Option<u64>,
        max: usize,
    ) -> Vec<Attention> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.attention(who, after_sequence, max))
    }

    /// The applied `acted_upon` records that name `id` (seed 000, "Durability states": acted
    /// upon — "An executor reported an Act based on this record").
    pub fn acted_upon(&self, id: &RecordId) -> Vec<RecordId> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.acted_upon(id))
    }

    /// The history of a commitment id (also of one whose request was rejected).
    pub fn history(&self, id: &str) -> Vec<HistoryEntry> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.history(id))
    }

    /// The organisations of every party that ever had a role on `id` (issue 26: a home's
    /// decisions still reach an organisation whose party left the commitment, e.g. a
    /// delegate's old obligor, whose own records wait for them).
    pub fn past_organisations(&self, id: &str) -> Vec<String> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.past_organisations(id))
    }

    /// Whether `who` may read commitment `id`: it had a role on it, or Access makes it the
    /// commitment's principal or queue owner now ([`k::may_read`]). Unknown ids: false.
    pub fn may_read(&self, id: &str, access: &k::Access, who: &k::Party) -> bool {
        let Some(db) = &self.db else {
            return false;
        };
        logged(db.had_role(id, who)) || self.get(id).is_some_and(|c| k::may_read(&c, access, who))
    }

    /// A receiver of the change feed from now on ([`feed`]); what is already published is in
    /// the reads.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<feed::Changes> {
        self.feed.subscribe()
    }

    /// Up to `max` commitments whose summary changes by time alone in `(after, until]`, with
    /// the time, in time order (the time index, [`timed`]).
    pub fn timed(&self, after: i64, until: i64, max: usize) -> Vec<(i64, String)> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        logged(db.timed(after, until, max))
    }

    /// Run `id`'s derived state (seed 002), read through the run cache ([`crate::runs`]).
    pub fn run(&self, id: &str) -> Option<Arc<k::run::Run>> {
        let db = self.db.as_ref()?;
        logged(db.run(id))
    }

    /// How many runs name run `id` as their parent (a stored index, O(children)).
    pub fn child_count(&self, id: &str) -> usize {
        self.db.as_ref().map_or(0, |d| logged(d.child_count(id)))
    }

    /// How many runs the run cache holds (bounded by `projection.cache_runs`).
    pub fn cached_runs(&self) -> usize {
        self.db.as_ref().map_or(0, |d| d.run_cache().size())
    }

    /// How many records the last start-up replayed through the kernel (those after the stored
    /// watermark: none after a clean stop, at most the last batch after a crash).
    pub fn replayed(&self) -> u64 {
        self.replayed
    }

    /// How many commitments the cache holds (bounded by `projection.cache_commitments`).
    pub fn cached(&self) -> usize {
        self.db.as_ref().map_or(0, |d| d.cache().size())
    }

    /// The store, once the ledger opened it.
    pub fn persisted(&self) -> Option<&Arc<Persisted>> {
        self.db.as_ref()
    }
}

/// Builds the kernel's Access from the validated config: this organisation's configured parties
/// (and its Work service party and operator), each peer organisation as a whole (its records are
/// authenticated by the peer's keys), and the authorities.
pub fn access_from_config(c: &Config) -> Result<k::Access, Error> {
    let mut a = k::Access::new(k::Party::new(&c.name, WORK_SERVICE)).with_members(
        &c.name,
        c.parties
            .iter()
            .map(|p| p.name.clone())
            .chain([WORK_SERVICE.to_string(), "operator".to_string()])
            .chain([crate::envelopes::ENVELOPE_SERVICE.to_string()]),
    );
    for p in &c.peers {
        a = a.with_organisation(&p.name);
    }
    let grant = |a: k::Access,
                 field: &str,
                 list: &[String],
                 auth: k::Authority|
     -> Result<k::Access, Error> {
        let mut a = a;
        for (i, s) in list.iter().enumerate() {
            let (o, n) = parse_party(s).map_err(|r| Error::invalid(format!("{field}[{i}]"), r))?;
            a = a.with_grant(auth.clone(), k::Party::new(o, n));
        }
        Ok(a)
    };
    a = grant(
        a,
        "authorities.administrative_close",
        &c.authorities.administrative_close,
        k::Authority::AdministrativeClose,
    )?;
    a = grant(
        a,
        "authorities.principals",
        &c.authorities.principals,
        k::Authority::Principal,
    )?;
    for (i, s) in c.authorities.queue_owners.iter().enumerate() {
        // "org/name:queue" grants one queue; "org/name" alone is rejected by validation.
        let (party, queue) = s.split_once(':').unwrap_or((s.as_str(), ""));
        let (o, n) = parse_party(party)
            .map_err(|r| Error::invalid(format!("authorities.queue_owners[{i}]"), r))?;
        if !queue.is_empty() {
            a = a.with_grant(
                k::Authority::QueueOwner {
                    queue: queue.to_string(),
                },
                k::Party::new(o, n),
            );
        }
    }
    for (i, s) in c.authorities.observers.iter().enumerate() {
        // "org/name:organisation"; validated before this runs.
        let (party, org) = s.split_once(':').unwrap_or((s.as_str(), ""));
        let (o, n) = parse_party(party)
            .map_err(|r| Error::invalid(format!("authorities.observers[{i}]"), r))?;
        if !org.is_empty() {
            a = a.with_grant(
                k::Authority::Observer {
                    organisation: org.to_string(),
                },
                k::Party::new(o, n),
            );
        }
    }
    Ok(a)
}

/// Commitment read model for `GetCommitment`.
impl Projection {
    /// The derived view of a commitment at `now`, in wire form.
    pub fn commitment(&self, id: &str, now: i64) -> Option<pb::GetCommitmentResponse> {
        let c = self.get(id)?;
        let mut v = crate::view::to_pb(&c, now, &self.view_access);
        v.history = self.history(id);
        Some(v)
    }
}

#[cfg(test)]
pub(crate) mod tests;
