//! Records written by the Work service party (seed 000, "Records written by the Work service"):
//! [`due_work`] says what it must write now, and `apply` accepts those records only from the Work
//! service party, only on the right basis, and only when due.
//!
//! | Record | Written when | Rests on (basis) |
//! | --- | --- | --- |
//! | expire | a validity statement's time passed and the items are still expirable | the request (`valid_until`) or the promise_conditional (its deadline) |
//! | accept, `implicit` | the implicit acceptance window after `state` ended with no explicit answer | the record holding the obligee's implicit acceptance terms (the commitment's origin), and the `state` |
//! | resume | a dated deferral reached its return date, or its return event occurred ([`crate::return_event`]) | the defer (and, on an event, the Condition it names) |
//! | offer | the commitment is in a queue with a distribution policy, nobody holds it, no offer is open, and the policy picks a candidate | the record that declared the queue (its policy) |
//! | unclaim | the claim's lease ended and the queue says return to the pool | the record that declared the queue |
//! | gate_decision `obsolete` | a gate was decided with participant requests still open | the gate and the answers that decided it |
//!
//! Implicit acceptance is never written (and rejected if written) when required evidence is
//! missing (the criterion requires evidence and no executor act, `acted_upon`, is recorded), when
//! the four-eyes rule blocks it (the criterion has four-eyes and the acceptor, on whose behalf the
//! implicit accept is made, is the party that stated), or when step-up is required.

use serde::{Deserialize, Serialize};

use crate::commitment::{Commitment, Deferral, Statement};
use crate::ctx::Ctx;
use crate::record::{GateAnswer, Operation, Party, Record, RecordId, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::state::{State, StateSet};

/// Which Work service record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    /// expire
    Expire,
    /// accept, marked implicit
    ImplicitAccept,
    /// resume
    Resume,
    /// offer, picked by the queue's distribution policy (seed 000, "Assignment": offer —
    /// "Queue owner or distribution policy").
    Offer,
    /// unclaim
    Unclaim,
    /// gate_decision `obsolete`: a participant request left open after the gate was decided
    /// (seed 000, "Multi-party aggregation"); rests on the gate and the answers that decided it.
    CloseParticipant,
}

/// A record the Work service party must write now. The node writes it as a wire record authored
/// by `Access::service`, signs it, and converts the signed record back into a [`Record`] the way
/// every other record is converted (one route from a signed record to its kernel form).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAction {
    /// Which record.
    pub kind: ServiceKind,
    /// The commitment.
    pub commitment: String,
    /// The prior declarations it rests on.
    pub basis: Vec<RecordId>,
    /// The items it acts on (empty = every open item).
    pub items: Vec<String>,
    /// The operation.
    pub op: Operation,
}

/// The promise record a claim produced (seed 000, "Assignment": claim — "requested to promised;
/// a promise record is produced"; [`Effect::PromiseProduced`](crate::Effect::PromiseProduced)).
/// The claim already made the commitment promised; the claimant — a party of the candidate set,
/// so a candidate obligor, whom the Operations table names for `promise` — then has its promise
/// recorded by a `promise` resting on the claim, which changes no state. Its node writes it as
/// the claimant. One per claim.
///
/// A promise by the Work service party resting on the current claim is still read (ledgers
/// written before issue 29 hold it in that form); the node no longer writes it.
///
/// `Ok(None)` when `r` is not such a promise: the ordinary rules apply (and refuse a promise on a
/// promised or closed commitment). A promise resting on a claim that is no longer current (the
/// claimant unclaimed, or the lease ended, before its produced promise was ordered) is refused
/// `invalid_state`: read as an ordinary promise it would make the claimant obligor again
/// without their having promised.
pub(crate) fn produced_promise(
    c: &Commitment,
    r: &Record,
    access: &crate::access::Access,
    now: i64,
) -> Result<Option<Commitment>, Rejection> {
    if !matches!(r.op, Operation::Promise) {
        return Ok(None);
    }
    let legacy = is_service_party(c, access, &r.author);
    let on_a_claim = r.basis.iter().any(|b| c.claims.contains(b));
    // Seed 000: "A terminal state never changes": a commitment closed before the produced
    // promise was ordered (cancelled, released, …) takes no promise; the ordinary rules refuse.
    if (!legacy && !on_a_claim) || c.is_closed() {
        return Ok(None);
    }
    let Some(claim) = c.claim.as_ref().filter(|cl| r.basis.contains(&cl.record)) else {
        if legacy {
            return Ok(None);
        }
        return Err(Rejection::new(
            C::InvalidState,
            "the claim this promise rests on is no longer the commitment's claim",
        ));
    };
    if claim.promise.is_some() || (!legacy && r.author != claim.by) {
        return Ok(None);
    }
    let mut next = c.clone();
    if let Some(cl) = next.claim.as_mut() {
        cl.promise = Some(r.id);
    }
    next.history.push(r.id);
    next.updated_at = now;
    Ok(Some(next))
}

/// Why an implicit acceptance may not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImplicitBlock {
    /// Evidence is required and none is recorded.
    MissingEvidence,
    /// The four-eyes rule: the acceptor is the party that stated.
    FourEyes,
    /// Step-up is required.
    StepUp,
}

/// Whether implicit acceptance of `statement` is blocked, and why.
pub fn implicit_block(c: &Commitment, statement: &Statement) -> Option<ImplicitBlock> {
    let crit = c.acceptance;
    if crit.requires_evidence && c.evidence.is_empty() {
        Some(ImplicitBlock::MissingEvidence)
    } else if crit.four_eyes && *c.acceptor() == statement.by {
        Some(ImplicitBlock::FourEyes)
    } else if crit.step_up {
        Some(ImplicitBlock::StepUp)
    } else {
        None
    }
}

const EXPIRABLE: StateSet = StateSet::of(&[
    State::Requested,
    State::Countered,
    State::ConditionallyPromised,
]);

/// Groups item ids by a key, keeping first-seen order.
fn group(pairs: Vec<(RecordId, String)>) -> Vec<(RecordId, Vec<String>)> {
    let mut out: Vec<(RecordId, Vec<String>)> = Vec::new();
    for (k, item) in pairs {
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, items)) => items.push(item),
            None => out.push((k, vec![item])),
        }
    }
    out
}

/// The items to name: none when they are the default (every open item).
fn named(c: &Commitment, items: Vec<String>) -> Vec<String> {
    if !c.has_line_items() || items == c.open_items() {
        Vec::new()
    } else {
        items
    }
}

/// What the Work service party must write for `c` at `now`, in a fixed order: resume, offer,
/// unclaim, implicit accepts, expires, obsolete closings. The actions act on disjoint items, so applied in this order each
/// one is accepted (the property tests check it); recomputing after each apply is also fine.
/// Empty for a closed commitment.
pub fn due_work(c: &Commitment, now: i64) -> Vec<ServiceAction> {
    let mut out = Vec::new();
    if c.is_closed() {
        return out;
    }
    let action = |kind, basis, items, op| ServiceAction {
        kind,
        commitment: c.id.clone(),
        basis,
        items,
        op,
    };
    if let Some(d) = &c.deferral {
        // Seed 000: resume — "A dated deferral reaches its return date, or its return event
        // occurs"; whichever comes first, once (the resume closes the deferral).
        if let Some(ev) = crate::return_event::occurred_event(c, now) {
            let op = Operation::Resume { event: ev.wire() };
            let basis = vec![d.record, ev.subject()];
            out.push(action(ServiceKind::Resume, basis, Vec::new(), op));
        } else if d.return_at.is_some_and(|t| now >= t) {
            let op = Operation::Resume {
                event: String::new(),
            };
            out.push(action(ServiceKind::Resume, vec![d.record], Vec::new(), op));
        }
    }
    if let Some((declared_by, to)) = crate::distribution::due_offer(c, now) {
        let op = Operation::Offer { to: Some(to) };
        out.push(action(
            ServiceKind::Offer,
            vec![declared_by],
            Vec::new(),
            op,
        ));
    }
    if let (Some(claim), Some(q)) = (&c.claim, &c.queue) {
        let lease_over = claim.lease_until.is_some_and(|t| now >= t);
        let all_promised = c
            .items
            .values()
            .filter(|it| !it.state.is_terminal())
            .all(|it| it.state == State::Promised);
        if lease_over && q.queue.return_to_pool_on_lease_end && all_promised {
            let op = Operation::Unclaim {
                reason: "lease ended".into(),
            };
            out.push(action(
                ServiceKind::Unclaim,
                vec![q.declared_by],
                Vec::new(),
                op,
            ));
        }
    }
    if let Some(window) = c.implicit_window_ms {
        let ripe = c
            .items
            .iter()
            .filter(|(_, it)| it.state == State::Stated)
            .filter_map(|(id, it)| it.statement.as_ref().map(|s| (id, s)))
            .filter(|(_, s)| now >= s.at.saturating_add(window) && implicit_block(c, s).is_none())
            .map(|(id, s)| (s.record, id.clone()))
            .collect();
        for (statement, items) in group(ripe) {
            let evidence_ref = if c.acceptance.requires_evidence {
                c.evidence.last().map(hex_id).unwrap_or_default()
            } else {
                String::new()
            };
            let op = Operation::Accept {
                evidence_ref,
                implicit: true,
                step_up: false,
            };
            let basis = vec![c.origin, statement];
            out.push(action(
                ServiceKind::ImplicitAccept,
                basis,
                named(c, items),
                op,
            ));
        }
    }
    let expiring = c
        .items
        .iter()
        .filter(|(_, it)| EXPIRABLE.contains(it.state))
        .filter_map(|(id, it)| {
            it.validity
                .filter(|v| now >= v.until)
                .map(|v| (v.record, id.clone()))
        })
        .collect();
    for (record, items) in group(expiring) {
        out.push(action(
            ServiceKind::Expire,
            vec![record],
            named(c, items),
            Operation::Expire,
        ));
    }
    for (basis, participant) in crate::gates::due_closings(c, now) {
        let op = Operation::GateDecision {
            answer: GateAnswer::Obsolete,
            content_digest: None,
            participant: Some(participant),
            reason: "decided early".into(),
        };
        out.push(action(ServiceKind::CloseParticipant, basis, Vec::new(), op));
    }
    out
}

/// expire: each item's validity statement must be named in basis and have ended.
pub(crate) fn check_expire(ctx: &Ctx, targets: &[String]) -> Result<(), Rejection> {
    for t in targets {
        let Some(v) = ctx.c.items[t].validity else {
            return reject(
                C::MissingBasis,
                format!("item {t:?} has no validity statement"),
            );
        };
        ensure(
            ctx.r.basis.contains(&v.record),
            C::MissingBasis,
            format!(
                "expire rests on the validity statement {}",
                hex_id(&v.record)
            ),
        )?;
        ensure(
            ctx.now >= v.until,
            C::NotDue,
            format!("valid until {}", v.until),
        )?;
    }
    Ok(())
}

/// accept marked implicit: the window ended, basis names the implicit acceptance terms, and
/// nothing blocks it.
pub(crate) fn check_implicit_accept(ctx: &Ctx, targets: &[String]) -> Result<(), Rejection> {
    let c = ctx.c;
    let Some(window) = c.implicit_window_ms else {
        return reject(
            C::NoImplicitAcceptance,
            "the obligee declared no implicit acceptance terms",
        );
    };
    ensure(
        ctx.r.basis.contains(&c.origin),
        C::MissingBasis,
        "an implicit accept rests on the obligee's implicit acceptance terms",
    )?;
    for t in targets {
        let Some(s) = &c.items[t].statement else {
            return reject(C::InvalidState, format!("item {t:?} has no statement"));
        };
        ensure(
            ctx.now >= s.at.saturating_add(window),
            C::NotDue,
            "the acceptance window is open",
        )?;
        match implicit_block(c, s) {
            Some(ImplicitBlock::MissingEvidence) => {
                return reject(
                    C::MissingEvidence,
                    "evidence is required and none is recorded",
                );
            }
            Some(ImplicitBlock::FourEyes) => {
                return reject(C::FourEyes, "four-eyes: the acceptor stated fulfilment");
            }
            Some(ImplicitBlock::StepUp) => {
                return reject(
                    C::StepUpRequired,
                    "step-up is required; no implicit acceptance",
                );
            }
            None => {}
        }
    }
    Ok(())
}

/// resume by the Work service party: the return date arrived, or it names the return event
/// and that event has occurred (the service may not claim an event the records do not show).
pub(crate) fn check_resume(ctx: &Ctx, open: &Deferral) -> Result<(), Rejection> {
    let Operation::Resume { event } = &ctx.r.op else {
        unreachable!()
    };
    if !event.is_empty() {
        ensure(
            open.return_event.as_deref() == Some(event.as_str()),
            C::EventMismatch,
            format!("the deferral does not wait for event {event:?}"),
        )?;
        return ensure(
            crate::return_event::occurred_event(ctx.c, ctx.now).is_some(),
            C::NotDue,
            format!("the return event {event:?} has not occurred"),
        );
    }
    ensure(
        open.return_at.is_some_and(|t| ctx.now >= t),
        C::NotDue,
        "the deferral has no return date, or it has not arrived",
    )
}

/// unclaim by the Work service party: the lease ended and the queue returns to the pool.
pub(crate) fn check_unclaim(ctx: &Ctx) -> Result<(), Rejection> {
    let c = ctx.c;
    let Some(lease_until) = c.claim.as_ref().and_then(|cl| cl.lease_until) else {
        return reject(C::NoLease, "no claim with a lease");
    };
    let Some(q) = &c.queue else {
        return reject(C::NoLease, "no queue");
    };
    ensure(
        ctx.r.basis.contains(&q.declared_by),
        C::MissingBasis,
        "unclaim rests on the queue's declared lease behaviour",
    )?;
    ensure(
        ctx.now >= lease_until,
        C::NotDue,
        format!("the lease runs until {lease_until}"),
    )?;
    ensure(
        q.queue.return_to_pool_on_lease_end,
        C::NotDue,
        "the queue does not return to the pool on lease end",
    )
}

/// Whether `who` is the Work service party of `c`: this node's own (Access's), or the Work
/// service party of the commitment's home organisation, the one author of the records time
/// produces across organisations (issue 26, item 1). Any other organisation's Work service
/// party holds no role on `c`. That a node writes time records only for the commitments it
/// homes is the node's rule (its clock reads only those), not the kernel's: the kernel also
/// serves a single node acting for several organisations.
pub fn is_service_party(c: &Commitment, access: &crate::access::Access, who: &Party) -> bool {
    *who == access.service
        || (who.name == access.service.name
            && who.organisation == c.home_org(&access.service.organisation))
}
