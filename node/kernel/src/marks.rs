//! Records that mark a commitment without a commitment-axis change of their own: Conditions
//! (seed 000, "Conditions and gates"; the precondition of a conditional promise is one, and
//! satisfying or withdrawing it makes the promise unconditional), budget consumption, executor
//! acts (the evidence the kernel knows of) and admission declarations.

use crate::access::Access;
use crate::commitment::{AdmissionMark, Commitment, OpenCondition};
use crate::ctx::Ctx;
use crate::gates;
use crate::record::{AdmissionOutcome, Operation, Record};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::rules::RuleKey;

pub(crate) fn execute(
    ctx: &Ctx,
    key: RuleKey,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    match (&ctx.r.op, key) {
        (Operation::OpenCondition { condition }, RuleKey::OpenCondition) => {
            gates::check_new(ctx, condition)?;
            next.conditions.push(OpenCondition {
                record: ctx.r.id,
                owner: ctx.r.author.clone(),
                condition: condition.clone(),
                precondition_items: Vec::new(),
                answers: Vec::new(),
                opened_at: ctx.now,
            });
        }
        (Operation::SatisfyCondition, RuleKey::SatisfyCondition) => {
            // Not deleted: the answer is bound to the content, and an amend reopens it.
            gates::satisfy(ctx, next)?;
        }
        (
            Operation::WithdrawCondition | Operation::SatisfyCondition,
            RuleKey::WithdrawCondition
            | RuleKey::WithdrawPrecondition
            | RuleKey::SatisfyPrecondition,
        ) => {
            let record = ctx
                .condition
                .expect("resolved against an open condition")
                .record;
            next.conditions.retain(|oc| oc.record != record);
            if matches!(
                key,
                RuleKey::WithdrawPrecondition | RuleKey::SatisfyPrecondition
            ) {
                for t in targets {
                    if let Some(item) = next.items.get_mut(t) {
                        item.validity = None;
                    }
                }
            }
        }
        (Operation::ReportConsumption { amount }, RuleKey::ReportConsumption) => {
            ensure(
                *amount > 0,
                C::MissingField,
                "report_consumption needs an amount",
            )?;
            next.consumed = next.consumed.saturating_add(*amount);
        }
        (Operation::ActedUpon { record_id, .. }, RuleKey::ActedUpon) => {
            ensure(
                record_id.is_some(),
                C::MissingField,
                "acted_upon names the record acted on",
            )?;
            next.evidence.push(ctx.r.id);
        }
        (
            Operation::Admission {
                peer,
                outcome,
                code,
                ..
            },
            RuleKey::Admission,
        ) => {
            let peer_record = check_admission(&ctx.r.op)?;
            next.admissions.push(AdmissionMark {
                record: ctx.r.id,
                peer_record,
                peer: peer.clone(),
                outcome: *outcome,
                code: code.clone(),
            });
        }
        _ => unreachable!("marks::execute on {}", key.name()),
    }
    Ok(())
}

/// An admission's required content: the peer record and a known outcome.
fn check_admission(op: &Operation) -> Result<crate::record::RecordId, Rejection> {
    let Operation::Admission {
        record_id, outcome, ..
    } = op
    else {
        unreachable!()
    };
    let Some(peer_record) = record_id else {
        return reject(C::MissingField, "admission names the peer record");
    };
    match outcome {
        AdmissionOutcome::Unspecified => reject(C::MissingField, "admission needs an outcome"),
        AdmissionOutcome::Unknown(n) => reject(C::Malformed, format!("admission outcome {n}")),
        _ => Ok(*peer_record),
    }
}

/// An admission declaration about a record whose commitment this node does not know (a
/// quarantined record whose request never arrived, a record without a commitment): applied with
/// no derived state. Access decides who may write it (seed 000, "Federation admission" names no
/// role); it is a local declaration, so its author acts for this node's organisation.
pub(crate) fn detached_admission(r: &Record, access: &Access) -> Result<(), Rejection> {
    ensure(
        access.acts_for(&r.author),
        C::NotAuthorized,
        format!("{} does not act for {:?}", r.author, r.author.organisation),
    )?;
    ensure(
        r.author.organisation == access.service.organisation,
        C::WrongRole,
        "an admission is a local declaration of this node's organisation",
    )?;
    check_admission(&r.op).map(|_| ())
}
