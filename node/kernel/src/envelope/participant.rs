//! A participant's side of an envelope (seed 003, "What happens on abort"; issue 13 items 3 and
//! 5): stage on prepare and answer, apply on commit — never before its own ACK — and run the
//! abort cleanup, idempotently.
//!
//! The budget accounts of one participant are a [`Book`]. Staging a debit reserves the amount
//! and marks the account with the envelope; staging a credit marks it only. Commit applies the
//! staged changes; abort runs the declared cleanup: the reservation is subtracted with a cap at
//! zero ([`subtract_capped`]) and the envelope's marks are removed with duplicates filtered out
//! ([`reverse_list`]). Each envelope's staged entry is consumed by whichever of commit or abort
//! comes first, and the outcome is remembered, so a second delivery of either (after a crash
//! and replay) leaves the same book as one, and a prepare arriving after the outcome stages
//! nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::record::{Change, Vote};
use super::table::Phase;
use crate::commitment::Commitment;
use crate::record::Party;
use crate::rejection::{Rejection, RejectionCode as C, reject};

/// A balance subtraction as the seed asks of abort cleanup: `cap: { min: 0 }`.
pub fn subtract_capped(balance: u64, amount: u64) -> u64 {
    balance.saturating_sub(amount)
}

/// A list reversal as the seed asks of abort cleanup: remove `values`, then filter out
/// duplicates (keeping the first of each), so running it again changes nothing.
pub fn reverse_list(list: &[String], values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for v in list {
        if !values.contains(v) && !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

/// Whether `author` consents, by the envelope it started, to moving the budget of commitment
/// `c` (issue 27): the account holder — the obligee, whose request set the budget — or the
/// accountable party, the role seed 000 names for a budget ("Budget exhausted: Accountable
/// party"). A participant stages a budget change only on such a commitment; any other (and an
/// unknown one) is declined alike, so the vote says nothing about what exists.
pub fn may_move_budget(c: &Commitment, author: &Party) -> bool {
    c.obligee == *author || c.accountable.as_ref() == Some(author)
}

/// One budget account at a participant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// The balance.
    pub balance: u64,
    /// Reserved by staged debits (not spendable).
    pub reserved: u64,
    /// Envelopes with a staged change on this account.
    pub pending: Vec<String>,
}

impl Account {
    /// What can still be reserved.
    pub fn available(&self) -> u64 {
        self.balance.saturating_sub(self.reserved)
    }
}

/// A participant's accounts and its envelopes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Book {
    /// The accounts, by name (e.g. a commitment id).
    pub accounts: BTreeMap<String, Account>,
    /// Staged changes by envelope, with the answer given.
    pub staged: BTreeMap<String, Vec<Change>>,
    /// Each envelope's answer, once given.
    pub votes: BTreeMap<String, Vote>,
    /// Each envelope's outcome here, once known (COMMITTED or ABORTED).
    pub outcomes: BTreeMap<String, Phase>,
    /// Aborted envelopes, each once (the audit projection of seed 003: "A projection update
    /// records the aborted transfer for audit").
    pub aborted: Vec<String>,
}

impl Book {
    /// The sum of the balances (conservation checks).
    pub fn total(&self) -> u64 {
        self.accounts.values().map(|a| a.balance).sum()
    }

    /// prepare: stage `changes` for `envelope` and answer. A repeat returns the first answer;
    /// an envelope whose outcome is known is answered NACK and nothing is staged. NACK when an
    /// account is unknown or a debit exceeds what is available.
    pub fn prepare(&mut self, envelope: &str, changes: &[Change]) -> Vote {
        // Record changes are not the book's: the node validates them against its commitments.
        let changes: Vec<Change> = changes.iter().filter(|c| c.is_budget()).cloned().collect();
        let changes = changes.as_slice();
        if let Some(v) = self.votes.get(envelope) {
            return *v;
        }
        if self.outcomes.contains_key(envelope) {
            return Vote::Nack;
        }
        let mut need: BTreeMap<&str, u64> = BTreeMap::new();
        for c in changes {
            let Some(_) = self.accounts.get(c.account()) else {
                return self.answer(envelope, Vote::Nack);
            };
            if let Change::Debit { account, amount } = c {
                let n = need.entry(account).or_default();
                *n = n.saturating_add(*amount);
            }
        }
        if need
            .iter()
            .any(|(a, n)| self.accounts.get(*a).is_none_or(|acc| acc.available() < *n))
        {
            return self.answer(envelope, Vote::Nack);
        }
        for c in changes {
            let Some(acc) = self.accounts.get_mut(c.account()) else {
                continue;
            };
            if let Change::Debit { amount, .. } = c {
                acc.reserved = acc.reserved.saturating_add(*amount);
            }
            acc.pending.push(envelope.to_string());
        }
        self.staged.insert(envelope.to_string(), changes.to_vec());
        self.answer(envelope, Vote::Ack)
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
        let changes = self.staged.remove(envelope).unwrap_or_default();
        let id = [envelope.to_string()];
        for c in changes.iter().filter(|c| c.is_budget()) {
            let Some(acc) = self.accounts.get_mut(c.account()) else {
                continue;
            };
            match c {
                Change::Debit { amount, .. } => {
                    acc.balance = acc.balance.saturating_sub(*amount);
                    acc.reserved = subtract_capped(acc.reserved, *amount);
                }
                Change::Credit { amount, .. } => {
                    acc.balance = acc.balance.saturating_add(*amount);
                }
                Change::Record { .. } => {}
            }
            acc.pending = reverse_list(&acc.pending, &id);
        }
        self.outcomes.insert(envelope.to_string(), Phase::Committed);
        Ok(())
    }

    /// abort: run the cleanup. Idempotent: delivered twice it leaves the same book as once.
    /// Refused `terminal_state` if this participant already committed the envelope.
    pub fn abort(&mut self, envelope: &str) -> Result<(), Rejection> {
        if self.outcomes.get(envelope) == Some(&Phase::Committed) {
            return reject(C::TerminalState, format!("{envelope:?} is COMMITTED here"));
        }
        let changes = self.staged.remove(envelope).unwrap_or_default();
        let id = [envelope.to_string()];
        for c in changes.iter().filter(|c| c.is_budget()) {
            let Some(acc) = self.accounts.get_mut(c.account()) else {
                continue;
            };
            if let Change::Debit { amount, .. } = c {
                acc.reserved = subtract_capped(acc.reserved, *amount);
            }
            acc.pending = reverse_list(&acc.pending, &id);
        }
        self.outcomes.insert(envelope.to_string(), Phase::Aborted);
        if !self.aborted.iter().any(|a| a == envelope) {
            self.aborted.push(envelope.to_string());
        }
        Ok(())
    }
}
