//! Conditions and gates, their answers and multi-party aggregation (seed 000, "Conditions and
//! gates", "Multi-party aggregation").
//!
//! * A gate's kind is fixed at `open_condition`; nothing changes it (a wrong kind is withdrawn
//!   and a new gate opened).
//! * An answer is bound to the content it answered: the commitment's terms as they were. When
//!   the terms change afterwards (`amend`, an obligee's counter), even by one parameter, the
//!   answer stops counting and the participant's request is open again.
//! * Only `accept` counts as acceptance; reject, closed without an answer and timed out (the
//!   gate's deadline passed with the participant's request open) do not.
//! * The status (waiting / satisfied / unsatisfiable) is derived from the participants' valid
//!   answers by the gate's [`Aggregation`]; when it is decided while participant requests are
//!   still open, the Work service party closes each as obsolete ([`due_closings`]).

use serde::{Deserialize, Serialize};

use crate::commitment::{AnswerMark, Commitment, OpenCondition};
use crate::ctx::Ctx;
use crate::record::{
    Aggregation, AggregationRule, Condition, GateAnswer, GateKind, Operation, Party, RecordId,
};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};

/// Where one participant stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Participation {
    /// The participant's request is open.
    Open,
    /// Sequential: the request opens after the previous participant's acceptance.
    NotYetOpen,
    /// Accepted (counts as acceptance).
    Accepted,
    /// Rejected.
    Rejected,
    /// Closed without an answer.
    ClosedWithoutAnswer,
    /// The gate's deadline passed with the request open.
    TimedOut,
    /// Closed as obsolete after an early decision.
    Obsolete,
}

impl Participation {
    /// Whether the participant may still accept.
    pub fn is_open(self) -> bool {
        matches!(self, Participation::Open | Participation::NotYetOpen)
    }
}

/// A gate's derived status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateStatus {
    /// Not decided yet: the gate waits.
    Waiting,
    /// Satisfied.
    Satisfied,
    /// Can no longer be satisfied.
    Unsatisfiable,
}

/// The number of acceptances a K-of-N or Percentage gate needs (Percentage: ⌈N × p⌉).
pub fn threshold(agg: &Aggregation, n: usize) -> usize {
    match agg.rule {
        AggregationRule::KOfN => agg.k as usize,
        AggregationRule::Percentage => (n * agg.percent as usize).div_ceil(100),
        AggregationRule::Any => 1,
        _ => n,
    }
}

/// The seed's "Multi-party aggregation" table over the participants' standings, in participant
/// order (the order matters only for Sequential).
pub fn aggregate(agg: &Aggregation, parts: &[Participation]) -> GateStatus {
    use Participation as P;
    let n = parts.len();
    let accepted = parts.iter().filter(|p| **p == P::Accepted).count();
    let open = parts.iter().filter(|p| p.is_open()).count();
    if agg.any_rejection_rejects && parts.contains(&P::Rejected) {
        return GateStatus::Unsatisfiable;
    }
    match agg.rule {
        AggregationRule::Sequential => {
            for p in parts {
                match p {
                    P::Accepted => continue,
                    P::Open | P::NotYetOpen => return GateStatus::Waiting,
                    _ => return GateStatus::Unsatisfiable,
                }
            }
            GateStatus::Satisfied
        }
        AggregationRule::Any => {
            if accepted >= 1 {
                GateStatus::Satisfied
            } else if open == 0 {
                GateStatus::Unsatisfiable
            } else {
                GateStatus::Waiting
            }
        }
        AggregationRule::KOfN | AggregationRule::Percentage => {
            let k = threshold(agg, n);
            if accepted >= k {
                GateStatus::Satisfied
            } else if accepted + open < k {
                GateStatus::Unsatisfiable
            } else {
                GateStatus::Waiting
            }
        }
        // All (and Unspecified / Unknown, which open_condition never lets in).
        _ => {
            if accepted == n {
                GateStatus::Satisfied
            } else if accepted + open < n {
                GateStatus::Unsatisfiable
            } else {
                GateStatus::Waiting
            }
        }
    }
}

/// Whether `a` still counts: the content has not changed since it was given (a change and a
/// change back still invalidate it: [`Commitment::content_changes`]).
pub fn answer_valid(c: &Commitment, a: &AnswerMark) -> bool {
    a.content_changes == c.content_changes && a.content == c.terms
}

/// Each participant's standing at `now`, in participant order.
pub fn participation(c: &Commitment, oc: &OpenCondition, now: i64) -> Vec<(Party, Participation)> {
    use Participation as P;
    let sequential = oc.condition.aggregation.rule == AggregationRule::Sequential;
    let timed_out = oc.condition.deadline.is_some_and(|d| now >= d);
    let mut previous_accepted = true;
    let mut out = Vec::new();
    for party in oc.condition.participant_list() {
        let last = oc
            .answers
            .iter()
            .rev()
            .find(|a| a.by == party && answer_valid(c, a));
        let standing = match last.map(|a| a.answer) {
            Some(GateAnswer::Accept) => P::Accepted,
            Some(GateAnswer::Reject) => P::Rejected,
            Some(GateAnswer::ClosedWithoutAnswer) => P::ClosedWithoutAnswer,
            Some(GateAnswer::Obsolete) => P::Obsolete,
            _ if sequential && !previous_accepted => P::NotYetOpen,
            _ if timed_out => P::TimedOut,
            _ => P::Open,
        };
        previous_accepted = standing == P::Accepted;
        out.push((party, standing));
    }
    out
}

/// The gate's status at `now`. A precondition is waiting while it is open.
pub fn status(c: &Commitment, oc: &OpenCondition, now: i64) -> GateStatus {
    if oc.is_precondition() {
        return GateStatus::Waiting;
    }
    let parts: Vec<Participation> = participation(c, oc, now)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    aggregate(&oc.condition.aggregation, &parts)
}

/// Whether any Condition or gate still waits (category `waiting`): open and not satisfied.
pub fn any_waiting(c: &Commitment, now: i64) -> bool {
    c.conditions
        .iter()
        .any(|oc| status(c, oc, now) != GateStatus::Satisfied)
}

/// open_condition: validates the Condition or gate (kind, participants, aggregation, deadline).
pub(crate) fn check_new(ctx: &Ctx, condition: &Condition) -> Result<(), Rejection> {
    let ok_party = |p: &Party| !p.organisation.is_empty() && !p.name.is_empty();
    ensure(
        !condition.description.trim().is_empty()
            && (condition.addressed_to.as_ref().is_some_and(ok_party)
                || !condition.participants.is_empty()),
        C::MissingCondition,
        "a Condition needs a description and an addressee or participants",
    )?;
    if let GateKind::Unknown(n) = condition.kind {
        return reject(C::UnknownGateKind, format!("gate kind {n}"));
    }
    check_participants(&condition.participants)?;
    let n = condition.participant_list().len();
    let agg = &condition.aggregation;
    match agg.rule {
        AggregationRule::Unspecified | AggregationRule::Unknown(_) => {
            return reject(C::InvalidAggregation, "aggregation needs a known rule");
        }
        AggregationRule::KOfN => ensure(
            agg.k >= 1 && agg.k as usize <= n,
            C::InvalidAggregation,
            format!("K of N needs 1 <= K <= N ({n})"),
        )?,
        AggregationRule::Percentage => ensure(
            (1..=100).contains(&agg.percent),
            C::InvalidAggregation,
            "percentage needs 1..=100",
        )?,
        _ => {}
    }
    if let Some(d) = condition.deadline {
        ensure(
            d > ctx.now,
            C::InvalidDeadline,
            "the gate's deadline must be in the future",
        )?;
    }
    Ok(())
}

fn check_participants(list: &[Party]) -> Result<(), Rejection> {
    for (i, p) in list.iter().enumerate() {
        ensure(
            !p.organisation.is_empty() && !p.name.is_empty(),
            C::MissingField,
            format!("participant {i} needs organisation and name"),
        )?;
        ensure(
            !list[..i].contains(p),
            C::DuplicateParticipant,
            format!("participant {p} twice"),
        )?;
    }
    Ok(())
}

fn mark(ctx: &Ctx, by: &Party, answer: GateAnswer) -> AnswerMark {
    AnswerMark {
        record: ctx.r.id,
        by: by.clone(),
        answer,
        terms_version: ctx.c.terms_version,
        content: ctx.c.terms.clone(),
        content_changes: ctx.c.content_changes,
        at: ctx.now,
    }
}

fn gate_mut<'a>(next: &'a mut Commitment, record: &RecordId) -> &'a mut OpenCondition {
    next.conditions
        .iter_mut()
        .find(|oc| oc.record == *record)
        .expect("resolved against an open condition")
}

fn standing_of(ctx: &Ctx, oc: &OpenCondition, who: &Party) -> Option<Participation> {
    participation(ctx.c, oc, ctx.now)
        .into_iter()
        .find(|(p, _)| p == who)
        .map(|(_, s)| s)
}

/// A participant's answer must come while its request is open.
fn check_turn(ctx: &Ctx, oc: &OpenCondition, who: &Party) -> Result<(), Rejection> {
    match standing_of(ctx, oc, who) {
        Some(Participation::Open) => Ok(()),
        Some(Participation::NotYetOpen) => reject(
            C::NotYourTurn,
            "sequential: the previous participant has not accepted",
        ),
        Some(Participation::TimedOut) => reject(C::DeadlinePassed, "the gate timed out"),
        Some(_) => reject(C::AlreadyAnswered, "this participant's answer still counts"),
        None => reject(C::WrongRole, format!("{who} is not a participant")),
    }
}

/// gate_decision: a participant's answer, or the Work service party's obsolete closing.
pub(crate) fn decide(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::GateDecision {
        answer,
        content_digest,
        participant,
        ..
    } = &ctx.r.op
    else {
        unreachable!()
    };
    let oc = ctx.condition.expect("resolved against an open condition");
    ensure(
        !oc.is_precondition(),
        C::InvalidState,
        "a precondition closes with satisfy_condition or withdraw_condition",
    )?;
    match answer {
        GateAnswer::Unspecified => return reject(C::MissingField, "gate_decision needs an answer"),
        GateAnswer::Unknown(n) => return reject(C::Malformed, format!("gate answer {n}")),
        _ => {}
    }
    let service = crate::service::is_service_party(ctx.c, ctx.access, &ctx.r.author);
    if *answer == GateAnswer::Obsolete {
        ensure(
            service,
            C::WrongRole,
            "only the Work service party closes a participant request as obsolete",
        )?;
        let Some(p) = participant else {
            return reject(C::MissingField, "an obsolete closing names the participant");
        };
        ensure(
            status(ctx.c, oc, ctx.now) != GateStatus::Waiting,
            C::NotDue,
            "the gate is not decided",
        )?;
        ensure(
            standing_of(ctx, oc, p) == Some(Participation::Open),
            C::AlreadyAnswered,
            format!("{p} has no open request"),
        )?;
        gate_mut(next, &oc.record)
            .answers
            .push(mark(ctx, p, GateAnswer::Obsolete));
        return Ok(());
    }
    ensure(
        !service || oc.condition.participant_list().contains(&ctx.r.author),
        C::WrongRole,
        "the Work service party only closes participant requests as obsolete",
    )?;
    let Some(digest) = content_digest else {
        return reject(
            C::MissingDigest,
            "gate_decision names the terms version it answers",
        );
    };
    ensure(
        *digest == ctx.c.terms_version,
        C::StaleVersion,
        "the answer is for another version of the content",
    )?;
    check_turn(ctx, oc, &ctx.r.author)?;
    gate_mut(next, &oc.record)
        .answers
        .push(mark(ctx, &ctx.r.author, *answer));
    Ok(())
}

/// satisfy_condition of a Condition or gate that is not a precondition: an accept by the
/// addressee, bound to the content as it is.
pub(crate) fn satisfy(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let oc = ctx.condition.expect("resolved against an open condition");
    check_turn(ctx, oc, &ctx.r.author)?;
    gate_mut(next, &oc.record)
        .answers
        .push(mark(ctx, &ctx.r.author, GateAnswer::Accept));
    Ok(())
}

/// accept / reject of the statement also answer the open delivery-acceptance gates the author
/// participates in (seed 000: "A gate closes with gate_decision, or with accept or reject for
/// delivery acceptance").
pub(crate) fn delivery_answer(ctx: &Ctx, next: &mut Commitment, answer: GateAnswer) {
    let gates: Vec<RecordId> = ctx
        .c
        .conditions
        .iter()
        .filter(|oc| oc.condition.kind == GateKind::DeliveryAcceptance)
        .filter(|oc| standing_of(ctx, oc, &ctx.r.author) == Some(Participation::Open))
        .map(|oc| oc.record)
        .collect();
    for g in gates {
        gate_mut(next, &g)
            .answers
            .push(mark(ctx, &ctx.r.author, answer));
    }
}

/// amend's new participant sets (the only way they change).
pub(crate) fn amend_participants(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::Amend { participants, .. } = &ctx.r.op else {
        unreachable!()
    };
    for gp in participants {
        let Some(oc) = ctx.c.conditions.iter().find(|oc| oc.record == gp.gate) else {
            return reject(C::NoOpenCondition, "amend names a gate that is not open");
        };
        ensure(
            !oc.is_precondition(),
            C::InvalidState,
            "a precondition has no participants",
        )?;
        ensure(
            !gp.participants.is_empty(),
            C::MissingField,
            "a gate needs participants",
        )?;
        check_participants(&gp.participants)?;
        let agg = oc.condition.aggregation;
        ensure(
            agg.rule != AggregationRule::KOfN || agg.k as usize <= gp.participants.len(),
            C::InvalidAggregation,
            "K of N needs K <= N",
        )?;
        gate_mut(next, &gp.gate).condition.participants = gp.participants.clone();
    }
    Ok(())
}

/// The obsolete closings the Work service party must write: for every decided gate, one per
/// participant whose request is still open; basis: the gate and the answers that decided it.
pub(crate) fn due_closings(c: &Commitment, now: i64) -> Vec<(Vec<RecordId>, Party)> {
    let mut out = Vec::new();
    for oc in c.conditions.iter().filter(|oc| !oc.is_precondition()) {
        if status(c, oc, now) == GateStatus::Waiting {
            continue;
        }
        let mut basis = vec![oc.record];
        basis.extend(
            oc.answers
                .iter()
                .filter(|a| answer_valid(c, a) && a.answer != GateAnswer::Obsolete)
                .map(|a| a.record),
        );
        for (p, s) in participation(c, oc, now) {
            if s == Participation::Open {
                out.push((basis.clone(), p));
            }
        }
    }
    out
}
