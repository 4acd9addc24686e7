//! defer and resume (seed 000, "Operations"): no state change; an open defer makes the summary
//! category `deferred` until a resume closes it.

use crate::commitment::{Commitment, Deferral};
use crate::ctx::Ctx;
use crate::record::{Operation, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::roles;
use crate::rules::Role;
use crate::service;

pub(crate) fn defer(ctx: &Ctx, targets: &[String], next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::Defer {
        reason,
        return_at,
        return_event,
    } = &ctx.r.op
    else {
        unreachable!()
    };
    ensure(
        !reason.trim().is_empty(),
        C::MissingReason,
        "defer needs a reason",
    )?;
    if let Some(open) = &ctx.c.deferral {
        return reject(
            C::AlreadyDeferred,
            format!("defer {} is open", hex_id(&open.record)),
        );
    }
    // Seed 000: "optional return date or return event" — the event from the kernel's closed
    // list (crate::return_event), checked here so a resume on it can be derived later.
    let event = crate::return_event::check_at_defer(ctx, return_event)?;
    next.deferral = Some(Deferral {
        record: ctx.r.id,
        by: ctx.r.author.clone(),
        reason: reason.clone(),
        return_at: *return_at,
        return_event: event.map(|e| e.wire()),
        at: ctx.now,
        items: targets.to_vec(),
    });
    Ok(())
}

/// resume: basis names the open defer. The obligee or obligor may resume at any time (naming the
/// return event, if they name one, must match it); the Work service party only when the return
/// date has arrived or the deferral's return event has occurred.
pub(crate) fn resume(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::Resume { event } = &ctx.r.op else {
        unreachable!()
    };
    let Some(open) = &ctx.c.deferral else {
        return reject(C::NoOpenDefer, "no defer is open");
    };
    ensure(
        ctx.r.basis.contains(&open.record),
        C::MissingBasis,
        "resume names the defer it closes in basis",
    )?;
    let party = roles::holds(ctx, Role::Obligee) || roles::holds(ctx, Role::Obligor);
    if party {
        ensure(
            event.is_empty() || open.return_event.as_deref() == Some(event.as_str()),
            C::EventMismatch,
            format!("the deferral does not wait for event {event:?}"),
        )?;
    } else {
        service::check_resume(ctx, open)?;
    }
    next.deferral = None;
    Ok(())
}
