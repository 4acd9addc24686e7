//! Records that mark a commitment without a commitment-axis change of their own: Conditions
//! (seed 000, "Conditions and gates"; the precondition of a conditional promise is one, and
//! satisfying or withdrawing it makes the promise unconditional), budget consumption, executor
//! acts (the evidence the kernel knows of) and admission declarations.

use crate::apply::Ctx;
use crate::commitment::{AdmissionMark, Commitment, OpenCondition};
use crate::record::{AdmissionOutcome, Operation};
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
            ensure(
                !condition.description.trim().is_empty()
                    && condition
                        .addressed_to
                        .as_ref()
                        .is_some_and(|p| !p.organisation.is_empty() && !p.name.is_empty()),
                C::MissingCondition,
                "a Condition needs a description and an addressee",
            )?;
            next.conditions.push(OpenCondition {
                record: ctx.r.id,
                owner: ctx.r.author.clone(),
                condition: condition.clone(),
                precondition_items: Vec::new(),
            });
        }
        (
            Operation::WithdrawCondition | Operation::SatisfyCondition,
            RuleKey::WithdrawCondition
            | RuleKey::SatisfyCondition
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
                record_id,
                peer,
                outcome,
                code,
                ..
            },
            RuleKey::Admission,
        ) => {
            let Some(peer_record) = record_id else {
                return reject(C::MissingField, "admission names the peer record");
            };
            match outcome {
                AdmissionOutcome::Unspecified => {
                    return reject(C::MissingField, "admission needs an outcome");
                }
                AdmissionOutcome::Unknown(n) => {
                    return reject(C::Malformed, format!("admission outcome {n}"));
                }
                _ => {}
            }
            next.admissions.push(AdmissionMark {
                record: ctx.r.id,
                peer_record: *peer_record,
                peer: peer.clone(),
                outcome: *outcome,
                code: code.clone(),
            });
        }
        _ => unreachable!("marks::execute on {}", key.name()),
    }
    Ok(())
}
