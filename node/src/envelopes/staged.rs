//! Envelopes that carry pre-signed kernel records (issue 13 item 7b, the atomic
//! cross-organisation delegate): the records are a [`ke::Change::Record`] each, in participant
//! order one sequence (e.g. B's party's `delegate_offer`, then C's party's
//! `delegate_acceptance` naming it).
//!
//! * prepare: every participant *holds* each commitment the records are about — its own
//!   parties' other records on it are refused `envelope_hold` ([`Envelopes::hold`], called by
//!   the projection before the kernel) — and its driver validates the whole sequence against its
//!   own copy of the commitments with the kernel, without applying, then votes.
//! * commit: each participant writes its own records to its ledger, each once every earlier
//!   record of the sequence is in its ledger ([`Envelopes::records_due`]); federation carries
//!   them (the router also sends a staged record to every participant of its envelope).
//! * abort: the records are dropped; the hold ends.
//!
//! The hold lasts while the envelope is open here and, once COMMITTED, until every record of the
//! sequence is in this ledger — so between a participant's ACK and the records' arrival no
//! record of its organisation's parties changes the commitment under the envelope.

use super::Envelopes;
use accord_kernel as k;
use accord_kernel::envelope::{self as ke, Phase};
use accord_proto::signing::RecordId;

/// The record changes of `env`, in sequence order: (participant, commitment, record id, bytes).
pub fn records(env: &ke::Envelope) -> impl Iterator<Item = (&str, &str, &RecordId, &[u8])> {
    env.participants.iter().flat_map(|p| {
        p.changes.iter().filter_map(move |c| match c {
            ke::Change::Record {
                commitment,
                record,
                signed,
            } => Some((
                p.participant.as_str(),
                commitment.as_str(),
                record,
                signed.as_slice(),
            )),
            _ => None,
        })
    })
}

/// One staged record this node owes its ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordDue {
    /// The envelope.
    pub envelope: String,
    /// The record id.
    pub record: RecordId,
    /// The encoded signed record.
    pub signed: Vec<u8>,
}

impl Envelopes {
    /// prepare: hold every commitment `env`'s records are about and index its records.
    pub(super) fn stage_records(&mut self, env: &ke::Envelope, access: &k::Access) {
        let staged: Vec<(String, RecordId)> = records(env)
            .map(|(_, c, id, _)| (c.to_string(), *id))
            .collect();
        if staged.is_empty() {
            return;
        }
        for (commitment, id) in staged {
            self.staged.insert(id, env.id.clone());
            self.holds.insert(commitment, env.id.clone());
        }
        self.access = Some(access.clone());
    }

    /// Whether `env` is COMMITTED here but some record of its sequence is not in this ledger.
    pub(super) fn awaiting_records(&self, env: &ke::Envelope) -> bool {
        env.phase == Phase::Committed
            && self.holds.values().any(|e| *e == env.id)
            && records(env).any(|(_, _, id, _)| !self.written.contains(id))
    }

    /// The envelope left the open set: its hold ends.
    pub(super) fn release(&mut self, id: &str) {
        self.holds.retain(|_, e| e != id);
        if let Some(env) = self.envelopes.get(id) {
            for (_, _, r, _) in records(env) {
                self.written.remove(r);
            }
        }
    }

    /// The refusal of `record` if an open envelope holds its commitment: a record of this
    /// organisation's parties other than the envelope's own staged ones. Peers' records (their
    /// nodes hold the commitment the same way), the Work service party's, this node's envelope
    /// service's and admission declarations pass.
    pub fn hold(&self, record: &k::Record, access: &k::Access) -> Option<k::Rejection> {
        let env = self.holds.get(&record.commitment)?;
        if record.author.organisation != self.org
            || record.author == access.service
            || record.author.name == super::ENVELOPE_SERVICE
            || matches!(record.op, k::Operation::Admission { .. })
            || self.staged.contains_key(&record.id)
        {
            return None;
        }
        Some(k::Rejection::new(
            k::RejectionCode::EnvelopeHold,
            format!(
                "commitment {:?} is held by the open envelope {env:?} until it ends",
                record.commitment
            ),
        ))
    }

    /// A record reached this ledger (applied or refused by the kernel): if it is a staged record
    /// of an envelope, the sequence moves on here.
    pub fn note_written(&mut self, id: &RecordId) {
        let Some(env) = self.staged.get(id).cloned() else {
            return;
        };
        if self.holds.values().any(|e| *e == env) && self.written.insert(*id) {
            self.touched.insert(env.clone());
            self.reopen(&env);
        }
    }

    /// The envelope whose staged record `id` is, if any (the router sends it to every
    /// participant).
    pub fn staged_envelope(&self, id: &RecordId) -> Option<&ke::Envelope> {
        self.staged.get(id).and_then(|e| self.envelopes.get(e))
    }

    /// Access as of the last prepare that staged records (what the driver validates with).
    pub fn access(&self) -> Option<&k::Access> {
        self.access.as_ref()
    }

    /// The staged records this node owes its ledger now: of every COMMITTED envelope, the next
    /// record of the sequence not yet in this ledger, if it is this organisation's.
    pub fn records_due(&self) -> Vec<RecordDue> {
        let mut out = Vec::new();
        for env in self.open() {
            if env.phase != Phase::Committed {
                continue;
            }
            if let Some((p, _, id, signed)) =
                records(env).find(|(_, _, id, _)| !self.written.contains(*id))
                && p == self.org
            {
                out.push(RecordDue {
                    envelope: env.id.clone(),
                    record: *id,
                    signed: signed.to_vec(),
                });
            }
        }
        out
    }
}
