//! The items a record acts on and the transition-table check over them (seed 000,
//! "Operations"; the line-item choices in the crate docs). `apply` calls these between resolving
//! the operation and dispatching it.

use crate::commitment::Commitment;
use crate::ctx::Ctx;
use crate::rejection::{Rejection, RejectionCode as C, ensure};
use crate::rules::{self, Outcome, RuleKey};
use crate::state::State;

/// The items acted on: the items named (validated), or those the subject fixes (the revoke's,
/// the precondition's), or by default every open item; from a fixed or default set, the open
/// ones, or all of them when none is open (so a closed commitment meets `terminal_state`).
pub(crate) fn targets(ctx: &Ctx, key: RuleKey) -> Result<Vec<String>, Rejection> {
    let c = ctx.c;
    let mut named: Vec<String> = Vec::new();
    for i in &ctx.r.items {
        ensure(
            !i.is_empty() && c.has_line_items() && c.items.contains_key(i),
            C::UnknownItem,
            format!("no line item {i:?}"),
        )?;
        ensure(
            !named.contains(i),
            C::DuplicateItem,
            format!("line item {i:?} named twice"),
        )?;
        named.push(i.clone());
    }
    let fixed: Option<Vec<String>> = match key {
        RuleKey::Allow(_) | RuleKey::Refuse(_) => c.revoke.as_ref().map(|o| o.items.clone()),
        RuleKey::WithdrawPrecondition | RuleKey::SatisfyPrecondition => {
            ctx.condition.map(|oc| oc.precondition_items.clone())
        }
        _ => None,
    };
    let pool = match fixed {
        Some(f) => {
            let same =
                named.is_empty() || (named.len() == f.len() && named.iter().all(|n| f.contains(n)));
            ensure(
                same,
                C::ItemMismatch,
                format!("{} acts on its own items {f:?}", key.name()),
            )?;
            f
        }
        None if !named.is_empty() => return Ok(named),
        None => c.items.keys().cloned().collect(),
    };
    let open: Vec<String> = pool
        .iter()
        .filter(|i| c.items.get(*i).is_some_and(|it| !it.state.is_terminal()))
        .cloned()
        .collect();
    Ok(if open.is_empty() { pool } else { open })
}

/// The transition table check: every item acted on must fall in one row of `key`.
pub(crate) fn check_state(
    c: &Commitment,
    key: RuleKey,
    targets: &[String],
) -> Result<Outcome, Rejection> {
    let state_of = |t: &String| c.items[t].state;
    let refuse = |s: State| {
        let code = if s.is_terminal() {
            C::TerminalState
        } else {
            C::InvalidState
        };
        Rejection::new(code, format!("{} is not allowed from {s}", key.name()))
    };
    let first = state_of(&targets[0]);
    let (from, outcome) = rules::transition(key, first).ok_or_else(|| refuse(first))?;
    for t in targets {
        let s = state_of(t);
        if !from.contains(s) {
            return Err(refuse(s));
        }
    }
    Ok(outcome)
}
