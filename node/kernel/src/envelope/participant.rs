//! A participant's side of an envelope (seed 003, "What happens on abort"; issue 13 items 3 and
//! 5; issue 29 item 3): stage on prepare and answer, apply on commit — never before its own
//! ACK — and run the abort cleanup, idempotently.
//!
//! The accounts of one participant are a [`Book`]. What prepare stages, commit applies and
//! abort reverts is what the envelope type's declared rules say, run by the interpreter in
//! `rules.rs` (the built-in `budget_transfer` is one such declaration: a debit reserves the
//! amount, a credit is noted, both mark the account `pending`; the cleanup subtracts the
//! reservation with a cap at zero and removes the marks with duplicates filtered out). Each
//! envelope's staged entry is consumed by whichever of commit or abort comes first, and the
//! outcome is remembered, so a second delivery of either (after a crash and replay) leaves the
//! same book as one, and a prepare arriving after the outcome stages nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decl::EnvelopeType;
use super::record::{Change, Vote};
use super::rules::{self, Account, Staged};
use super::table::Phase;
use crate::commitment::Commitment;
use crate::record::Party;
use crate::rejection::{Rejection, RejectionCode as C, reject};

/// Whether `author` consents, by the envelope it started, to moving the budget of commitment
/// `c` (issue 27): the account holder — the obligee, whose request set the budget — or the
/// accountable party, the role seed 000 names for a budget ("Budget exhausted: Accountable
/// party"). A participant stages a budget change only on such a commitment; any other (and an
/// unknown one) is declined alike, so the vote says nothing about what exists.
pub fn may_move_budget(c: &Commitment, author: &Party) -> bool {
    c.obligee == *author || c.accountable.as_ref() == Some(author)
}

/// A participant's accounts and its envelopes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Book {
    /// The accounts, by name (e.g. a commitment id).
    pub accounts: BTreeMap<String, Account>,
    /// What each envelope staged here, until its outcome.
    pub staged: BTreeMap<String, Staged>,
    /// Each envelope's answer, once given.
    pub votes: BTreeMap<String, Vote>,
    /// Each envelope's outcome here, once known (COMMITTED or ABORTED).
    pub outcomes: BTreeMap<String, Phase>,
    /// Aborted envelopes, each once (the audit projection of seed 003: "A projection update
    /// records the aborted transfer for audit").
    pub aborted: Vec<String>,
    /// Why each NACK this book gave was given (`insufficient_budget: …`, `no_rule: …`).
    pub reasons: BTreeMap<String, String>,
}

impl Book {
    /// The sum of counter `field` over the accounts (conservation checks).
    pub fn total(&self, field: &str) -> u64 {
        self.accounts.values().map(|a| a.counter(field)).sum()
    }

    /// Opens `account` (if new) and every counter in `fields` it lacks at `opening` — the
    /// amount an account opens with (at the node, the commitment's budget).
    pub fn open(&mut self, account: &str, opening: u64, fields: &[&str]) {
        let acc = self.accounts.entry(account.to_string()).or_default();
        for f in fields {
            acc.counters.entry((*f).to_string()).or_insert(opening);
        }
    }

    /// prepare: stage `changes` for `envelope` as `ty`'s rules declare, and answer. A repeat
    /// returns the first answer; an envelope whose outcome is known is answered NACK and
    /// nothing is staged. NACK (with its reason in [`Book::reasons`]) when a change has no
    /// role in the type, an account is not open, or a debit exceeds what is available.
    pub fn prepare(&mut self, envelope: &str, ty: &EnvelopeType, changes: &[Change]) -> Vote {
        if let Some(v) = self.votes.get(envelope) {
            return *v;
        }
        if self.outcomes.contains_key(envelope) {
            return Vote::Nack;
        }
        let staged = match rules::plan(ty, changes)
            .and_then(|s| rules::stage(&mut self.accounts, &s, envelope).map(|()| s))
        {
            Ok(s) => s,
            Err(reason) => return self.refuse(envelope, reason),
        };
        self.staged.insert(envelope.to_string(), staged);
        self.answer(envelope, Vote::Ack)
    }

    /// Declines `envelope` for `reason` without staging anything: NACK, unless the envelope
    /// was answered already (the first answer stands).
    pub fn refuse(&mut self, envelope: &str, reason: String) -> Vote {
        if let Some(v) = self.votes.get(envelope) {
            return *v;
        }
        self.reasons.insert(envelope.to_string(), reason);
        self.answer(envelope, Vote::Nack)
    }

    /// Declines `envelope` without staging anything (the node found a change it may not
    /// stage): NACK, unless the envelope was answered already (the first answer stands).
    pub fn decline(&mut self, envelope: &str) -> Vote {
        if let Some(v) = self.votes.get(envelope) {
            return *v;
        }
        self.answer(envelope, Vote::Nack)
    }

    fn answer(&mut self, envelope: &str, v: Vote) -> Vote {
        self.votes.insert(envelope.to_string(), v);
        v
    }

    /// commit: apply the staged changes. Refused `not_prepared` unless this participant's ACK
    /// is recorded (issue 13: "A participant never applies a commit before its own ACK is
    /// recorded"); a second commit changes nothing.
    pub fn commit(&mut self, envelope: &str) -> Result<(), Rejection> {
        match self.outcomes.get(envelope) {
            Some(Phase::Committed) => return Ok(()),
            Some(p) => {
                return reject(C::TerminalState, format!("{envelope:?} is {p} here"));
            }
            None => {}
        }
        if self.votes.get(envelope) != Some(&Vote::Ack) {
            return reject(
                C::NotPrepared,
                format!("no ACK of this participant is recorded for {envelope:?}"),
            );
        }
        let staged = self.staged.remove(envelope).unwrap_or_default();
        rules::commit(&mut self.accounts, &staged, envelope);
        self.outcomes.insert(envelope.to_string(), Phase::Committed);
        Ok(())
    }

    /// abort: run the cleanup. Idempotent: delivered twice it leaves the same book as once.
    /// Refused `terminal_state` if this participant already committed the envelope.
    pub fn abort(&mut self, envelope: &str) -> Result<(), Rejection> {
        if self.outcomes.get(envelope) == Some(&Phase::Committed) {
            return reject(C::TerminalState, format!("{envelope:?} is COMMITTED here"));
        }
        let staged = self.staged.remove(envelope).unwrap_or_default();
        rules::cleanup(&mut self.accounts, &staged, envelope);
        self.outcomes.insert(envelope.to_string(), Phase::Aborted);
        if !self.aborted.iter().any(|a| a == envelope) {
            self.aborted.push(envelope.to_string());
        }
        Ok(())
    }
}
