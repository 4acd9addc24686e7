//! Commit envelopes in the node (seed 003, "Lifecycle & Timeout"; issue 13): all envelope
//! state of this node in one struct, [`Envelopes`], with a per-record [`Envelopes::apply`]
//! that the projection calls for every `Operation::Envelope` and `Operation::Tick` record in
//! ledger order — so start-up, re-applying the envelope records the projection indexed
//! (`projection::restart`), reaches the same state (crash recovery).
//!
//! Two roles, decided by the records alone:
//!
//! * **Coordinator** (the envelope was started by a party of this organisation): the kernel's
//!   machine ([`ke::apply_envelope`], [`ke::apply_tick`]) decides; what it owes next
//!   ([`ke::Envelope::due`]) is written by the node's envelope driver (`crate::envelope_driver`).
//! * **Participant** (started elsewhere, this organisation named): the envelope follows the
//!   coordinator's records (prepare → PREPARING, prepared → COMMITTING, commit → COMMITTED,
//!   abort → ABORTED); it never decides. The coordinator may be a participant too.
//!
//! In both roles this organisation's part is its [`ke::Book`]: prepare stages what this node's
//! declaration of the envelope's type says (`stage` rules, run by the kernel's interpreter
//! `ke::rules`; issue 29 item 3) and decides the vote the driver then records; commit applies only after this
//! node's own ACK record is in its ledger (`not_prepared` otherwise); abort runs the
//! idempotent cleanup and lists the envelope once for audit ([`ke::Book::aborted`]).
//! An account is a commitment id; each counter a debit or credit rule of the type names opens
//! with the commitment's `terms.budget.amount` the first time an envelope touches it here.

mod follow;
mod owed;
mod staged;
/// The envelope types a node knows; they live beside the config that declares them.
pub use crate::config::envelope_types as types;

use crate::ledger::Outcome;
use accord_kernel as k;
use accord_kernel::envelope::{self as ke, Phase};
use accord_proto::signing::RecordId;
pub use owed::{Owed, owed};
pub use staged::{RecordDue, records};
use std::collections::{BTreeMap, BTreeSet};

/// The party of each organisation that writes its node's lifecycle records, votes and ticks.
/// Only it does (issue 27): a party's own envelope record other than a start, and a party's
/// tick, are refused `not_authorized` — ticks are the node's own or the operator's
/// (`EnvelopeService.SubmitTick`, `AdminService.ReleaseHold`), both written by the node as it.
pub use crate::ident::ENVELOPE_SERVICE;

/// The one NACK reason for a change on an account or commitment that is not known here or that
/// the envelope's author may not change (issue 27): both are answered alike, so a vote reveals
/// nothing about commitments the coordinator may not read.
pub const NACK_NOT_FOUND: &str =
    "not_found: no such account or commitment here, or not one the envelope's author may change";

/// The instant of an operator's release tick (`AdminService.ReleaseHold`): the end of time, so
/// every timeout has elapsed — a coordinated PREPARING envelope aborts on TIMEOUT, and the
/// holds of the envelope it names end here whatever its phase.
pub const RELEASE_INSTANT: i64 = i64::MAX;

/// A participant's timeout for an envelope whose type it does not declare itself: the seed's
/// example (`abort_after_seconds: 30`). A following participant bounds its holds by its own
/// declaration of the type, never by anything the coordinator sends.
pub const DEFAULT_ABORT_AFTER_MS: i64 = 30_000;

/// One line of an envelope's history at this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The record.
    pub record: RecordId,
    /// Its step's wire name (`envelope_prepare`, …, `tick`).
    pub step: &'static str,
    /// The declared event name, or `ACK`/`NACK by <org>` for a vote.
    pub event: String,
    /// Its author.
    pub author: k::Party,
    /// Ledger time here.
    pub at: i64,
    /// The phase after it.
    pub phase: Phase,
}

/// Every envelope this node coordinates or takes part in, and its participant book.
#[derive(Debug, Default, Clone)]
pub struct Envelopes {
    /// This organisation.
    org: String,
    /// The declared envelope types (config and defaults).
    types: BTreeMap<String, ke::EnvelopeType>,
    /// Each envelope's derived state (the kernel's for coordinated ones; followed ones carry
    /// what the coordinator's records said).
    envelopes: BTreeMap<String, ke::Envelope>,
    /// Each envelope's history here.
    history: BTreeMap<String, Vec<Event>>,
    /// This organisation's accounts and staged changes.
    book: ke::Book,
    /// This node's own vote record per envelope, once applied.
    voted: BTreeMap<String, (ke::Vote, RecordId)>,
    /// The envelopes not yet terminal here (review of issue 13: the driver scans only these,
    /// O(open) per ledger change, not O(history)). Maintained by [`Envelopes::apply`].
    open: BTreeSet<String>,
    /// Every staged record (a [`ke::Change::Record`]) of an envelope prepared here → its
    /// envelope (kept, so the router finds a record's envelope after the envelope closed).
    staged: BTreeMap<RecordId, String>,
    /// Commitments held by open envelopes → the envelope (`staged.rs`): taken when this
    /// node's own ACK applies (after its driver validated the staged records), ended by the
    /// envelope's end here, a NACK it cast, its timeout on this node's tick, or the operator.
    holds: BTreeMap<String, String>,
    /// Envelopes whose holds ended here by timeout or the operator before their outcome
    /// arrived (never held again).
    lapsed: BTreeSet<String>,
    /// Envelopes this node NACKed because a change was on an account it does not know or the
    /// envelope's author may not change ([`NACK_NOT_FOUND`]).
    declined: BTreeSet<String>,
    /// Staged records of open envelopes that are in this ledger.
    written: BTreeSet<RecordId>,
    /// Access as of the last prepare that staged records (the driver validates with it).
    access: Option<k::Access>,
    /// Changed since the last publication (the working copy only).
    touched: BTreeSet<String>,
}

impl Envelopes {
    /// The envelopes of organisation `org` with the declared `types`.
    pub fn new(org: &str, types: BTreeMap<String, ke::EnvelopeType>) -> Self {
        Envelopes {
            org: org.to_string(),
            types,
            ..Default::default()
        }
    }

    /// This organisation.
    pub fn org(&self) -> &str {
        &self.org
    }

    /// One envelope.
    pub fn get(&self, id: &str) -> Option<&ke::Envelope> {
        self.envelopes.get(id)
    }

    /// Every envelope.
    pub fn all(&self) -> impl Iterator<Item = &ke::Envelope> {
        self.envelopes.values()
    }

    /// The envelopes not yet terminal here (COMMITTED and ABORTED ones are left out).
    pub fn open(&self) -> impl Iterator<Item = &ke::Envelope> {
        self.open.iter().filter_map(|id| self.envelopes.get(id))
    }

    /// One envelope's history here.
    pub fn history(&self, id: &str) -> &[Event] {
        self.history.get(id).map_or(&[], Vec::as_slice)
    }

    /// The declared types.
    pub fn types(&self) -> &BTreeMap<String, ke::EnvelopeType> {
        &self.types
    }

    /// This organisation's participant book.
    pub fn book(&self) -> &ke::Book {
        &self.book
    }

    /// Whether this node coordinates `env`.
    pub fn coordinates(&self, env: &ke::Envelope) -> bool {
        env.coordinator.organisation == self.org
    }

    /// This node's own vote record for `id`, once applied.
    pub fn own_vote(&self, id: &str) -> Option<(ke::Vote, RecordId)> {
        self.voted.get(id).copied()
    }

    /// Applies one envelope or tick record at ledger time `now`. `budget(account, author)` is
    /// the balance an account (a commitment's budget) opens with, if the commitment is known
    /// here, carries a budget and the envelope's author `author` may move it
    /// ([`ke::may_move_budget`]); `None` makes this participant decline the envelope.
    pub fn apply(
        &mut self,
        record: &k::Record,
        access: &k::Access,
        now: i64,
        budget: &dyn Fn(&str, &k::Party) -> Option<u64>,
    ) -> Outcome {
        let result = match &record.op {
            _ if !matches!(&record.op, k::Operation::Envelope(op) if matches!(op.step, ke::EnvelopeStep::Start(_)))
                && record.author.name != ENVELOPE_SERVICE =>
            {
                Err(k::Rejection::new(
                    k::RejectionCode::NotAuthorized,
                    format!(
                        "{} records are written only by {}/{ENVELOPE_SERVICE} (the node's driver, \
                         or the operator's SubmitTick)",
                        record.op.wire_name(),
                        record.author.organisation
                    ),
                ))
            }
            k::Operation::Tick(_) => self.tick(record, access, now),
            k::Operation::Envelope(op) => {
                let coordinated = match &op.step {
                    ke::EnvelopeStep::Start(_) => record.author.organisation == self.org,
                    _ => self
                        .envelopes
                        .get(&op.envelope)
                        .is_some_and(|e| self.coordinates(e)),
                };
                if coordinated {
                    self.coordinate(record, op, access, now, budget)
                } else {
                    self.follow(record, op, access, now, budget)
                }
            }
            _ => Err(k::Rejection::new(
                k::RejectionCode::WrongMachine,
                "not an envelope record",
            )),
        };
        crate::convert::outcome(result)
    }

    /// The coordinator's side: the kernel decides; this organisation's own part follows.
    fn coordinate(
        &mut self,
        record: &k::Record,
        op: &ke::EnvelopeOperation,
        access: &k::Access,
        now: i64,
        budget: &dyn Fn(&str, &k::Party) -> Option<u64>,
    ) -> Result<(), k::Rejection> {
        let id = &op.envelope;
        let applied = ke::apply_envelope(self.envelopes.get(id), &self.types, record, access, now)?;
        let before = self.envelopes.get(id).map(|e| e.phase);
        let next = applied.next;
        // This organisation's part, on the transitions (never on duplicates); refused → nothing
        // changes.
        if before != Some(next.phase) || matches!(op.step, ke::EnvelopeStep::Vote { .. }) {
            self.participate(&next, record, op, access, budget)?;
        }
        self.envelopes.insert(id.clone(), next);
        self.log(id, record, now, event_name(op));
        Ok(())
    }

    /// This organisation's part as a participant of `env` (coordinated or followed).
    fn participate(
        &mut self,
        env: &ke::Envelope,
        record: &k::Record,
        op: &ke::EnvelopeOperation,
        access: &k::Access,
        budget: &dyn Fn(&str, &k::Party) -> Option<u64>,
    ) -> Result<(), k::Rejection> {
        let id = &op.envelope;
        if !env.participants.iter().any(|p| p.participant == self.org) {
            return Ok(());
        }
        match &op.step {
            ke::EnvelopeStep::Prepare => {
                self.stage_records(env, access);
                let changes = env.changes_of(&self.org).to_vec();
                // Issue 29 item 3: the changes run this node's own declaration of the type's
                // rules (seed 003: "Each participant executes its abort_cleanup rules"); a type
                // it does not declare cannot be staged here.
                let Some(ty) = self.types.get(&env.envelope_type).cloned() else {
                    self.book.refuse(
                        id,
                        format!(
                            "unknown_envelope_type: {:?} is not declared here",
                            env.envelope_type
                        ),
                    );
                    return Ok(());
                };
                // Consent (issue 27): every budget change is on a commitment known here whose
                // holder (or accountable party) is the envelope's author; else nothing is
                // staged and the answer is the one NACK for "not known or not allowed". Each
                // counter the debit or credit rules of the change's role name opens at the
                // commitment's budget.
                let mut consented = true;
                for c in changes.iter().filter(|c| c.is_budget()) {
                    let a = c.account();
                    match budget(a, &env.coordinator) {
                        Some(balance) => {
                            self.book
                                .open(a, balance, &ke::rules::quantity_fields(&ty, c))
                        }
                        None => consented = false,
                    }
                }
                if consented {
                    self.book.prepare(id, &ty, &changes);
                } else if self.book.decline(id) == ke::Vote::Nack {
                    self.declined.insert(id.clone());
                }
            }
            ke::EnvelopeStep::Vote {
                participant, vote, ..
            } if *participant == self.org => {
                self.voted.entry(id.clone()).or_insert((*vote, record.id));
                match self.voted.get(id).map(|(v, _)| *v) {
                    // The staged records validated (the driver votes ACK only then): hold.
                    Some(ke::Vote::Ack) => self.take_holds(env),
                    // A NACK this node cast ends its holds and its reservation at once.
                    _ => {
                        self.release(id);
                        if self.book.staged.contains_key(id) {
                            self.book.abort(id)?;
                        }
                    }
                }
            }
            ke::EnvelopeStep::Commit => {
                // Issue 13 item 3: never apply a commit before this node's own ACK is recorded.
                if self.voted.get(id).map(|(v, _)| *v) != Some(ke::Vote::Ack) {
                    return Err(k::Rejection::new(
                        k::RejectionCode::NotPrepared,
                        format!("no ACK of {:?} is recorded for {id:?}", self.org),
                    ));
                }
                self.book.commit(id)?;
            }
            ke::EnvelopeStep::Abort { .. } => self.book.abort(id)?,
            _ => {}
        }
        Ok(())
    }

    /// A tick: checked against every envelope it lists that its author's node coordinates.
    fn tick(
        &mut self,
        record: &k::Record,
        access: &k::Access,
        now: i64,
    ) -> Result<(), k::Rejection> {
        let k::Operation::Tick(t) = &record.op else {
            return Ok(());
        };
        let mine = record.author.organisation == self.org;
        for id in &record.items {
            let Some(env) = self.envelopes.get(id) else {
                continue;
            };
            let coordinated = env.coordinator.organisation == record.author.organisation;
            if coordinated && mine {
                // A tick that does not apply to one envelope (a duplicate) leaves it alone.
                if let Ok(a) = ke::apply_tick(env, record, access, now) {
                    self.envelopes.insert(id.clone(), a.next);
                }
            }
            // Every participant, following or coordinating, ends its holds by the envelope's
            // timeout, on its own ticks (issue 27), and at once on the operator's release.
            let lapses = mine && self.holding(id) && self.lapses(id, t.instant_time);
            if lapses {
                self.lapsed.insert(id.clone());
                self.release(id);
            }
            if coordinated || lapses {
                self.log(id, record, now, t.tick_id.clone());
            }
        }
        Ok(())
    }

    /// Whether a tick of this node at `instant` ends the holds of `id`: the operator's release,
    /// or the envelope's timeout (from its prepare here) passed before its outcome arrived.
    fn lapses(&self, id: &str, instant: i64) -> bool {
        let Some(env) = self.envelopes.get(id) else {
            return false;
        };
        instant == RELEASE_INSTANT
            || matches!(
                env.phase,
                Phase::Pending | Phase::Preparing | Phase::Aborting
            ) && env
                .preparing_since
                .is_some_and(|s| instant.saturating_sub(s) >= env.abort_after_ms)
    }

    /// Whether `id` holds a commitment here now.
    pub fn holding(&self, id: &str) -> bool {
        self.holds.values().any(|e| e == id)
    }

    /// Every hold here: (commitment, envelope), in commitment order.
    pub fn holds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.holds.iter().map(|(c, e)| (c.as_str(), e.as_str()))
    }

    /// Whether this node's holds of `id` ended by timeout or the operator.
    pub fn lapsed(&self, id: &str) -> bool {
        self.lapsed.contains(id)
    }

    /// Whether this node NACKed `id` as [`NACK_NOT_FOUND`].
    pub fn declined(&self, id: &str) -> bool {
        self.declined.contains(id)
    }

    fn log(&mut self, id: &str, record: &k::Record, now: i64, event: String) {
        let phase = self.envelopes.get(id).map_or(Phase::Pending, |e| e.phase);
        self.history.entry(id.to_string()).or_default().push(Event {
            record: record.id,
            step: record.op.wire_name(),
            event,
            author: record.author.clone(),
            at: now,
            phase,
        });
        self.touched.insert(id.to_string());
        self.reopen(id);
    }

    /// Keeps `id` in the open set while it is not terminal here.
    fn reopen(&mut self, id: &str) {
        match self.envelopes.get(id) {
            Some(e) if !e.phase.is_terminal() || self.awaiting_records(e) => {
                self.open.insert(id.to_string());
            }
            _ => {
                if self.open.remove(id) {
                    self.release(id);
                }
            }
        }
    }

    /// Copies what changed since the last call into `shadow` (the envelopes as they will be
    /// published) and, if anything did, returns a copy of it to publish once the batch is
    /// synced (issue 14: the working copy may be a batch further by then).
    pub fn publish_pending(&mut self, shadow: &mut Envelopes) -> Option<Envelopes> {
        let changed = !self.touched.is_empty()
            || shadow.org.is_empty()
            || self.book.aborted.len() > shadow.book.aborted.len();
        self.publish_into(shadow);
        changed.then(|| shadow.clone())
    }

    /// Copies what changed since the last call into `published` (O(envelopes touched)).
    pub fn publish_into(&mut self, published: &mut Envelopes) {
        if published.org.is_empty() {
            published.org = self.org.clone();
            published.types = self.types.clone();
        }
        if !self.touched.is_empty() && (!self.staged.is_empty() || !published.holds.is_empty()) {
            // Small: only envelopes carrying records, while open (`staged.rs`); `written` too
            // once a hold ended early (the records of a COMMITTED envelope are still owed).
            published.holds = self.holds.clone();
            published.written = self.written.clone();
            published.access = self.access.clone();
        }

        for id in std::mem::take(&mut self.touched) {
            if let Some(e) = self.envelopes.get(&id) {
                for c in e.changes_of(&self.org) {
                    if let Some(a) = self.book.accounts.get(c.account()) {
                        published
                            .book
                            .accounts
                            .insert(c.account().to_string(), a.clone());
                    }
                }
                published.envelopes.insert(id.clone(), e.clone());
                for (_, _, r, _) in records(e) {
                    if let Some(x) = self.staged.get(r) {
                        published.staged.insert(*r, x.clone());
                    }
                }
            }
            published.reopen(&id);
            if let Some(h) = self.history.get(&id) {
                let to = published.history.entry(id.clone()).or_default();
                to.extend_from_slice(&h[to.len().min(h.len())..]);
            }
            copy(&self.book.staged, &mut published.book.staged, &id);
            copy(&self.book.votes, &mut published.book.votes, &id);
            copy(&self.book.outcomes, &mut published.book.outcomes, &id);
            copy(&self.book.reasons, &mut published.book.reasons, &id);
            copy(&self.voted, &mut published.voted, &id);
            copy_set(&self.lapsed, &mut published.lapsed, &id);
            copy_set(&self.declined, &mut published.declined, &id);
        }
        let have = published.book.aborted.len();
        if let Some(tail) = self.book.aborted.get(have..) {
            published.book.aborted.extend_from_slice(tail);
        }
    }
}

fn copy<V: Clone>(from: &BTreeMap<String, V>, to: &mut BTreeMap<String, V>, id: &str) {
    match from.get(id) {
        Some(v) => {
            to.insert(id.to_string(), v.clone());
        }
        None => {
            to.remove(id);
        }
    }
}

fn copy_set(from: &BTreeSet<String>, to: &mut BTreeSet<String>, id: &str) {
    if from.contains(id) {
        to.insert(id.to_string());
    } else {
        to.remove(id);
    }
}

/// What the history shows as the event: the declared name, or the vote.
fn event_name(op: &ke::EnvelopeOperation) -> String {
    match &op.step {
        ke::EnvelopeStep::Vote {
            participant, vote, ..
        } => format!(
            "{} by {participant}",
            match vote {
                ke::Vote::Ack => "ACK",
                ke::Vote::Nack => "NACK",
            }
        ),
        ke::EnvelopeStep::Start(s) => s.envelope_type.clone(),
        _ => op.event.clone(),
    }
}

#[cfg(test)]
mod tests;
