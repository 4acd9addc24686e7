//! Return events of a deferral (seed 000, "Operations": defer — "Reason; optional return date or
//! return event"; "Records written by the Work service": resume — "A dated deferral reaches its
//! return date, or its return event occurs — Rests on the defer").
//!
//! The seed names no events, so the kernel keeps a closed list of events it can observe from the
//! commitment's own records, written on the wire as a string (`Defer.return_event`):
//!
//! | Wire form | Occurs when |
//! | --- | --- |
//! | `condition_closed:<record id, 64 lowercase hex>` | the named Condition of this commitment, open at the defer, closes: withdrawn, a precondition satisfied, or a gate (a plain Condition is a one-participant gate) decided, satisfied or unsatisfiable, by answers or by its deadline |
//!
//! The seed's "waiting — Open Condition records — The addressed party (by satisfying), the
//! Condition owner (by withdrawing)" and "A gate closes with gate_decision, or with accept or
//! reject for delivery acceptance" name the closings; a deferral that waits for one is the
//! deferral the seed's `deferred` → "The previous category" return makes sense for.
//!
//! Whether the event occurred is derived from the commitment at `now` (no stored flag): the
//! Work service party's `due_work` and its `resume` check ask the same question at the same
//! time, so what it is told to write is what it is allowed to write.

use crate::commitment::Commitment;
use crate::ctx::Ctx;
use crate::gates::{self, GateStatus};
use crate::record::{RecordId, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};

/// The prefix of the one event kind.
pub const CONDITION_CLOSED: &str = "condition_closed:";

/// A return event the kernel observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnEvent {
    /// The Condition (or gate, or precondition) opened by this record closes.
    ConditionClosed(RecordId),
}

impl ReturnEvent {
    /// Parses the wire form; `None` for anything outside the closed list.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix(CONDITION_CLOSED)?;
        if hex.len() != 64 {
            return None;
        }
        let mut id = [0u8; 32];
        for (i, b) in id.iter_mut().enumerate() {
            let pair = hex.get(2 * i..2 * i + 2)?;
            if pair.bytes().any(|c| c.is_ascii_uppercase()) {
                return None;
            }
            *b = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(ReturnEvent::ConditionClosed(id))
    }

    /// The wire form.
    pub fn wire(&self) -> String {
        match self {
            ReturnEvent::ConditionClosed(id) => format!("{CONDITION_CLOSED}{}", hex_id(id)),
        }
    }

    /// The record the event is about (what a Work service resume names besides the defer).
    pub fn subject(&self) -> RecordId {
        match self {
            ReturnEvent::ConditionClosed(id) => *id,
        }
    }

    /// Whether the event has occurred on `c` at `now`.
    pub fn occurred(&self, c: &Commitment, now: i64) -> bool {
        match self {
            ReturnEvent::ConditionClosed(id) => {
                match c.conditions.iter().find(|oc| oc.record == *id) {
                    // Withdrawn, or a satisfied or withdrawn precondition: removed from the list.
                    None => true,
                    // A gate stays listed once decided (an amend can reopen it).
                    Some(oc) => gates::status(c, oc, now) != GateStatus::Waiting,
                }
            }
        }
    }
}

/// Validates a defer's `return_event` (empty = none): it must be in the closed list and must
/// not have occurred already (a Condition that is not open, or already decided, never closes
/// later). Rejections name the field.
pub(crate) fn check_at_defer(ctx: &Ctx, s: &str) -> Result<Option<ReturnEvent>, Rejection> {
    if s.is_empty() {
        return Ok(None);
    }
    let Some(ev) = ReturnEvent::parse(s) else {
        return reject(
            C::Malformed,
            format!("return_event {s:?} is not {CONDITION_CLOSED}<64 lowercase hex>"),
        );
    };
    let ReturnEvent::ConditionClosed(id) = ev;
    ensure(
        ctx.c.conditions.iter().any(|oc| oc.record == id) && !ev.occurred(ctx.c, ctx.now),
        C::NoOpenCondition,
        format!(
            "return_event: no waiting Condition {} on this commitment",
            hex_id(&id)
        ),
    )?;
    Ok(Some(ev))
}

/// The return event of an open deferral that has occurred at `now`, if any.
pub fn occurred_event(c: &Commitment, now: i64) -> Option<ReturnEvent> {
    let d = c.deferral.as_ref()?;
    let ev = ReturnEvent::parse(d.return_event.as_deref()?)?;
    ev.occurred(c, now).then_some(ev)
}
