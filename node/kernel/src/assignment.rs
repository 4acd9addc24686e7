//! The assignment axis and its operations (seed 000, "Assignment"), and the two-record handovers
//! delegate and assign (seed 000, "Operations": "The old party stays in place until acceptance").

use serde::{Deserialize, Serialize};

use crate::commitment::{ClaimState, Commitment, HandoverOffer, QueueState};
use crate::ctx::Ctx;
use crate::effect::Effect;
use crate::record::{Operation, Party};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::roles;
use crate::rules::{Role, RuleKey};
use crate::service;

/// A value of the assignment axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Assignment {
    /// In the pool; candidates exist; nobody has claimed it.
    Pooled,
    /// Offered or directly requested from a specific party.
    Offered,
    /// The obligor is known; the lease is valid if one is defined.
    Held,
    /// The start deadline passed with nobody holding it, no candidate exists, or the queue's
    /// distribution policy found no candidate.
    FailedToAssign,
}

impl Assignment {
    /// The wire name.
    pub const fn wire_name(self) -> &'static str {
        match self {
            Assignment::Pooled => "pooled",
            Assignment::Offered => "offered",
            Assignment::Held => "held",
            Assignment::FailedToAssign => "failed_to_assign",
        }
    }
}

/// Derives the assignment axis at `now`.
pub fn assignment(c: &Commitment, now: i64) -> Assignment {
    // Seed 000, "Assignment": held = "The obligor is known; the lease is valid if one is
    // defined". Once a claim's lease has ended the obligor no longer holds it; until the Work
    // service party's unclaim, it shows as the queue would without it.
    let lease_ended = c
        .claim
        .as_ref()
        .and_then(|cl| cl.lease_until)
        .is_some_and(|t| now >= t);
    if c.obligor.is_some() && !lease_ended {
        return Assignment::Held;
    }
    let deadline_passed = c
        .queue
        .as_ref()
        .and_then(|q| q.queue.start_deadline)
        .is_some_and(|d| now >= d);
    if deadline_passed {
        Assignment::FailedToAssign
    } else if c.offered_to.is_some() {
        Assignment::Offered
    } else if crate::distribution::has_policy(c) && crate::distribution::pick(c).is_none() {
        // Seed 000: failed_to_assign — "the policy found no candidate".
        Assignment::FailedToAssign
    } else if c
        .queue
        .as_ref()
        .is_some_and(|q| !q.queue.candidates.is_empty())
    {
        Assignment::Pooled
    } else {
        Assignment::FailedToAssign
    }
}

fn required(p: &Option<Party>, what: &str) -> Result<Party, Rejection> {
    match p {
        Some(p) if !p.organisation.is_empty() && !p.name.is_empty() => Ok(p.clone()),
        _ => reject(C::MissingField, format!("{what} needs a party")),
    }
}

/// delegate/assign halves, claim, unclaim, forward, nominate, offer, reassign, renew_lease.
pub(crate) fn execute(
    ctx: &Ctx,
    key: RuleKey,
    targets: &[String],
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let author = &ctx.r.author;
    match (&ctx.r.op, key) {
        (Operation::DelegateOffer { to, handover_note }, RuleKey::DelegateOffer) => {
            let to = required(to, "delegate")?;
            ensure(
                !handover_note.trim().is_empty(),
                C::MissingHandoverNote,
                "a delegate offer needs a handover note",
            )?;
            next.delegate_offer = Some(HandoverOffer {
                record: ctx.r.id,
                by: author.clone(),
                to,
                note: handover_note.clone(),
            });
        }
        (Operation::DelegateAcceptance { .. }, RuleKey::DelegateAcceptance) => {
            let old = next.obligor.replace(author.clone());
            if next.offered_to == old {
                next.offered_to = Some(author.clone());
            }
            next.claim = None;
            next.delegate_offer = None;
        }
        (Operation::AssignOffer { to }, RuleKey::AssignOffer) => {
            let to = required(to, "assign")?;
            next.assign_offer = Some(HandoverOffer {
                record: ctx.r.id,
                by: author.clone(),
                to,
                note: String::new(),
            });
        }
        (Operation::AssignAcceptance { .. }, RuleKey::AssignAcceptance) => {
            // The acceptor and the accountable party follow when they defaulted to the obligee.
            next.obligee = author.clone();
            next.assign_offer = None;
        }
        (Operation::Claim, RuleKey::Claim) => {
            ensure(
                ctx.c.obligor.as_ref().is_none_or(|o| o == author),
                C::AlreadyHeld,
                "another obligor holds the commitment",
            )?;
            crate::ops::become_obligor(ctx, targets, next);
            let lease_until = ctx
                .c
                .queue
                .as_ref()
                .and_then(|q| q.queue.lease_ms)
                .filter(|l| *l > 0)
                .map(|l| ctx.now.saturating_add(l));
            next.claim = Some(ClaimState {
                by: author.clone(),
                record: ctx.r.id,
                lease_until,
                promise: None,
            });
            next.claims.push(ctx.r.id);
            fx.push(Effect::PromiseProduced {
                commitment: ctx.c.id.clone(),
                claim: ctx.r.id,
                obligor: author.clone(),
                obligee: ctx.c.obligee.clone(),
                items: if ctx.c.has_line_items() {
                    targets.to_vec()
                } else {
                    Vec::new()
                },
                terms_version: ctx.c.terms_version,
            });
        }
        (Operation::Unclaim { .. }, RuleKey::Unclaim) => {
            if !roles::holds(ctx, Role::ClaimingObligor) {
                service::check_unclaim(ctx)?;
            }
            let claimant = next.obligor.take();
            if next.offered_to.is_some() && next.offered_to == claimant {
                next.offered_to = None;
            }
            next.claim = None;
            next.delegate_offer = None;
            for t in targets {
                if let Some(item) = next.items.get_mut(t) {
                    item.validity = None;
                    item.statement = None;
                }
            }
        }
        (Operation::Forward { to }, RuleKey::Forward) => {
            let Some(queue) = to.clone().filter(|q| !q.name.is_empty()) else {
                return reject(C::MissingField, "forward needs the queue it moves to");
            };
            crate::distribution::check_queue(&queue, "to")?;
            // A new queue entry: its policy starts over.
            next.policy_offers.clear();
            next.queue = Some(QueueState {
                queue,
                declared_by: ctx.r.id,
            });
            next.forward_count += 1;
            if next.obligor.is_none() {
                next.offered_to = None;
            }
        }
        (Operation::Nominate { candidate }, RuleKey::Nominate) => {
            let candidate = required(candidate, "nominate")?;
            if !next.nominees.contains(&candidate) {
                next.nominees.push(candidate);
            }
        }
        (Operation::Offer { to }, RuleKey::Offer) => {
            let to = required(to, "offer")?;
            if !roles::holds(ctx, Role::QueueOwner) {
                // Seed 000: offer — "Queue owner or distribution policy": anyone else offering
                // is the Work service party writing what the queue's declared policy picks.
                crate::distribution::check_offer(ctx, &to)?;
                next.policy_offers.push(to.clone());
            }
            next.offered_to = Some(to);
        }
        (Operation::Reassign { to }, RuleKey::Reassign) => {
            let to = required(to, "reassign")?;
            if next.obligor.is_some() {
                // The obligation moves only through delegate: the new party accepts this offer
                // with a delegate acceptance naming the reassign record.
                next.delegate_offer = Some(HandoverOffer {
                    record: ctx.r.id,
                    by: author.clone(),
                    to,
                    note: "reassign".into(),
                });
            } else {
                next.offered_to = Some(to);
            }
        }
        (Operation::RenewLease { lease_ms }, RuleKey::RenewLease) => {
            let Some(claim) = next.claim.as_mut().filter(|cl| cl.by == *author) else {
                return reject(C::NoLease, "the obligor holds no claim with a lease");
            };
            let queue_lease = ctx.c.queue.as_ref().and_then(|q| q.queue.lease_ms);
            let Some(ms) = lease_ms.or(queue_lease).filter(|l| *l > 0) else {
                return reject(
                    C::NoLease,
                    "neither the record nor the queue gives a lease length",
                );
            };
            claim.lease_until = Some(ctx.now.saturating_add(ms));
        }
        _ => unreachable!("assignment::execute on {}", key.name()),
    }
    Ok(())
}
