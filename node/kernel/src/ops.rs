//! The negotiation and delivery operations of seed 000 "Operations": promise,
//! promise_conditional, decline, counter, accept_counter, state, accept, reject, cancel, release,
//! amend, notice, declare_obsolete, administrative_close. The state and role checks are done by
//! the tables before these run; here are the required contents and the side effects.

use crate::commitment::{
    Commitment, CounterVersion, NoticeMark, OpenCondition, Statement, Validity,
};
use crate::ctx::Ctx;
use crate::effect::{Effect, Notification};
use crate::gates;
use crate::record::{CancelReason, DeclineReason, GateAnswer, NoticeType, Operation, Party, Terms};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::roles;
use crate::rules::{Role, RuleKey};
use crate::service;
use crate::state::State;

pub(crate) fn party_ok(p: &Party) -> bool {
    !p.organisation.is_empty() && !p.name.is_empty()
}

pub(crate) fn check_party(p: &Option<Party>, field: &str) -> Result<(), Rejection> {
    match p {
        Some(p) if !party_ok(p) => reject(
            C::MissingField,
            format!("{field} needs organisation and name"),
        ),
        _ => Ok(()),
    }
}

/// Validates line item ids: non-empty and unique.
pub(crate) fn check_terms(terms: &Terms) -> Result<(), Rejection> {
    ensure(
        !terms.title.trim().is_empty(),
        C::MissingField,
        "terms need a title",
    )?;
    let mut seen: Vec<&str> = Vec::new();
    for li in &terms.items {
        ensure(
            !li.id.is_empty(),
            C::MissingField,
            "a line item needs an id",
        )?;
        ensure(
            !seen.contains(&li.id.as_str()),
            C::DuplicateItem,
            format!("line item {:?} twice", li.id),
        )?;
        seen.push(&li.id);
    }
    Ok(())
}

/// New terms (counter, amend) must keep the set of line item ids.
fn check_same_items(c: &Commitment, terms: &Terms) -> Result<(), Rejection> {
    check_terms(terms)?;
    let same = if c.has_line_items() {
        terms.items.len() == c.items.len()
            && terms.items.iter().all(|li| c.items.contains_key(&li.id))
    } else {
        terms.items.is_empty()
    };
    ensure(
        same,
        C::ItemSetChanged,
        "new terms must keep the line item ids",
    )
}

fn adopt_terms(next: &mut Commitment, terms: Terms, version: crate::record::RecordId) {
    for li in &terms.items {
        if let Some(item) = next.items.get_mut(&li.id) {
            item.description = li.description.clone();
        }
    }
    if next.terms != terms {
        next.content_changes += 1;
    }
    next.terms = terms;
    next.terms_version = version;
    next.version += 1;
}

/// The obligor becomes the author; the items promised are no longer expirable.
pub(crate) fn become_obligor(ctx: &Ctx, targets: &[String], next: &mut Commitment) {
    if next.obligor.is_none() {
        next.obligor = Some(ctx.r.author.clone());
    }
    for t in targets {
        if let Some(item) = next.items.get_mut(t) {
            item.validity = None;
        }
    }
}

pub(crate) fn promise(
    ctx: &Ctx,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    become_obligor(ctx, targets, next);
    Ok(())
}

pub(crate) fn promise_conditional(
    ctx: &Ctx,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    let Operation::PromiseConditional {
        condition,
        deadline,
    } = &ctx.r.op
    else {
        unreachable!()
    };
    ensure(
        !condition.description.trim().is_empty()
            && condition.addressed_to.as_ref().is_some_and(party_ok),
        C::MissingCondition,
        "promise_conditional needs a Condition with a description and an addressee",
    )?;
    let Some(deadline) = *deadline else {
        return reject(
            C::MissingDeadline,
            "promise_conditional needs the precondition's deadline",
        );
    };
    ensure(
        deadline > ctx.now,
        C::InvalidDeadline,
        "the deadline must be in the future",
    )?;
    become_obligor(ctx, targets, next);
    for t in targets {
        if let Some(item) = next.items.get_mut(t) {
            item.validity = Some(Validity {
                record: ctx.r.id,
                until: deadline,
            });
        }
    }
    next.conditions.push(OpenCondition {
        record: ctx.r.id,
        owner: ctx.r.author.clone(),
        condition: condition.clone(),
        precondition_items: targets.to_vec(),
        answers: Vec::new(),
        opened_at: ctx.now,
    });
    Ok(())
}

pub(crate) fn decline(ctx: &Ctx) -> Result<(), Rejection> {
    let Operation::Decline { reason, .. } = &ctx.r.op else {
        unreachable!()
    };
    match reason {
        DeclineReason::Unspecified => reject(C::MissingReason, "decline needs a reason code"),
        DeclineReason::Unknown(n) => reject(C::UnknownReasonCode, format!("decline reason {n}")),
        _ => Ok(()),
    }
}

pub(crate) fn cancel(ctx: &Ctx) -> Result<(), Rejection> {
    let Operation::Cancel { reason, .. } = &ctx.r.op else {
        unreachable!()
    };
    match reason {
        CancelReason::Unspecified => reject(C::MissingReason, "cancel needs a reason code"),
        CancelReason::Unknown(n) => reject(C::UnknownReasonCode, format!("cancel reason {n}")),
        _ => Ok(()),
    }
}

/// counter: the candidate's counter (from requested) becomes the current counter version; the
/// obligee's counter (from countered) becomes the new offer version.
pub(crate) fn counter(
    ctx: &Ctx,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    let Operation::Counter { terms } = &ctx.r.op else {
        unreachable!()
    };
    let Some(terms) = terms else {
        return reject(C::MissingTerms, "counter needs changed terms");
    };
    check_same_items(ctx.c, terms)?;
    let from = ctx.c.items[&targets[0]].state;
    let current = match (&ctx.c.counter, from) {
        (Some(cv), State::Countered) => &cv.terms,
        _ => &ctx.c.terms,
    };
    ensure(
        terms != current,
        C::UnchangedTerms,
        "a counter must change the terms",
    )?;
    if from == State::Requested {
        next.counter = Some(CounterVersion {
            record: ctx.r.id,
            by: ctx.r.author.clone(),
            terms: terms.clone(),
        });
    } else {
        next.counter = None;
        adopt_terms(next, terms.clone(), ctx.r.id);
    }
    Ok(())
}

/// accept_counter: the digest must name the current counter version; its terms and author
/// become the commitment's. A counter whose author is no longer the one who would become the
/// obligor — another candidate promised an item since — is stale: the obligor changes only by
/// delegate (seed 000: "The old party stays in place until acceptance").
pub(crate) fn accept_counter(
    ctx: &Ctx,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    let Operation::AcceptCounter { counter_digest } = &ctx.r.op else {
        unreachable!()
    };
    let Some(digest) = counter_digest else {
        return reject(
            C::MissingDigest,
            "accept_counter needs the counter's digest",
        );
    };
    let Some(cv) = ctx.c.counter.as_ref().filter(|cv| cv.record == *digest) else {
        return reject(
            C::StaleCounterDigest,
            "the digest is not the current counter version",
        );
    };
    ensure(
        ctx.c.obligor.as_ref().is_none_or(|o| *o == cv.by),
        C::StaleCounterDigest,
        "the counter's author is not the commitment's obligor: another candidate promised since",
    )?;
    adopt_terms(next, cv.terms.clone(), cv.record);
    next.counter = None;
    next.obligor = Some(cv.by.clone());
    for t in targets {
        if let Some(item) = next.items.get_mut(t) {
            item.validity = None;
        }
    }
    Ok(())
}

pub(crate) fn state(ctx: &Ctx, targets: &[String], next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::State { fulfillment_refs } = &ctx.r.op else {
        unreachable!()
    };
    ensure(
        !fulfillment_refs.is_empty() && fulfillment_refs.iter().all(|f| !f.trim().is_empty()),
        C::MissingFulfillmentRefs,
        "state needs fulfilment references",
    )?;
    for t in targets {
        if let Some(item) = next.items.get_mut(t) {
            item.statement = Some(Statement {
                record: ctx.r.id,
                by: ctx.r.author.clone(),
                at: ctx.now,
                refs: fulfillment_refs.clone(),
            });
        }
    }
    Ok(())
}

/// accept: explicit by the acceptor (evidence, four-eyes, step-up as the criterion says), or
/// implicit by the Work service party (see [`service`]).
pub(crate) fn accept(
    ctx: &Ctx,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    let Operation::Accept {
        evidence_ref,
        implicit,
        step_up,
    } = &ctx.r.op
    else {
        unreachable!()
    };
    if *implicit {
        ensure(
            crate::service::is_service_party(ctx.c, ctx.access, &ctx.r.author),
            C::WrongRole,
            "only the Work service party writes an implicit accept",
        )?;
        service::check_implicit_accept(ctx, targets)?;
    } else {
        ensure(
            roles::holds(ctx, Role::Acceptor),
            C::WrongRole,
            "the Work service party accepts only implicitly",
        )?;
        let crit = ctx.c.acceptance;
        ensure(
            !crit.requires_evidence || !evidence_ref.trim().is_empty(),
            C::MissingEvidence,
            "the acceptance criterion requires an evidence reference",
        )?;
        ensure(
            !crit.four_eyes
                || targets.iter().all(|t| {
                    ctx.c.items[t]
                        .statement
                        .as_ref()
                        .is_none_or(|s| s.by != ctx.r.author)
                }),
            C::FourEyes,
            "four-eyes: the acceptor stated fulfilment",
        )?;
        ensure(
            !crit.step_up || *step_up,
            C::StepUpRequired,
            "step-up is required to accept",
        )?;
    }
    for t in targets {
        if let Some(item) = next.items.get_mut(t) {
            item.accepted_implicitly = *implicit;
        }
    }
    gates::delivery_answer(ctx, next, GateAnswer::Accept);
    Ok(())
}

/// reject: back to promised; the reject becomes disputable; the evidence gathered so far is
/// cleared (it did not convince the acceptor).
pub(crate) fn reject_statement(
    ctx: &Ctx,
    targets: &[String],
    next: &mut Commitment,
) -> Result<(), Rejection> {
    let Operation::Reject { reason } = &ctx.r.op else {
        unreachable!()
    };
    ensure(
        !reason.trim().is_empty(),
        C::MissingReason,
        "reject needs a reason",
    )?;
    for t in targets {
        if let Some(item) = next.items.get_mut(t) {
            item.statement = None;
        }
    }
    next.rejects.push(ctx.r.id);
    next.evidence.clear();
    gates::delivery_answer(ctx, next, GateAnswer::Reject);
    Ok(())
}

/// release, amend, notice, declare_obsolete, administrative_close.
pub(crate) fn closing_and_notes(
    ctx: &Ctx,
    key: RuleKey,
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    let others = || -> Vec<Party> {
        ctx.c
            .parties()
            .into_iter()
            .filter(|p| *p != ctx.r.author)
            .collect()
    };
    match (&ctx.r.op, key) {
        (Operation::Release { .. }, RuleKey::Release) => Ok(()),
        (
            Operation::Amend {
                supersedes, terms, ..
            },
            RuleKey::Amend,
        ) => {
            let Some(supersedes) = supersedes else {
                return reject(C::MissingSupersedes, "amend needs supersedes");
            };
            ensure(
                *supersedes == ctx.c.terms_version,
                C::StaleVersion,
                "supersedes must name the current version",
            )?;
            let Some(terms) = terms else {
                return reject(C::MissingTerms, "amend needs terms");
            };
            check_same_items(ctx.c, terms)?;
            gates::amend_participants(ctx, next)?;
            adopt_terms(next, terms.clone(), ctx.r.id);
            Ok(())
        }
        (Operation::Notice { notice_type, text }, RuleKey::Notice) => {
            match notice_type {
                NoticeType::Unspecified => {
                    return reject(C::MissingNoticeType, "notice needs a notice_type");
                }
                NoticeType::Unknown(n) => {
                    return reject(C::UnknownNoticeType, format!("notice type {n}"));
                }
                _ => {}
            }
            next.notices.push(NoticeMark {
                record: ctx.r.id,
                by: ctx.r.author.clone(),
                notice_type: *notice_type,
                text: text.clone(),
                at: ctx.now,
            });
            fx.push(Effect::Notify {
                commitment: ctx.c.id.clone(),
                record: ctx.r.id,
                to: others(),
                about: Notification::Notice {
                    notice_type: *notice_type,
                    text: text.clone(),
                },
            });
            Ok(())
        }
        (Operation::DeclareObsolete { parent_ref }, RuleKey::DeclareObsolete) => ensure(
            !parent_ref.trim().is_empty(),
            C::MissingParentRef,
            "declare_obsolete needs the parent reference",
        ),
        (Operation::AdministrativeClose { reason }, RuleKey::AdministrativeClose) => {
            ensure(
                !reason.trim().is_empty(),
                C::MissingReason,
                "administrative_close needs a reason",
            )?;
            fx.push(Effect::Notify {
                commitment: ctx.c.id.clone(),
                record: ctx.r.id,
                to: others(),
                about: Notification::AdministrativelyClosed {
                    reason: reason.clone(),
                },
            });
            Ok(())
        }
        _ => unreachable!("closing_and_notes on {}", key.name()),
    }
}
