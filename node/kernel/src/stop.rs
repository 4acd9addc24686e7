//! Stop requests and control handover (seed 000, "Stop requests", "Control handover").
//!
//! ```text
//! stop_request (immediate | finish_then_stop | pause) -> pending -> stop_response
//!     accept | finish_then_stop | refuse (reason; attention for principal and requester)
//! executor confirmation (observation: stopped / paused) -> execution shows stopped / paused
//! resume_after_stop: a separate declaration; never automatic
//!
//! pause -> executor confirmation or checkpoint -> control_lease (manual, holder)
//!     -> hand_back_control (handoff_note; intervened) -> recheck: continue | replan
//! ```
//!
//! Choices where the seed is silent: only one stop request holds at a time; the stop is asked
//! by the accountable party, the obligee or the principal, answered by the executor (a party of
//! the obligor's organisation), and resumed by one of those who may ask it. A control lease is
//! taken by the accountable party or the obligee, for a holder; the re-check is the accountable
//! party's, the obligee's or the obligor's. Its outcome, "continue" or "replan", is recorded
//! and ends the handover; neither ends the stop: "Continuing after a stop is a separate
//! resume_after_stop Declaration and never happens on its own" (seed 000, "Stop requests").
//! For the same reason a resume_after_stop is taken at any time a stop holds, a handover
//! included (the seed puts no condition on it): it ends the stop; the handover goes on to its
//! hand back and re-check, and the control axis stays with the holder until then.

use crate::claims;
use crate::commitment::{AttentionMark, Commitment, Handover, HandoverPhase, StopState};
use crate::ctx::Ctx;
use crate::effect::{Effect, Notification};
use crate::record::{Operation, Party, RecheckOutcome, StopAnswer, StopMode, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};

fn push_unique(out: &mut Vec<Party>, p: &Party) {
    if !out.contains(p) {
        out.push(p.clone());
    }
}

/// The executors to notify: every executor that reported, or the obligor. External claimants
/// are not told: the stop and the control handover are the executor's to act on.
fn executors(c: &Commitment) -> Vec<Party> {
    let mut out: Vec<Party> = c
        .executors
        .iter()
        .filter(|e| !e.external)
        .map(|e| e.executor.clone())
        .collect();
    if let Some(o) = &c.obligor {
        push_unique(&mut out, o);
    }
    out
}

pub(crate) fn stop_request(
    ctx: &Ctx,
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let Operation::StopRequest { mode, reason } = &ctx.r.op else {
        unreachable!()
    };
    match mode {
        StopMode::Unspecified => return reject(C::MissingField, "stop_request needs a mode"),
        StopMode::Unknown(n) => return reject(C::Malformed, format!("stop mode {n}")),
        _ => {}
    }
    if let Some(st) = ctx.c.stop.as_ref().filter(|s| s.in_effect()) {
        return reject(
            C::StopPending,
            format!("stop request {} still holds", hex_id(&st.record)),
        );
    }
    next.stop = Some(StopState {
        record: ctx.r.id,
        by: ctx.r.author.clone(),
        mode: *mode,
        reason: reason.clone(),
        at: ctx.now,
        seq: ctx.c.history.len(),
        response: None,
        confirmed: None,
        resumed: None,
    });
    fx.push(Effect::Notify {
        commitment: ctx.c.id.clone(),
        record: ctx.r.id,
        to: executors(ctx.c)
            .into_iter()
            .filter(|p| *p != ctx.r.author)
            .collect(),
        about: Notification::StopRequested { mode: *mode },
    });
    Ok(())
}

/// The stop request a response or resume names in basis.
fn named_stop<'a>(ctx: &'a Ctx) -> Result<&'a StopState, Rejection> {
    let Some(st) = ctx.c.stop.as_ref().filter(|s| s.in_effect()) else {
        return reject(C::NoOpenStop, "no stop request holds");
    };
    ensure(
        ctx.r.basis.contains(&st.record),
        C::MissingBasis,
        "basis must name the stop request",
    )?;
    Ok(st)
}

pub(crate) fn stop_response(
    ctx: &Ctx,
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let Operation::StopResponse { answer, reason } = &ctx.r.op else {
        unreachable!()
    };
    let st = named_stop(ctx)?;
    ensure(
        st.response.is_none(),
        C::AlreadyAnswered,
        "the stop request was answered",
    )?;
    match answer {
        StopAnswer::Unspecified => return reject(C::MissingField, "stop_response needs an answer"),
        StopAnswer::Unknown(n) => return reject(C::Malformed, format!("stop answer {n}")),
        StopAnswer::Refuse => ensure(
            !reason.trim().is_empty(),
            C::MissingReason,
            "a refusal needs a reason",
        )?,
        _ => {}
    }
    let stop = next.stop.as_mut().expect("checked above");
    stop.response = Some((*answer, ctx.r.id));
    if *answer == StopAnswer::Refuse {
        let mut to = Vec::new();
        if let Some(p) = &ctx.c.principal {
            push_unique(&mut to, p);
        }
        push_unique(&mut to, &st.by);
        next.attention.push(AttentionMark {
            record: ctx.r.id,
            to: to.clone(),
            about: "stop_response".into(),
            reason: reason.clone(),
        });
        fx.push(Effect::Notify {
            commitment: ctx.c.id.clone(),
            record: ctx.r.id,
            to,
            about: Notification::StopRefused {
                reason: reason.clone(),
            },
        });
    }
    Ok(())
}

pub(crate) fn resume_after_stop(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    named_stop(ctx)?;
    if let Some(st) = next.stop.as_mut() {
        st.resumed = Some(ctx.r.id);
    }
    Ok(())
}

pub(crate) fn control_lease(
    ctx: &Ctx,
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let Operation::ControlLease { holder, until } = &ctx.r.op else {
        unreachable!()
    };
    let Some(holder) = holder
        .as_ref()
        .filter(|p| !p.organisation.is_empty() && !p.name.is_empty())
    else {
        return reject(C::MissingField, "control_lease needs a holder");
    };
    ensure(
        ctx.c.handover.is_none(),
        C::InvalidState,
        "a control handover is under way",
    )?;
    named_stop(ctx)?;
    ensure(
        claims::stop_confirmed(ctx.c) || claims::checkpoint_since_stop(ctx.c),
        C::NotPaused,
        "control is leased after the executor confirmed the pause or reported a checkpoint",
    )?;
    next.handover = Some(Handover {
        lease: ctx.r.id,
        holder: holder.clone(),
        until: *until,
        phase: HandoverPhase::Leased,
        handed_back: None,
    });
    fx.push(Effect::Notify {
        commitment: ctx.c.id.clone(),
        record: ctx.r.id,
        to: [holder.clone()]
            .into_iter()
            .chain(executors(ctx.c))
            .filter(|p| *p != ctx.r.author)
            .collect(),
        about: Notification::ControlTaken {
            holder: holder.clone(),
        },
    });
    Ok(())
}

pub(crate) fn hand_back(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::HandBackControl { handoff_note } = &ctx.r.op else {
        unreachable!()
    };
    let Some(h) = ctx
        .c
        .handover
        .as_ref()
        .filter(|h| h.phase == HandoverPhase::Leased)
    else {
        return reject(C::NoControlLease, "no control lease is held");
    };
    ensure(
        ctx.r.basis.contains(&h.lease),
        C::MissingBasis,
        "basis must name the control_lease",
    )?;
    ensure(
        !handoff_note.trim().is_empty(),
        C::MissingHandoverNote,
        "handing back control needs a handoff_note",
    )?;
    let h = next.handover.as_mut().expect("checked above");
    h.phase = HandoverPhase::HandedBack;
    h.handed_back = Some((ctx.r.id, handoff_note.clone()));
    Ok(())
}

pub(crate) fn recheck(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::Recheck { outcome, .. } = &ctx.r.op else {
        unreachable!()
    };
    match outcome {
        RecheckOutcome::Unspecified => return reject(C::MissingField, "recheck needs an outcome"),
        RecheckOutcome::Unknown(n) => return reject(C::Malformed, format!("recheck outcome {n}")),
        _ => {}
    }
    ensure(
        ctx.c
            .handover
            .as_ref()
            .is_some_and(|h| h.phase == HandoverPhase::HandedBack),
        C::NoHandBack,
        "the re-check follows the hand back of control",
    )?;
    next.handover = None;
    next.last_recheck = Some((ctx.r.id, *outcome));
    Ok(())
}
