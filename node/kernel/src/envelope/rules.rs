//! The interpreter of a type's declared participant rules (issue 29 item 3; seed 003, "What
//! happens on abort": "Each participant executes its abort_cleanup rules (reverting any staged
//! state changes)"). Pure: accounts and a staged entry in, accounts out.
//!
//! The state of a participant is per account (a commitment id) and per field: *counters*
//! (numbers) and *lists* (of envelope ids), named by the rules. A change finds its role by its
//! kind — a debit change the role with the `debit` rule, a credit the role with the `credit`
//! rule (validation lets one rule of the type take each kind) — and runs every stage rule of
//! that role:
//!
//! | stage rule | prepare (staged) | commit | abort cleanup that reverts it |
//! |---|---|---|---|
//! | `debit field F reserve R` | NACK unless `F − R ≥ amount`; `R += amount` | `F −= amount`, `R −= amount` | `subtract R cap {min 0}` |
//! | `credit field F` | noted | `F += amount` | — (nothing staged) |
//! | `append field L on_commit keep/remove` | envelope id appended to `L` | kept / removed | `remove_from_list L filter dedup` |
//! | `hold`, `submit` | the node's record staging (`node/src/envelopes/staged.rs`) | | `remove_from_list holds` |
//!
//! [`plan`] resolves the changes against the rules once, on prepare, into a [`Staged`] entry
//! kept per envelope, so commit and abort do what prepare staged even if the declaration
//! changed since.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decl::{CleanupRule, EnvelopeType, OnCommit, ParticipantDecl, StageRule};
use super::record::Change;

/// One account at a participant: its counters and lists, by field name. A field not yet
/// touched reads as 0 or empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    /// Counters by field.
    pub counters: BTreeMap<String, u64>,
    /// Lists by field.
    pub lists: BTreeMap<String, Vec<String>>,
}

impl Account {
    /// Counter `field` (0 if untouched).
    pub fn counter(&self, field: &str) -> u64 {
        self.counters.get(field).copied().unwrap_or(0)
    }

    /// List `field` (empty if untouched).
    pub fn list(&self, field: &str) -> &[String] {
        self.lists.get(field).map_or(&[], Vec::as_slice)
    }

    fn add(&mut self, field: &str, amount: u64) {
        let c = self.counters.entry(field.to_string()).or_default();
        *c = c.saturating_add(amount);
    }

    fn sub(&mut self, field: &str, amount: u64) {
        let c = self.counters.entry(field.to_string()).or_default();
        *c = c.saturating_sub(amount);
    }
}

/// One staged effect: a change and the stage rule of its role that took it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StagedOp {
    /// `debit`: `amount` reserved on counter `reserve` of `account`, taken from `field` on commit.
    Reserve {
        /// The account.
        account: String,
        /// The counter debited on commit.
        field: String,
        /// The reservation counter.
        reserve: String,
        /// How much.
        amount: u64,
    },
    /// `credit`: `amount` added to counter `field` of `account` on commit.
    Credit {
        /// The account.
        account: String,
        /// The counter credited.
        field: String,
        /// How much.
        amount: u64,
    },
    /// `append`: the envelope id appended to list `list` of `account`.
    Append {
        /// The account.
        account: String,
        /// The list.
        list: String,
        /// What commit does with it.
        on_commit: OnCommit,
    },
}

/// What a participant staged for one envelope, and the cleanup its roles declare for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// The staged effects, in change then rule order.
    pub ops: Vec<StagedOp>,
    /// The abort cleanup rules to run, each with the account it runs on.
    pub cleanup: Vec<(String, CleanupRule)>,
}

/// The role of `ty` that takes `change` (by its kind), if any. Record changes are the node's
/// (`hold`/`submit`).
pub fn role_of<'a>(ty: &'a EnvelopeType, change: &Change) -> Option<&'a ParticipantDecl> {
    ty.participants.iter().find(|p| {
        p.stage.iter().any(|r| {
            matches!(
                (r, change),
                (StageRule::Debit { .. }, Change::Debit { .. })
                    | (StageRule::Credit { .. }, Change::Credit { .. })
            )
        })
    })
}

/// The counters the debit and credit rules of `change`'s role name: its account opens with
/// each set to its opening amount (the commitment's budget, at the node).
pub fn quantity_fields<'a>(ty: &'a EnvelopeType, change: &Change) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in role_of(ty, change).into_iter().flat_map(|p| &p.stage) {
        if let StageRule::Debit { field, .. } | StageRule::Credit { field } = r
            && !out.contains(&field.as_str())
        {
            out.push(field);
        }
    }
    out
}

/// The NACK reason code when a change has no role in the type.
pub const NACK_NO_RULE: &str = "no_rule";
/// The NACK reason code when a debit exceeds what its counter has available.
pub const NACK_INSUFFICIENT: &str = "insufficient_budget";

/// Resolves the budget `changes` of a participant against `ty`'s rules. `Err` is the NACK's
/// reason: a change no role takes.
pub fn plan(ty: &EnvelopeType, changes: &[Change]) -> Result<Staged, String> {
    let mut staged = Staged::default();
    for c in changes.iter().filter(|c| c.is_budget()) {
        let Some(role) = role_of(ty, c) else {
            let kind = if matches!(c, Change::Debit { .. }) {
                "debit"
            } else {
                "credit"
            };
            return Err(format!(
                "{NACK_NO_RULE}: envelope type {:?} declares no role that takes a {kind} change",
                ty.name
            ));
        };
        let account = c.account().to_string();
        for rule in &role.stage {
            let op = match (rule, c) {
                (StageRule::Debit { field, .. }, Change::Debit { amount, .. }) => {
                    StagedOp::Reserve {
                        account: account.clone(),
                        field: field.clone(),
                        reserve: rule.reserve().unwrap_or_default().to_string(),
                        amount: *amount,
                    }
                }
                (StageRule::Credit { field }, Change::Credit { amount, .. }) => StagedOp::Credit {
                    account: account.clone(),
                    field: field.clone(),
                    amount: *amount,
                },
                (StageRule::Append { field, on_commit }, _) => StagedOp::Append {
                    account: account.clone(),
                    list: field.clone(),
                    on_commit: *on_commit,
                },
                _ => continue,
            };
            if !staged.ops.contains(&op) || !matches!(op, StagedOp::Append { .. }) {
                staged.ops.push(op);
            }
        }
        for rule in &role.abort_cleanup {
            let entry = (account.clone(), rule.clone());
            if !staged.cleanup.contains(&entry) {
                staged.cleanup.push(entry);
            }
        }
    }
    Ok(staged)
}

/// prepare: checks `staged` against `accounts` and stages it for `envelope`. `Err` is the
/// NACK's reason (nothing is staged then): an account not open here, or a debit exceeding
/// `field − reserve` (the sum of the envelope's debits on one counter counts).
pub fn stage(
    accounts: &mut BTreeMap<String, Account>,
    staged: &Staged,
    envelope: &str,
) -> Result<(), String> {
    let mut need: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for op in &staged.ops {
        let account = op_account(op);
        let Some(acc) = accounts.get(account) else {
            return Err(format!("not_found: no account {account:?} here"));
        };
        if let StagedOp::Reserve {
            field,
            reserve,
            amount,
            ..
        } = op
        {
            let n = need.entry((account, field, reserve)).or_default();
            *n = n.saturating_add(*amount);
            if acc.counter(field).saturating_sub(acc.counter(reserve)) < *n {
                return Err(format!(
                    "{NACK_INSUFFICIENT}: a debit exceeds what the account has available"
                ));
            }
        }
    }
    for op in &staged.ops {
        let Some(acc) = accounts.get_mut(op_account(op)) else {
            continue;
        };
        match op {
            StagedOp::Reserve {
                reserve, amount, ..
            } => acc.add(reserve, *amount),
            StagedOp::Credit { .. } => {}
            StagedOp::Append { list, .. } => acc
                .lists
                .entry(list.clone())
                .or_default()
                .push(envelope.to_string()),
        }
    }
    Ok(())
}

/// commit: applies what `envelope` staged.
pub fn commit(accounts: &mut BTreeMap<String, Account>, staged: &Staged, envelope: &str) {
    let id = [envelope.to_string()];
    for op in &staged.ops {
        let Some(acc) = accounts.get_mut(op_account(op)) else {
            continue;
        };
        match op {
            StagedOp::Reserve {
                field,
                reserve,
                amount,
                ..
            } => {
                acc.sub(field, *amount);
                acc.sub(reserve, *amount);
            }
            StagedOp::Credit { field, amount, .. } => acc.add(field, *amount),
            StagedOp::Append {
                list,
                on_commit: OnCommit::Remove,
                ..
            } => {
                let l = acc.lists.entry(list.clone()).or_default();
                *l = reverse_list(l, &id);
            }
            StagedOp::Append { .. } => {}
        }
    }
}

/// abort: runs the declared cleanup of what `envelope` staged. A `subtract` takes the amount
/// the envelope reserved on its counter, floored at its cap; a `remove_from_list` removes the
/// envelope's id (and, with `filter = "dedup"`, duplicates). The rules are idempotent at their
/// floor; the book runs them once per envelope (it consumes the staged entry).
pub fn cleanup(accounts: &mut BTreeMap<String, Account>, staged: &Staged, envelope: &str) {
    let id = [envelope.to_string()];
    for (account, rule) in &staged.cleanup {
        let Some(acc) = accounts.get_mut(account) else {
            continue;
        };
        match rule {
            CleanupRule::Subtract { field, cap } => {
                let amount: u64 = staged
                    .ops
                    .iter()
                    .filter_map(|op| match op {
                        StagedOp::Reserve {
                            account: a,
                            reserve,
                            amount,
                            ..
                        } if a == account && reserve == field => Some(*amount),
                        _ => None,
                    })
                    .fold(0u64, u64::saturating_add);
                let floor = cap.map_or(0, |c| c.min.max(0).unsigned_abs());
                let v = acc.counter(field).saturating_sub(amount).max(floor);
                acc.counters.insert(field.clone(), v);
            }
            CleanupRule::RemoveFromList { field, filter } => {
                let l = acc.lists.entry(field.clone()).or_default();
                *l = if filter.as_deref() == Some("dedup") {
                    reverse_list(l, &id)
                } else {
                    l.iter().filter(|v| **v != id[0]).cloned().collect()
                };
            }
        }
    }
}

fn op_account(op: &StagedOp) -> &str {
    match op {
        StagedOp::Reserve { account, .. }
        | StagedOp::Credit { account, .. }
        | StagedOp::Append { account, .. } => account,
    }
}

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
