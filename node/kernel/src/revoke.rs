//! Revoke requests, allow/refuse, disputes and reopening (seed 000, "Revoke requests" and the
//! `dispute` row of "Operations").

use crate::commitment::{Commitment, DisputeMark, Item, OpenRevoke, ReopenLink, WHOLE};
use crate::ctx::Ctx;
use crate::effect::{Effect, Notification};
use crate::record::{Operation, Party, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::state::State;

pub use crate::record::RevokeKind;
pub use crate::rules::revoke::{
    OnRefuse, REVOKE_ACCEPTANCE, REVOKE_PROMISE, REVOKE_REQUEST, REVOKE_STATEMENT, REVOKES,
    RevokeRule,
};

/// The parties an open revoke request of `kind` is asked of ("the other side").
pub fn other_side(c: &Commitment, kind: RevokeKind) -> Vec<Party> {
    match kind {
        RevokeKind::Request => c.candidate_obligors(),
        RevokeKind::Promise => vec![c.obligee.clone()],
        RevokeKind::Statement => vec![c.acceptor().clone()],
        RevokeKind::Acceptance => c.obligor.iter().cloned().collect(),
    }
}

/// revoke_*: a revoke request opens.
pub(crate) fn open(
    ctx: &Ctx,
    kind: RevokeKind,
    targets: &[String],
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let reason = match &ctx.r.op {
        Operation::RevokeRequest { reason }
        | Operation::RevokePromise { reason }
        | Operation::RevokeStatement { reason }
        | Operation::RevokeAcceptance { reason } => reason,
        _ => unreachable!("revoke::open on another operation"),
    };
    ensure(
        !reason.trim().is_empty(),
        C::MissingReason,
        "a revoke request needs a reason",
    )?;
    if let Some(open) = &ctx.c.revoke {
        return reject(
            C::RevokePending,
            format!(
                "{} {} is still open",
                open.kind.wire_name(),
                hex_id(&open.record)
            ),
        );
    }
    next.revoke = Some(OpenRevoke {
        record: ctx.r.id,
        kind,
        by: ctx.r.author.clone(),
        reason: reason.clone(),
        items: targets.to_vec(),
        at: ctx.now,
    });
    let to: Vec<Party> = other_side(ctx.c, kind)
        .into_iter()
        .filter(|p| *p != ctx.r.author)
        .collect();
    fx.push(Effect::Notify {
        commitment: ctx.c.id.clone(),
        record: ctx.r.id,
        to,
        about: Notification::RevokeRequested { kind },
    });
    Ok(())
}

/// allow: the open revoke request closes with the table's "On allow".
pub(crate) fn allow(
    ctx: &Ctx,
    kind: RevokeKind,
    targets: &[String],
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let Operation::Allow {
        reopening_commitment_id,
        ..
    } = &ctx.r.op
    else {
        unreachable!("revoke::allow on another operation")
    };
    let open = ctx
        .c
        .revoke
        .clone()
        .expect("resolved against an open revoke");
    next.revoke = None;
    if kind == RevokeKind::Statement {
        for t in targets {
            if let Some(item) = next.items.get_mut(t) {
                item.statement = None;
            }
        }
    }
    if kind.rule().allow_reopens {
        let id = if reopening_commitment_id.is_empty() {
            format!("{}~reopen~{}", ctx.c.id, &hex_id(&ctx.r.id)[..16])
        } else {
            reopening_commitment_id.clone()
        };
        ensure(
            id != ctx.c.id && ctx.dir.commitment(&id).is_none(),
            C::CommitmentExists,
            format!("the reopening commitment id {id:?} is taken"),
        )?;
        let link = ReopenLink {
            commitment: ctx.c.id.clone(),
            reopening: id,
            revoke: open.record,
            allow: ctx.r.id,
        };
        next.reopened_by.push(link.clone());
        let commitment = Box::new(reopening(ctx.c, targets, &link, ctx.now));
        fx.push(Effect::StartReopening { link, commitment });
    }
    Ok(())
}

/// refuse: the open revoke request closes with the table's "On refuse".
pub(crate) fn refuse(
    ctx: &Ctx,
    kind: RevokeKind,
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let Operation::Refuse { reason } = &ctx.r.op else {
        unreachable!("revoke::refuse on another operation")
    };
    ensure(
        !reason.trim().is_empty(),
        C::MissingReason,
        "refuse needs a reason",
    )?;
    let open = ctx
        .c
        .revoke
        .clone()
        .expect("resolved against an open revoke");
    next.revoke = None;
    if kind.rule().on_refuse == OnRefuse::DisputeMark {
        next.disputes.push(DisputeMark {
            record: ctx.r.id,
            disputed: open.record,
            by: ctx.r.author.clone(),
            reason: reason.clone(),
            from_refusal: true,
        });
        let to = ctx
            .c
            .parties()
            .into_iter()
            .filter(|p| *p != ctx.r.author)
            .collect();
        fx.push(Effect::Notify {
            commitment: ctx.c.id.clone(),
            record: ctx.r.id,
            to,
            about: Notification::DisputeMarked {
                disputed: open.record,
            },
        });
    }
    Ok(())
}

/// dispute: a dispute mark on a reject or an open revoke_acceptance; no state change.
pub(crate) fn dispute(
    ctx: &Ctx,
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let Operation::Dispute {
        disputed_record,
        reason,
    } = &ctx.r.op
    else {
        unreachable!("revoke::dispute on another operation")
    };
    let Some(disputed) = disputed_record else {
        return reject(C::MissingField, "dispute needs the disputed record");
    };
    ensure(
        !reason.trim().is_empty(),
        C::MissingReason,
        "dispute needs a reason",
    )?;
    let open_revoke_acceptance = ctx
        .c
        .revoke
        .as_ref()
        .is_some_and(|o| o.kind == RevokeKind::Acceptance && o.record == *disputed);
    ensure(
        ctx.c.rejects.contains(disputed) || open_revoke_acceptance,
        C::NotDisputable,
        "only a reject or an open revoke_acceptance can be disputed",
    )?;
    ensure(
        !ctx.c.disputes.iter().any(|d| d.disputed == *disputed),
        C::AlreadyDisputed,
        "that record already carries a dispute mark",
    )?;
    next.disputes.push(DisputeMark {
        record: ctx.r.id,
        disputed: *disputed,
        by: ctx.r.author.clone(),
        reason: reason.clone(),
        from_refusal: false,
    });
    let to = ctx
        .c
        .parties()
        .into_iter()
        .filter(|p| *p != ctx.r.author)
        .collect();
    fx.push(Effect::Notify {
        commitment: ctx.c.id.clone(),
        record: ctx.r.id,
        to,
        about: Notification::DisputeMarked {
            disputed: *disputed,
        },
    });
    Ok(())
}

/// A revoke request lapses once none of its items is in a state it acts on any more (for
/// instance a revoke_statement after the acceptor rejected the statement).
pub(crate) fn lapse(next: &mut Commitment) {
    if let Some(open) = &next.revoke {
        let from = open.kind.rule().from;
        let live = open
            .items
            .iter()
            .any(|i| next.items.get(i).is_some_and(|it| from.contains(it.state)));
        if !live {
            next.revoke = None;
        }
    }
}

/// The reopening commitment an allowed revoke_acceptance starts: the revoked items again, in
/// `requested`, offered to the previous obligor, same obligee, acceptor and terms; created by
/// the allow record (its origin and first history entry).
fn reopening(c: &Commitment, targets: &[String], link: &ReopenLink, now: i64) -> Commitment {
    let mut terms = c.terms.clone();
    if c.has_line_items() {
        terms.items.retain(|li| targets.contains(&li.id));
    }
    let items = targets
        .iter()
        .map(|t| {
            let description = c
                .items
                .get(t)
                .map(|i| i.description.clone())
                .unwrap_or_default();
            let key = if c.has_line_items() {
                t.clone()
            } else {
                WHOLE.to_string()
            };
            (
                key,
                Item {
                    description,
                    state: State::Requested,
                    validity: None,
                    statement: None,
                    accepted_implicitly: false,
                    work: None,
                },
            )
        })
        .collect();
    Commitment {
        id: link.reopening.clone(),
        home: c.home.clone(),
        created_at: now,
        updated_at: now,
        origin: link.allow,
        obligee: c.obligee.clone(),
        acceptor: c.acceptor.clone(),
        accountable: c.accountable.clone(),
        principal: c.principal.clone(),
        obligor: None,
        offered_to: c.obligor.clone().or_else(|| c.offered_to.clone()),
        nominees: Vec::new(),
        terms,
        terms_version: link.allow,
        version: 1,
        content_changes: 0,
        counter: None,
        acceptance: c.acceptance,
        implicit_window_ms: c.implicit_window_ms,
        items,
        queue: None,
        claim: None,
        claims: Vec::new(),
        forward_count: 0,
        delegate_offer: None,
        assign_offer: None,
        deferral: None,
        revoke: None,
        rejects: Vec::new(),
        disputes: Vec::new(),
        conditions: Vec::new(),
        notices: Vec::new(),
        consumed: 0,
        evidence: Vec::new(),
        admissions: Vec::new(),
        reopens: Some(link.clone()),
        reopened_by: Vec::new(),
        history: vec![link.allow],
        executors: Vec::new(),
        stop: None,
        handover: None,
        last_recheck: None,
        attention: Vec::new(),
        policy_offers: Vec::new(),
    }
}
