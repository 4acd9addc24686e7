//! The Work projection: the ledger's [`Machine`](crate::ledger::Machine). It feeds every record,
//! in ledger order, to the Work kernel and keeps the derived state of every commitment for reads.
//! Records are the truth: at start-up the ledger replays them all through the machine's
//! `restore`, which reaches the same states and outcomes (the kernel is deterministic and gets
//! the recorded time).
//!
//! Reads see only synced records (issue 11, item 7): the machine applies each batch to its own
//! working copy, and what the batch changed is published to the shared projection only after the
//! group commit's synced write returned ([`machine::WorkMachine`]). The kernel's effects are kept
//! here as derived state too, so they survive a restart: `Notify` becomes an entry in each
//! recipient's attention list, and `PromiseProduced` a promise record the Work service party
//! still has to write ([`Projection::service_snapshot`]).

mod machine;

pub use machine::WorkMachine;

use crate::config::{Config, parse_party};
use crate::error::Error;
use crate::ledger::Outcome;
use accord_kernel as k;
use accord_proto::pb::work::v1::{self as pb, HistoryEntry};
use accord_proto::signing::RecordId;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The name of the Work service party inside the node's organisation.
pub const WORK_SERVICE: &str = "work-service";

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

/// The commitments, as the kernel's [`k::Directory`].
#[derive(Debug, Default, Clone)]
struct Commitments(BTreeMap<String, Arc<k::Commitment>>);

impl k::Directory for Commitments {
    fn commitment(&self, id: &str) -> Option<&k::Commitment> {
        self.0.get(id).map(|c| c.as_ref())
    }
}

/// What a batch changed, to publish after its synced write.
#[derive(Debug, Default)]
struct Touched {
    commitments: BTreeSet<String>,
    acted_upon: BTreeSet<RecordId>,
    parties: BTreeSet<k::Party>,
}

/// Derived state of every commitment, with each commitment's history (applied and rejected).
#[derive(Debug, Default)]
pub struct Projection {
    commitments: Commitments,
    history: HashMap<String, Vec<HistoryEntry>>,
    /// Commitments that are not closed: the only ones the Work service party's clock looks at.
    open: BTreeSet<String>,
    /// Record id -> the applied `acted_upon` records about it (durability "acted upon").
    acted_upon: HashMap<RecordId, Vec<RecordId>>,
    /// Commitment id -> every party that held a role on it after some applied record
    /// ([`k::parties_with_role`]): who may read it (issue 8). A party keeps reading a
    /// commitment it had a role on (it has seen it; its records are in it).
    readers: HashMap<String, BTreeSet<k::Party>>,
    /// Each party's attention list, in ledger order (never the author of the record).
    attention: HashMap<k::Party, Vec<Attention>>,
    /// Commitment id -> the claim whose produced promise record is not written yet.
    promises_due: BTreeMap<String, RecordId>,
    /// What changed since the last publication (the machine's working copy only).
    touched: Touched,
    /// The runs (seed 002), kept apart from the commitments ([`crate::runs`]).
    pub runs: crate::runs::Runs,
    /// The commit envelopes (seed 003), kept apart too ([`crate::envelopes`]).
    pub envelopes: crate::envelopes::Envelopes,
}

impl Projection {
    /// One commitment's derived state.
    pub fn get(&self, id: &str) -> Option<&k::Commitment> {
        self.commitments.0.get(id).map(|c| c.as_ref())
    }

    /// Ids of commitments that are not closed.
    pub fn open_ids(&self) -> impl Iterator<Item = &String> {
        self.open.iter()
    }

    /// What the Work service party's clock scans, as cheap handles (taken under the read lock,
    /// scanned without it): every open commitment, with the claim whose produced promise record
    /// is still to be written, if any.
    pub fn service_snapshot(&self) -> Vec<(Arc<k::Commitment>, Option<RecordId>)> {
        self.open
            .iter()
            .filter_map(|id| self.commitments.0.get(id))
            .map(|c| (c.clone(), self.promises_due.get(&c.id).copied()))
            .collect()
    }

    /// Commitments in id order, starting after `after` (exclusive; from the start when empty),
    /// as cheap handles for listing without holding the lock.
    pub fn commitments_after(&self, after: &str) -> Vec<Arc<k::Commitment>> {
        use std::ops::Bound;
        let from = if after.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(after.to_string())
        };
        self.commitments
            .0
            .range((from, Bound::Unbounded))
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// At most `limit` commitments after `after` (id order): a bounded piece of
    /// [`Projection::commitments_after`], for scans that let go of the read lock between pieces
    /// so the ledger writer's publish never waits for a whole scan (issue 14).
    pub fn commitments_after_limit(&self, after: &str, limit: usize) -> Vec<Arc<k::Commitment>> {
        use std::ops::Bound;
        let from = if after.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(after.to_string())
        };
        self.commitments
            .0
            .range((from, Bound::Unbounded))
            .take(limit)
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// A party's attention list from `after_sequence` (exclusive when `Some`), in ledger order.
    pub fn attention(&self, who: &k::Party, after_sequence: Option<u64>) -> &[Attention] {
        let list = self.attention.get(who).map(Vec::as_slice).unwrap_or(&[]);
        match after_sequence {
            None => list,
            Some(s) => &list[list.partition_point(|a| a.sequence <= s)..],
        }
    }

    /// Every party with an attention list (the operator's view).
    pub fn attention_parties(&self) -> impl Iterator<Item = &k::Party> {
        self.attention.keys()
    }

    /// The applied `acted_upon` records that name `id` (seed 000, "Durability states": acted
    /// upon — "An executor reported an Act based on this record").
    pub fn acted_upon(&self, id: &RecordId) -> &[RecordId] {
        self.acted_upon.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The history of a commitment id (also of one whose request was rejected).
    pub fn history(&self, id: &str) -> &[HistoryEntry] {
        self.history.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether `who` may read commitment `id`: it had a role on it, or Access makes it the
    /// commitment's principal or queue owner now ([`k::may_read`]). Unknown ids: false.
    pub fn may_read(&self, id: &str, access: &k::Access, who: &k::Party) -> bool {
        self.readers.get(id).is_some_and(|r| r.contains(who))
            || self.get(id).is_some_and(|c| k::may_read(c, access, who))
    }

    fn put(&mut self, c: k::Commitment) {
        self.readers
            .entry(c.id.clone())
            .or_default()
            .extend(k::parties_with_role(&c));
        if c.is_closed() {
            self.open.remove(&c.id);
        } else {
            self.open.insert(c.id.clone());
        }
        // A produced promise is due only while its claim is the commitment's claim.
        let claim = c.claim.as_ref().map(|cl| cl.record);
        if self
            .promises_due
            .get(&c.id)
            .is_some_and(|due| Some(*due) != claim)
        {
            self.promises_due.remove(&c.id);
        }
        self.touched.commitments.insert(c.id.clone());
        self.commitments.0.insert(c.id.clone(), Arc::new(c));
    }

    /// Keeps an effect as derived state (at append and at replay alike).
    fn effect(&mut self, seq: u64, record: &k::Record, now: i64, e: k::Effect) {
        match e {
            k::Effect::Notify {
                commitment,
                record: rid,
                to,
                about,
            } => {
                for p in to {
                    self.touched.parties.insert(p.clone());
                    self.attention.entry(p).or_default().push(Attention {
                        sequence: seq,
                        commitment: commitment.clone(),
                        record: rid,
                        from: record.author.clone(),
                        at: now,
                        about: about.clone(),
                    });
                }
            }
            k::Effect::PromiseProduced {
                commitment, claim, ..
            } => {
                self.touched.commitments.insert(commitment.clone());
                self.promises_due.insert(commitment, claim);
            }
            k::Effect::StartReopening { commitment, .. } => self.put(*commitment),
        }
    }

    /// Applies one record; returns its outcome. Its effects are kept as derived state.
    fn apply(&mut self, seq: u64, record: &k::Record, access: &k::Access, now: i64) -> Outcome {
        // Run records go to the run machine (seed 002), not to the commitment kernel.
        if matches!(record.op, k::Operation::Run(_)) {
            return self.runs.apply(record, access, now);
        }
        if let k::Operation::Envelope(_) | k::Operation::Tick(_) = record.op {
            let cs = &self.commitments;
            let budget = |a: &str| {
                cs.0.get(a)
                    .and_then(|c| c.terms.budget.as_ref())
                    .map(|b| b.amount)
            };
            return self.envelopes.apply(record, access, now, &budget);
        }
        // apply_with sees every commitment: a taken reopening id is refused, and an admission
        // about a record of no known commitment is applied without derived state.
        // Commit envelopes (issue 13 item 7b): a commitment staged in an open envelope is held.
        let result = match self.envelopes.hold(record, access) {
            Some(r) => Err(r),
            None => k::apply_with(&self.commitments, record, access, now),
        };
        self.envelopes.note_written(&record.id);
        let outcome = match result {
            Ok(k::Applied { next, effects }) => {
                if let Some(c) = next {
                    self.put(c);
                }
                for e in effects {
                    self.effect(seq, record, now, e);
                }
                match &record.op {
                    k::Operation::ActedUpon {
                        record_id: Some(on),
                        ..
                    } => {
                        self.acted_upon.entry(*on).or_default().push(record.id);
                        self.touched.acted_upon.insert(*on);
                    }
                    // The Work service party wrote the promise a claim produced.
                    k::Operation::Promise
                        if record.author == access.service
                            && self
                                .promises_due
                                .get(&record.commitment)
                                .is_some_and(|cl| record.basis.contains(cl)) =>
                    {
                        self.promises_due.remove(&record.commitment);
                    }
                    _ => {}
                }
                Outcome {
                    applied: true,
                    ..Default::default()
                }
            }
            Err(r) => Outcome {
                applied: false,
                rejection_code: r.code.as_str().to_string(),
                rejection_detail: r.detail,
            },
        };
        self.touched.commitments.insert(record.commitment.clone());
        self.history
            .entry(record.commitment.clone())
            .or_default()
            .push(HistoryEntry {
                record_id: record.id.to_vec().into(),
                operation: record.op.wire_name().to_string(),
                outcome: Some(outcome.clone()),
                sequence: seq,
            });
        outcome
    }

    /// Copies what this (working) projection changed since the last publication into
    /// `published`. Histories, attention lists and acted-upon lists only grow, so only their new
    /// tails are copied; commitments are shared handles.
    fn publish_into(&mut self, published: &mut Projection) {
        let touched = std::mem::take(&mut self.touched);
        self.runs.publish_into(&mut published.runs);
        self.envelopes.publish_into(&mut published.envelopes);
        for id in touched.commitments {
            match self.commitments.0.get(&id) {
                Some(c) => {
                    published.commitments.0.insert(id.clone(), c.clone());
                }
                None => {
                    published.commitments.0.remove(&id);
                }
            }
            if self.open.contains(&id) {
                published.open.insert(id.clone());
            } else {
                published.open.remove(&id);
            }
            match self.promises_due.get(&id) {
                Some(cl) => {
                    published.promises_due.insert(id.clone(), *cl);
                }
                None => {
                    published.promises_due.remove(&id);
                }
            }
            if let Some(r) = self.readers.get(&id) {
                published.readers.insert(id.clone(), r.clone());
            }
            if let Some(h) = self.history.get(&id) {
                let to = published.history.entry(id).or_default();
                to.extend_from_slice(&h[to.len().min(h.len())..]);
            }
        }
        for on in touched.acted_upon {
            if let Some(a) = self.acted_upon.get(&on) {
                let to = published.acted_upon.entry(on).or_default();
                to.extend_from_slice(&a[to.len().min(a.len())..]);
            }
        }
        for p in touched.parties {
            if let Some(a) = self.attention.get(&p) {
                let to = published.attention.entry(p).or_default();
                to.extend_from_slice(&a[to.len().min(a.len())..]);
            }
        }
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
    Ok(a)
}

/// Commitment read model for `GetCommitment`.
impl Projection {
    /// The derived view of a commitment at `now`, in wire form.
    pub fn commitment(&self, id: &str, now: i64) -> Option<pb::GetCommitmentResponse> {
        let c = self.get(id)?;
        let mut v = crate::view::to_pb(c, now);
        v.history = self.history(id).to_vec();
        Some(v)
    }
}

#[cfg(test)]
mod tests;
