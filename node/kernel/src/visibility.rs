//! Who may read a commitment (issue 8, "Authenticated reads with per-party visibility"): the
//! parties with a role on it. Pure queries over the derived state; the node decides what a
//! caller sees with them.
//!
//! The roles are the seed's "Who" columns (seed 000, "Operations"; [`crate::roles`]): obligee,
//! obligor, candidate obligors (the party offered to, nominees, the queue's candidates),
//! acceptor, accountable, principal, queue owner, and the participants the derived state names
//! (handover offerors and targets, condition owners and addressees, the party that countered,
//! stated, deferred, asked a revoke, disputed or gave notice). Roles that cover a whole
//! organisation (on behalf of the obligee, executor) or every commitment (administrative
//! authority, the Work service party) do not make a party a reader: they would let every party
//! of an organisation read everything.

use crate::access::{Access, Authority};
use crate::commitment::Commitment;
use crate::record::Party;

fn push(out: &mut Vec<Party>, p: &Party) {
    if !out.contains(p) {
        out.push(p.clone());
    }
}

/// Every party the commitment's derived state names in a role, without repeats, in a fixed
/// order (obligee first). Access grants are not consulted (see [`may_read`]).
pub fn parties_with_role(c: &Commitment) -> Vec<Party> {
    let mut out = Vec::new();
    push(&mut out, &c.obligee);
    for p in [
        c.obligor.as_ref(),
        c.offered_to.as_ref(),
        c.acceptor.as_ref(),
        c.accountable.as_ref(),
        c.principal.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        push(&mut out, p);
    }
    c.nominees.iter().for_each(|p| push(&mut out, p));
    if let Some(q) = &c.queue {
        q.queue.owner.iter().for_each(|p| push(&mut out, p));
        q.queue.candidates.iter().for_each(|p| push(&mut out, p));
    }
    if let Some(cl) = &c.claim {
        push(&mut out, &cl.by);
    }
    if let Some(cv) = &c.counter {
        push(&mut out, &cv.by);
    }
    for o in [&c.delegate_offer, &c.assign_offer].into_iter().flatten() {
        push(&mut out, &o.by);
        push(&mut out, &o.to);
    }
    for oc in &c.conditions {
        push(&mut out, &oc.owner);
        oc.condition
            .addressed_to
            .iter()
            .for_each(|p| push(&mut out, p));
        // A gate's participants answer it against the commitment's current terms (seed 000,
        // "Gates"), so they read the commitment they are asked about.
        oc.condition
            .participant_list()
            .iter()
            .for_each(|p| push(&mut out, p));
    }
    for it in c.items.values() {
        if let Some(s) = &it.statement {
            push(&mut out, &s.by);
        }
    }
    if let Some(d) = &c.deferral {
        push(&mut out, &d.by);
    }
    if let Some(r) = &c.revoke {
        push(&mut out, &r.by);
    }
    c.disputes.iter().for_each(|d| push(&mut out, &d.by));
    c.notices.iter().for_each(|n| push(&mut out, &n.by));
    out
}

/// Whether `who` may read `c` now: it holds a role named on the commitment, or Access makes it
/// the commitment's principal or the owner of its queue.
pub fn may_read(c: &Commitment, access: &Access, who: &Party) -> bool {
    parties_with_role(c).contains(who)
        || access.holds(&Authority::Principal, who)
        || c.queue
            .as_ref()
            .is_some_and(|q| access.owns_queue(&q.queue, who))
}
