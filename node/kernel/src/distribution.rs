//! A queue's distribution policy (seed 000, "Assignment": offer — "Queue owner or distribution
//! policy — offered"; failed_to_assign — "The start deadline passed, or the policy found no
//! candidate"). The policy is declared with the queue ([`Queue::distribution`]); the Work
//! service party writes the `offer` it picks, resting on the record that declared the queue,
//! like the other Work service records rest on a declaration. The policies are listed on
//! [`Distribution`].

use crate::commitment::Commitment;
use crate::ctx::Ctx;
use crate::record::{Distribution, Party, Queue, RecordId};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::state::State;

/// A queue's declared policy must be one of the closed list (or none).
pub(crate) fn check_queue(q: &Queue, field: &str) -> Result<(), Rejection> {
    if let Distribution::Unknown(n) = q.distribution {
        return reject(
            C::Malformed,
            format!("{field}.distribution {n} is not a distribution policy"),
        );
    }
    Ok(())
}

/// Whether the commitment's queue declares a policy.
pub fn has_policy(c: &Commitment) -> bool {
    c.queue.as_ref().is_some_and(|q| {
        matches!(
            q.queue.distribution,
            Distribution::FirstCandidate | Distribution::RoundRobin
        )
    })
}

/// The candidate the queue's policy picks for `c` now; `None` when the queue declares no policy
/// or the policy finds no candidate.
pub fn pick(c: &Commitment) -> Option<Party> {
    let q = &c.queue.as_ref()?.queue;
    let cands = &q.candidates;
    match q.distribution {
        Distribution::FirstCandidate => {
            cands.iter().find(|p| !c.policy_offers.contains(p)).cloned()
        }
        Distribution::RoundRobin if !cands.is_empty() => {
            let n = cands.len();
            let last = c
                .policy_offers
                .last()
                .and_then(|l| cands.iter().position(|p| p == l));
            let i = match last {
                Some(i) => (i + 1) % n,
                None => {
                    let mut head = [0u8; 8];
                    head.copy_from_slice(&c.origin[..8]);
                    (u64::from_be_bytes(head) % n as u64) as usize
                }
            };
            cands.get(i).cloned()
        }
        _ => None,
    }
}

/// Whether the policy may offer now: a policy is declared, nobody holds the commitment, no
/// offer is open, every open item is still requested (an offer is valid only from requested),
/// and the start deadline has not passed.
fn open_for_offer(c: &Commitment, now: i64) -> bool {
    let Some(q) = &c.queue else {
        return false;
    };
    has_policy(c)
        && !c.is_closed()
        && c.obligor.is_none()
        && c.offered_to.is_none()
        && c.items
            .values()
            .filter(|it| !it.state.is_terminal())
            .all(|it| it.state == State::Requested)
        && q.queue.start_deadline.is_none_or(|d| now < d)
}

/// The offer the Work service party must write now: the record that declared the queue (the
/// basis) and the party the policy picks.
pub(crate) fn due_offer(c: &Commitment, now: i64) -> Option<(RecordId, Party)> {
    if !open_for_offer(c, now) {
        return None;
    }
    Some((c.queue.as_ref()?.declared_by, pick(c)?))
}

/// An `offer` by the Work service party: it rests on the queue's declared policy and names the
/// candidate the policy picks, when the policy may offer.
pub(crate) fn check_offer(ctx: &Ctx, to: &Party) -> Result<(), Rejection> {
    let c = ctx.c;
    let Some(q) = c.queue.as_ref().filter(|_| has_policy(c)) else {
        return reject(
            C::WrongRole,
            "the queue declares no distribution policy; only its owner offers",
        );
    };
    ensure(
        ctx.r.basis.contains(&q.declared_by),
        C::MissingBasis,
        "a policy offer rests on the record that declared the queue",
    )?;
    ensure(
        open_for_offer(c, ctx.now),
        C::NotDue,
        "the commitment is held or offered, or its start deadline passed",
    )?;
    match pick(c) {
        Some(p) if p == *to => Ok(()),
        Some(p) => reject(C::PolicyMismatch, format!("the policy picks {p}, not {to}")),
        None => reject(C::PolicyMismatch, "the policy finds no candidate"),
    }
}
