//! Envelopes that carry pre-signed kernel records (issue 13 item 7b, the atomic
//! cross-organisation delegate): the records are a [`ke::Change::Record`] each, in participant
//! order one sequence (e.g. B's party's `delegate_offer`, then C's party's
//! `delegate_acceptance` naming it).
//!
//! * prepare: every participant's driver validates the whole sequence against its own copy of
//!   the commitments with the kernel, without applying (each record's author must have a role
//!   on its commitment, and the coordinator must be able to read it — else the one
//!   [`NACK_NOT_FOUND`](super::NACK_NOT_FOUND)), then votes. Only its own ACK *holds* each
//!   commitment the records are about — its own parties' other records on it are refused
//!   `envelope_hold` ([`Envelopes::hold`], called by the projection before the kernel). A NACK
//!   holds nothing (issue 27).
//! * commit: each participant writes its own records to its ledger, each once every earlier
//!   record of the sequence is in its ledger ([`Envelopes::records_due`]); federation carries
//!   them (the router also sends a staged record to every participant of its envelope).
//! * abort: the records are dropped; the hold ends.
//!
//! The hold lasts while the envelope is open here and, once COMMITTED, until every record of the
//! sequence is in this ledger — so between a participant's ACK and the records' arrival no
//! record of its organisation's parties changes the commitment under the envelope — but never
//! past the envelope's timeout while its outcome has not arrived (checked on this node's own
//! ticks: a silent coordinator holds nothing for long), and an operator may end it
//! (`AdminService.ReleaseHold`). The records of a COMMITTED envelope are still written after
//! the hold ended; the kernel decides them then.

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
    /// prepare: index `env`'s records (the driver validates them before this node votes).
    pub(super) fn stage_records(&mut self, env: &ke::Envelope, access: &k::Access) {
        let staged: Vec<RecordId> = records(env).map(|(_, _, id, _)| *id).collect();
        if staged.is_empty() {
            return;
        }
        for id in staged {
            self.staged.insert(id, env.id.clone());
        }
        self.access = Some(access.clone());
    }

    /// This node's own ACK applied (its driver validated the records first): hold every
    /// commitment `env`'s records are about, unless its holds here already ended.
    pub(super) fn take_holds(&mut self, env: &ke::Envelope) {
        if self.lapsed.contains(&env.id) || env.phase.is_terminal() {
            return;
        }
        let held: Vec<String> = records(env).map(|(_, c, _, _)| c.to_string()).collect();
        for commitment in held {
            self.holds.insert(commitment, env.id.clone());
        }
    }

    /// Whether `env` is COMMITTED here (after this node's ACK) but some record of its sequence
    /// is not in this ledger.
    pub(super) fn awaiting_records(&self, env: &ke::Envelope) -> bool {
        env.phase == Phase::Committed
            && self.voted.get(&env.id).map(|(v, _)| *v) == Some(ke::Vote::Ack)
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
        if self.open.contains(&env) && self.written.insert(*id) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelopes::types;

    const A: &str = "acme";
    const B: &str = "globex";

    fn access_b() -> k::Access {
        k::Access::new(k::Party::new(B, "work-service"))
            .with_members(B, ["bob", crate::envelopes::ENVELOPE_SERVICE])
            .with_organisation(A)
    }

    fn rec(id: u8, author: (&str, &str), commitment: &str, op: k::Operation) -> k::Record {
        k::Record {
            id: [id; 32],
            author: k::Party::new(author.0, author.1),
            commitment: commitment.into(),
            basis: vec![],
            items: vec![],
            op,
        }
    }

    fn env_op(step: ke::EnvelopeStep, event: &str) -> k::Operation {
        k::Operation::Envelope(Box::new(ke::EnvelopeOperation {
            envelope: "d".into(),
            event: event.into(),
            step,
        }))
    }

    /// globex follows acme's delegate envelope: from prepare on, bob's own records on the held
    /// commitment are refused `envelope_hold`, the staged offer and peers' records are not; the
    /// abort ends the hold, and nothing is owed.
    #[test]
    fn prepare_holds_the_commitment_and_the_abort_releases_it() {
        let mut envs = Envelopes::new(B, types::all_defaults());
        let acc = access_b();
        let none = |_: &str, _: &k::Party| None;
        let offer = [9u8; 32];
        let start = ke::EnvelopeStart {
            envelope_type: "obligation_delegate".into(),
            participants: vec![ke::ParticipantChanges {
                participant: B.into(),
                changes: vec![ke::Change::Record {
                    commitment: "job".into(),
                    record: offer,
                    signed: vec![1, 2, 3],
                }],
            }],
        };
        let r = rec(
            1,
            (A, "alice"),
            "d",
            env_op(ke::EnvelopeStep::Start(start), ""),
        );
        assert!(envs.apply(&r, &acc, 10, &none).applied);
        let bob = rec(50, (B, "bob"), "job", k::Operation::Promise);
        assert!(envs.hold(&bob, &acc).is_none(), "not held before prepare");
        let mut p = rec(
            2,
            (A, crate::envelopes::ENVELOPE_SERVICE),
            "d",
            env_op(ke::EnvelopeStep::Prepare, "P"),
        );
        p.basis = vec![[1; 32]];
        assert!(envs.apply(&p, &acc, 11, &none).applied);
        assert!(
            envs.hold(&bob, &acc).is_none(),
            "not held before this node's ACK (the driver validates first)"
        );
        let mut ack = rec(
            4,
            (B, crate::envelopes::ENVELOPE_SERVICE),
            "d",
            env_op(
                ke::EnvelopeStep::Vote {
                    participant: B.into(),
                    vote: ke::Vote::Ack,
                    reason: String::new(),
                },
                "",
            ),
        );
        ack.basis = vec![[2; 32]];
        assert!(envs.apply(&ack, &acc, 11, &none).applied);
        let held = envs.hold(&bob, &acc).expect("held after its ACK");
        assert_eq!(held.code, k::RejectionCode::EnvelopeHold);
        let mut staged = bob.clone();
        staged.id = offer;
        assert!(
            envs.hold(&staged, &acc).is_none(),
            "the staged record passes"
        );
        let peer = rec(51, (A, "alice"), "job", k::Operation::Promise);
        assert!(envs.hold(&peer, &acc).is_none(), "a peer's record passes");
        let other = rec(52, (B, "bob"), "other", k::Operation::Promise);
        assert!(
            envs.hold(&other, &acc).is_none(),
            "another commitment passes"
        );
        assert_eq!(
            envs.staged_envelope(&offer).map(|e| e.id.as_str()),
            Some("d")
        );
        let mut ab = rec(
            3,
            (A, crate::envelopes::ENVELOPE_SERVICE),
            "d",
            env_op(
                ke::EnvelopeStep::Abort {
                    cause: ke::AbortCause::Timeout,
                },
                "A",
            ),
        );
        ab.basis = vec![[2; 32]];
        assert!(envs.apply(&ab, &acc, 12, &none).applied);
        assert!(envs.hold(&bob, &acc).is_none(), "the abort ends the hold");
        assert!(
            envs.records_due().is_empty(),
            "an aborted envelope writes nothing"
        );
        assert_eq!(envs.open().count(), 0);
    }

    /// COMMITTED: the records are owed in sequence order, each once every earlier one is in the
    /// ledger here; the hold lasts until the last one is.
    #[test]
    fn commit_writes_the_records_in_order_and_then_releases() {
        let mut envs = Envelopes::new(B, types::all_defaults());
        let acc = access_b();
        let none = |_: &str, _: &k::Party| None;
        let (offer, acceptance) = ([8u8; 32], [9u8; 32]);
        let change = |id, bytes: u8| ke::Change::Record {
            commitment: "job".into(),
            record: id,
            signed: vec![bytes],
        };
        let start = ke::EnvelopeStart {
            envelope_type: "obligation_delegate".into(),
            participants: vec![
                ke::ParticipantChanges {
                    participant: "initech".into(),
                    changes: vec![change(offer, 1)],
                },
                ke::ParticipantChanges {
                    participant: B.into(),
                    changes: vec![change(acceptance, 2)],
                },
            ],
        };
        let svc = (A, crate::envelopes::ENVELOPE_SERVICE);
        let steps = [
            (1u8, (A, "alice"), ke::EnvelopeStep::Start(start), vec![]),
            (2, svc, ke::EnvelopeStep::Prepare, vec![[1u8; 32]]),
            (
                3,
                (B, crate::envelopes::ENVELOPE_SERVICE),
                ke::EnvelopeStep::Vote {
                    participant: B.into(),
                    vote: ke::Vote::Ack,
                    reason: String::new(),
                },
                vec![[2u8; 32]],
            ),
            (4, svc, ke::EnvelopeStep::Prepared, vec![[3u8; 32]]),
            (5, svc, ke::EnvelopeStep::Commit, vec![[4u8; 32]]),
        ];
        for (id, author, step, basis) in steps {
            let mut r = rec(id, author, "d", env_op(step, "E"));
            r.basis = basis;
            let out = envs.apply(&r, &acc, 10 + id as i64, &none);
            assert!(out.applied, "{out:?}");
        }
        assert_eq!(envs.get("d").map(|e| e.phase), Some(Phase::Committed));
        assert!(envs.records_due().is_empty(), "initech's offer comes first");
        let bob = rec(50, (B, "bob"), "job", k::Operation::Promise);
        assert!(
            envs.hold(&bob, &acc).is_some(),
            "held while records are due"
        );
        envs.note_written(&offer);
        let due = envs.records_due();
        assert_eq!(due.len(), 1);
        assert_eq!(
            (due[0].record, due[0].signed.clone()),
            (acceptance, vec![2])
        );
        envs.note_written(&acceptance);
        assert!(envs.records_due().is_empty());
        assert!(
            envs.hold(&bob, &acc).is_none(),
            "released once every record is here"
        );
        assert_eq!(envs.open().count(), 0);
    }

    fn delegate_start(id: u8) -> k::Record {
        let start = ke::EnvelopeStart {
            envelope_type: "obligation_delegate".into(),
            participants: vec![ke::ParticipantChanges {
                participant: B.into(),
                changes: vec![ke::Change::Record {
                    commitment: "job".into(),
                    record: [9u8; 32],
                    signed: vec![1, 2, 3],
                }],
            }],
        };
        rec(
            id,
            (A, "alice"),
            "d",
            env_op(ke::EnvelopeStep::Start(start), ""),
        )
    }

    fn vote(id: u8, basis: u8, v: ke::Vote) -> k::Record {
        let mut r = rec(
            id,
            (B, crate::envelopes::ENVELOPE_SERVICE),
            "d",
            env_op(
                ke::EnvelopeStep::Vote {
                    participant: B.into(),
                    vote: v,
                    reason: String::new(),
                },
                "",
            ),
        );
        r.basis = vec![[basis; 32]];
        r
    }

    fn tick(id: u8, author: (&str, &str), instant_time: i64) -> k::Record {
        let mut r = rec(
            id,
            author,
            "t",
            k::Operation::Tick(ke::Tick {
                tick_id: format!("t{id}"),
                instant_time,
            }),
        );
        r.items = vec!["d".into()];
        r
    }

    /// Issue 27: a NACK this node casts holds nothing; an ACKed hold of an envelope whose
    /// coordinator goes silent ends on this node's own tick once the timeout (its own
    /// declaration of the type: 30 s) has passed — not on an earlier tick, not on a party's or
    /// a peer's tick — and a later ACK does not take it again.
    #[test]
    fn a_following_participants_hold_ends_on_its_own_tick_after_the_timeout() {
        let acc = access_b();
        let none = |_: &str, _: &k::Party| None;
        let bob = rec(50, (B, "bob"), "job", k::Operation::Promise);
        let prepare = || {
            let mut p = rec(
                2,
                (A, crate::envelopes::ENVELOPE_SERVICE),
                "d",
                env_op(ke::EnvelopeStep::Prepare, "P"),
            );
            p.basis = vec![[1; 32]];
            p
        };
        // The envelope started and prepared, then this node's own vote.
        let voted = |v| {
            let mut envs = Envelopes::new(B, types::all_defaults());
            assert!(envs.apply(&delegate_start(1), &acc, 10, &none).applied);
            assert!(envs.apply(&prepare(), &acc, 1_000, &none).applied);
            assert!(envs.apply(&vote(3, 2, v), &acc, 1_001, &none).applied);
            envs
        };
        // NACK: nothing held.
        let envs = voted(ke::Vote::Nack);
        assert!(envs.hold(&bob, &acc).is_none(), "a NACK holds nothing");
        assert_eq!(envs.holds().count(), 0);
        // ACK, then the coordinator is silent.
        let mut envs = voted(ke::Vote::Ack);
        assert!(envs.hold(&bob, &acc).is_some(), "held after its ACK");
        // A party's tick is refused; a peer's tick does not end this node's hold.
        let by_bob = envs.apply(&tick(4, (B, "bob"), 1_000 + 31_000), &acc, 1_002, &none);
        assert_eq!(by_bob.rejection_code, "not_authorized", "{by_bob:?}");
        let svc_a = (A, crate::envelopes::ENVELOPE_SERVICE);
        assert!(
            envs.apply(&tick(5, svc_a, 1_000 + 31_000), &acc, 1_003, &none)
                .applied
        );
        assert!(
            envs.hold(&bob, &acc).is_some(),
            "a peer's tick ends nothing here"
        );
        // Its own tick before the timeout: still held; at the timeout: ended.
        let svc_b = (B, crate::envelopes::ENVELOPE_SERVICE);
        assert!(
            envs.apply(&tick(6, svc_b, 1_000 + 29_999), &acc, 1_004, &none)
                .applied
        );
        assert!(envs.hold(&bob, &acc).is_some(), "1 ms before the timeout");
        assert!(
            envs.apply(&tick(7, svc_b, 1_000 + 30_000), &acc, 1_005, &none)
                .applied
        );
        assert!(envs.hold(&bob, &acc).is_none(), "ended at the timeout");
        assert!(envs.lapsed("d"));
        assert_eq!(envs.get("d").map(|e| e.phase), Some(Phase::Preparing));
    }
}
