//! Who holds which role on a commitment: from the records (obligee, obligor, acceptor, the
//! queue, the offers, the conditions) and from Access (authorities, the Work service party).

use crate::access::{Access, Authority};
use crate::commitment::{Commitment, OpenCondition};
use crate::ctx::Ctx;
use crate::record::Party;
use crate::rules::Role;

/// Whether the record's author holds `role` in this context.
pub(crate) fn holds(ctx: &Ctx, role: Role) -> bool {
    holds_role(ctx.c, ctx.access, &ctx.r.author, role, ctx.condition)
}

/// Whether `who` holds `role` on `c`. `condition` is the Condition a withdraw or satisfy acts on
/// (for [`Role::ConditionOwner`] / [`Role::ConditionAddressee`]; without it, any open one).
pub fn holds_role(
    c: &Commitment,
    access: &Access,
    who: &Party,
    role: Role,
    condition: Option<&OpenCondition>,
) -> bool {
    let on_condition = |f: &dyn Fn(&OpenCondition) -> bool| match condition {
        Some(oc) => f(oc),
        None => c.conditions.iter().any(f),
    };
    match role {
        Role::Obligee => c.obligee == *who,
        Role::OnBehalfOfObligee => c.obligee.organisation == who.organisation,
        Role::CandidateObligor => c.candidate_obligors().contains(who),
        Role::Obligor => c.obligor.as_ref() == Some(who),
        Role::ClaimingObligor => {
            c.obligor.as_ref() == Some(who) && c.claim.as_ref().is_some_and(|cl| cl.by == *who)
        }
        Role::Acceptor => c.acceptor() == who,
        Role::Principal => {
            c.principal.as_ref() == Some(who) || access.holds(&Authority::Principal, who)
        }
        Role::AdministrativeAuthority => access.holds(&Authority::AdministrativeClose, who),
        Role::WorkService => crate::service::is_service_party(c, access, who),
        Role::QueueOwner => c
            .queue
            .as_ref()
            .is_some_and(|q| access.owns_queue(&q.queue, who)),
        Role::QueueCandidate => c
            .queue
            .as_ref()
            .is_some_and(|q| q.queue.candidates.contains(who)),
        Role::Accountable => c.accountable() == who,
        Role::DelegateTarget => c.delegate_offer.as_ref().is_some_and(|o| o.to == *who),
        Role::AssignTarget => c.assign_offer.as_ref().is_some_and(|o| o.to == *who),
        Role::ConditionOwner => on_condition(&|oc| oc.owner == *who),
        Role::ConditionAddressee => {
            on_condition(&|oc| oc.condition.participant_list().contains(who))
        }
        Role::Executor => c
            .obligor
            .as_ref()
            .is_some_and(|o| o.organisation == who.organisation),
        Role::ExternalObserver => c.obligor.as_ref().is_some_and(|o| {
            access.holds(
                &Authority::Observer {
                    organisation: o.organisation.clone(),
                },
                who,
            )
        }),
        Role::LocalParty => who.organisation == access.service.organisation,
        Role::ControlHolder => c.handover.as_ref().is_some_and(|h| h.holder == *who),
    }
}

/// Every role `who` holds on `c` (any open condition counts for the condition roles).
pub fn roles_of(c: &Commitment, access: &Access, who: &Party) -> Vec<Role> {
    ALL_ROLES
        .iter()
        .copied()
        .filter(|r| holds_role(c, access, who, *r, None))
        .collect()
}

/// Every role.
pub const ALL_ROLES: [Role; 20] = [
    Role::Obligee,
    Role::OnBehalfOfObligee,
    Role::CandidateObligor,
    Role::Obligor,
    Role::ClaimingObligor,
    Role::Acceptor,
    Role::Principal,
    Role::AdministrativeAuthority,
    Role::WorkService,
    Role::QueueOwner,
    Role::QueueCandidate,
    Role::Accountable,
    Role::DelegateTarget,
    Role::AssignTarget,
    Role::ConditionOwner,
    Role::ConditionAddressee,
    Role::Executor,
    Role::ExternalObserver,
    Role::LocalParty,
    Role::ControlHolder,
];
