//! The one place where wire types become kernel types (`accord.record.v1.Record` →
//! [`accord_kernel::Record`]). Every failure names the offending field, and becomes
//! InvalidArgument: nothing is written for a record that does not convert.
//!
//! Conventions (agreed with the kernel): an absent or empty `PartyRef` is `None`; a `0` time or
//! length is `None`; a missing `Terms` is `Terms::default()`; an empty id is `None` and any other
//! length than 32 bytes is bad input. Enum numbers are passed through (`from_wire`), so the
//! kernel tells a missing reason code from an unknown one and rejects with its own code.

use crate::error::Error;
use accord_kernel as k;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;

type R<T> = Result<T, Error>;

fn party(p: &Option<pb::PartyRef>) -> Option<k::Party> {
    p.as_ref()
        .filter(|p| !(p.organisation.is_empty() && p.name.is_empty()))
        .map(|p| k::Party::new(&p.organisation, &p.name))
}

fn time(t: i64) -> Option<i64> {
    (t != 0).then_some(t)
}

/// Converts an optional 32-byte id field.
pub fn opt_id(field: &str, b: &[u8]) -> R<Option<k::RecordId>> {
    if b.is_empty() {
        return Ok(None);
    }
    b.try_into()
        .map(Some)
        .map_err(|_| Error::invalid(field, format!("must be 32 bytes, got {}", b.len())))
}

fn terms(t: &Option<pb::Terms>) -> k::Terms {
    let Some(t) = t else {
        return k::Terms::default();
    };
    k::Terms {
        title: t.title.clone(),
        description: t.description.clone(),
        due: time(t.due_unix_ms),
        items: t
            .items
            .iter()
            .map(|i| k::LineItem {
                id: i.id.clone(),
                description: i.description.clone(),
            })
            .collect(),
        budget: t.budget.as_ref().map(|b| k::Budget {
            amount: b.amount,
            unit: b.unit.clone(),
        }),
        parameters: t
            .parameters
            .iter()
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect(),
    }
}

fn queue(q: &pb::Queue) -> k::Queue {
    k::Queue {
        name: q.name.clone(),
        owner: party(&q.owner),
        candidates: q
            .candidates
            .iter()
            .filter_map(|c| party(&Some(c.clone())))
            .collect(),
        lease_ms: time(q.lease_ms),
        return_to_pool_on_lease_end: q.return_to_pool_on_lease_end,
        start_deadline: time(q.start_deadline_unix_ms),
        distribution: k::Distribution::from_wire(q.distribution),
    }
}

fn condition(c: &Option<pb::Condition>) -> k::Condition {
    c.as_ref()
        .map(|c| k::Condition {
            description: c.description.clone(),
            addressed_to: party(&c.addressed_to),
            kind: k::GateKind::from_wire(c.kind),
            deadline: time(c.deadline_unix_ms),
            participants: parties(&c.participants),
            aggregation: c
                .aggregation
                .map(|a| k::Aggregation {
                    rule: k::AggregationRule::from_wire(a.rule),
                    k: a.k,
                    percent: a.percent,
                    any_rejection_rejects: a.any_rejection_rejects,
                })
                .unwrap_or_default(),
        })
        .unwrap_or_default()
}

/// A list of parties; an empty entry stays an empty party (the kernel rejects it, naming it).
fn parties(list: &[pb::PartyRef]) -> Vec<k::Party> {
    list.iter()
        .map(|p| k::Party::new(&p.organisation, &p.name))
        .collect()
}

#[cfg(test)]
#[path = "convert_issue11_tests.rs"]
mod issue11_tests;

#[path = "convert_envelope.rs"]
pub mod envelope;
#[path = "convert_run.rs"]
pub mod run;

/// Converts a decoded record (whose signature the caller has verified) into the kernel's form,
/// after checking every identifier in it against [`crate::ident`] ([`check_idents`]).
pub fn record_from_pb(id: k::RecordId, r: &pb::Record) -> R<k::Record> {
    check_idents(r)?;
    record_from_pb_recorded(id, r)
}

/// Converts a record that is already in the ledger (replay): no identifier checks, so records
/// recorded before the bounds existed still replay.
pub fn record_from_pb_recorded(id: k::RecordId, r: &pb::Record) -> R<k::Record> {
    let author =
        party(&r.author).ok_or_else(|| Error::invalid("record.payload.author", "required"))?;
    if author.organisation.is_empty() || author.name.is_empty() {
        return Err(Error::invalid(
            "record.payload.author",
            "organisation and name are required",
        ));
    }
    // A run record executes no commitment when its commitment_id is empty (seed 002).
    let is_run = r.operation.as_ref().and_then(run::run_id).is_some();
    if r.commitment_id.is_empty() && !is_run {
        return Err(Error::invalid("record.payload.commitment_id", "required"));
    }
    let basis = r
        .basis
        .iter()
        .enumerate()
        .map(|(i, b)| {
            b.as_ref().try_into().map_err(|_| {
                Error::invalid(format!("record.payload.basis[{i}]"), "must be 32 bytes")
            })
        })
        .collect::<R<Vec<k::RecordId>>>()?;
    let mut op = operation(
        r.operation
            .as_ref()
            .ok_or_else(|| Error::invalid("record.payload.operation", "required"))?,
    )?;
    // A home's decision carries the time the home applied the record (issue 26, item 2).
    if let k::Operation::Admission { at, .. } = &mut op {
        *at = r.declared_at_unix_ms;
    }
    Ok(k::Record {
        id,
        author,
        commitment: r.commitment_id.clone(),
        basis,
        items: r.items.clone(),
        op,
    })
}

/// A field's name, formatted only when a check fails.
type Field<'a> = &'a dyn Fn() -> String;

fn check_party(field: Field<'_>, p: Option<&pb::PartyRef>) -> R<()> {
    let Some(p) = p else { return Ok(()) };
    if p.organisation.is_empty() && p.name.is_empty() {
        return Ok(());
    }
    crate::ident::name(&p.organisation)
        .map_err(|r| Error::invalid(format!("{}.organisation", field()), r))?;
    crate::ident::name(&p.name).map_err(|r| Error::invalid(format!("{}.name", field()), r))
}

/// A gate's addressee and participants (issue 11's gates may name other organisations' parties).
fn check_condition(field: Field<'_>, c: &Option<pb::Condition>) -> R<()> {
    let Some(c) = c else { return Ok(()) };
    check_party(
        &|| format!("{}.addressed_to", field()),
        c.addressed_to.as_ref(),
    )?;
    check_parties(&|| format!("{}.participants", field()), &c.participants)
}

fn check_parties(field: Field<'_>, list: &[pb::PartyRef]) -> R<()> {
    for (i, p) in list.iter().enumerate() {
        check_party(&|| format!("{}[{i}]", field()), Some(p))?;
    }
    Ok(())
}

fn check_id(field: Field<'_>, s: &str) -> R<()> {
    crate::ident::id(s).map_err(|r| Error::invalid(field(), r))
}

fn check_queue(field: Field<'_>, q: &Option<pb::Queue>) -> R<()> {
    let Some(q) = q else { return Ok(()) };
    crate::ident::name(&q.name).map_err(|r| Error::invalid(format!("{}.name", field()), r))?;
    check_party(&|| format!("{}.owner", field()), q.owner.as_ref())?;
    for (i, c) in q.candidates.iter().enumerate() {
        check_party(&|| format!("{}.candidates[{i}]", field()), Some(c))?;
    }
    Ok(())
}

fn check_terms(field: Field<'_>, t: &Option<pb::Terms>) -> R<()> {
    for (i, item) in t.iter().flat_map(|t| t.items.iter()).enumerate() {
        check_id(&|| format!("{}.items[{i}].id", field()), &item.id)?;
    }
    Ok(())
}

/// Checks every identifier of a record (issue 8, "Input bounds"): the author, the commitment
/// id, item ids, the parties and queues its operation names, and a few ids inside operations.
/// InvalidArgument names the field; the message quotes at most a short prefix of the value.
pub fn check_idents(r: &pb::Record) -> R<()> {
    const P: &str = "record.payload";
    // Field names are formatted only for an error (issue 14: formatting every name of every
    // record took an eighth of the request path's CPU).
    check_party(&|| format!("{P}.author"), r.author.as_ref())?;
    if !r.commitment_id.is_empty() {
        check_id(&|| format!("{P}.commitment_id"), &r.commitment_id)?;
    }
    for (i, item) in r.items.iter().enumerate() {
        check_id(&|| format!("{P}.items[{i}]"), item)?;
    }
    let Some(op) = &r.operation else {
        return Ok(());
    };
    run::check_bounds(op)?;
    let f = |s: &'static str| move || format!("{P}.operation.{s}");
    match op {
        Op::Request(q) => {
            check_party(&f("request.obligee"), q.obligee.as_ref())?;
            check_party(&f("request.candidate"), q.candidate.as_ref())?;
            check_party(&f("request.acceptor"), q.acceptor.as_ref())?;
            check_party(&f("request.accountable"), q.accountable.as_ref())?;
            check_party(&f("request.principal"), q.principal.as_ref())?;
            check_queue(&f("request.queue"), &q.queue)?;
            check_terms(&f("request.terms"), &q.terms)?;
        }
        Op::PromiseConditional(p) => {
            check_condition(&f("promise_conditional.condition"), &p.condition)?;
        }
        Op::OpenCondition(o) => check_condition(&f("open_condition.condition"), &o.condition)?,
        Op::Counter(c) => check_terms(&f("counter.terms"), &c.terms)?,
        Op::Amend(a) => {
            check_terms(&f("amend.terms"), &a.terms)?;
            for (i, g) in a.participants.iter().enumerate() {
                check_parties(
                    &|| format!("{P}.operation.amend.participants[{i}].participants"),
                    &g.participants,
                )?;
            }
        }
        Op::GateDecision(g) => {
            check_party(&f("gate_decision.participant"), g.participant.as_ref())?
        }
        Op::ControlLease(c) => check_party(&f("control_lease.holder"), c.holder.as_ref())?,
        Op::Delegate(d) => {
            if let Some(pb::delegate::Step::Offer(o)) = &d.step {
                check_party(&f("delegate.offer.to"), o.to.as_ref())?;
            }
        }
        Op::Assign(d) => {
            if let Some(pb::assign::Step::Offer(o)) = &d.step {
                check_party(&f("assign.offer.to"), o.to.as_ref())?;
            }
        }
        Op::Forward(x) => check_queue(&f("forward.to"), &x.to)?,
        Op::Nominate(n) => check_party(&f("nominate.candidate"), n.candidate.as_ref())?,
        Op::Offer(o) => check_party(&f("offer.to"), o.to.as_ref())?,
        Op::Reassign(x) => check_party(&f("reassign.to"), x.to.as_ref())?,
        Op::Allow(a) if !a.reopening_commitment_id.is_empty() => {
            check_id(
                &f("allow.reopening_commitment_id"),
                &a.reopening_commitment_id,
            )?;
        }
        Op::Admission(a) if !a.peer.is_empty() => {
            crate::ident::name(&a.peer).map_err(|r| Error::invalid(f("admission.peer")(), r))?;
        }
        _ => {}
    }
    Ok(())
}

fn operation(op: &Op) -> R<k::Operation> {
    use k::Operation as O;
    const F: &str = "record.payload.operation";
    Ok(match op {
        Op::Request(q) => O::Request(Box::new(k::Request {
            obligee: party(&q.obligee),
            candidate: party(&q.candidate),
            queue: q.queue.as_ref().map(queue),
            acceptor: party(&q.acceptor),
            accountable: party(&q.accountable),
            principal: party(&q.principal),
            terms: terms(&q.terms),
            valid_until: time(q.valid_until_unix_ms),
            acceptance: q
                .acceptance
                .map(|a| k::AcceptanceCriterion {
                    requires_evidence: a.requires_evidence,
                    four_eyes: a.four_eyes,
                    step_up: a.step_up,
                })
                .unwrap_or_default(),
            implicit_acceptance_window_ms: q.implicit_acceptance.and_then(|i| time(i.window_ms)),
        })),
        Op::Promise(_) => O::Promise,
        Op::PromiseConditional(p) => O::PromiseConditional {
            condition: condition(&p.condition),
            deadline: time(p.deadline_unix_ms),
        },
        Op::Decline(d) => O::Decline {
            reason: k::DeclineReason::from_wire(d.reason),
            text: d.text.clone(),
        },
        Op::Counter(c) => O::Counter {
            terms: c.terms.as_ref().map(|_| terms(&c.terms)),
        },
        Op::AcceptCounter(a) => O::AcceptCounter {
            counter_digest: opt_id(
                &format!("{F}.accept_counter.counter_digest"),
                &a.counter_digest,
            )?,
        },
        Op::State(s) => O::State {
            fulfillment_refs: s.fulfillment_refs.clone(),
        },
        Op::Accept(a) => O::Accept {
            evidence_ref: a.evidence_ref.clone(),
            implicit: a.implicit,
            step_up: a.step_up,
        },
        Op::Reject(r) => O::Reject {
            reason: r.reason.clone(),
        },
        Op::Cancel(c) => O::Cancel {
            reason: k::CancelReason::from_wire(c.reason),
            text: c.text.clone(),
        },
        Op::Release(r) => O::Release {
            reason: r.reason.clone(),
        },
        Op::Delegate(d) => match &d.step {
            Some(pb::delegate::Step::Offer(o)) => O::DelegateOffer {
                to: party(&o.to),
                handover_note: o.handover_note.clone(),
            },
            Some(pb::delegate::Step::Acceptance(a)) => O::DelegateAcceptance {
                offer_id: opt_id(&format!("{F}.delegate.acceptance.offer_id"), &a.offer_id)?,
            },
            None => {
                return Err(Error::invalid(
                    format!("{F}.delegate.step"),
                    "offer or acceptance required",
                ));
            }
        },
        Op::Assign(d) => match &d.step {
            Some(pb::assign::Step::Offer(o)) => O::AssignOffer { to: party(&o.to) },
            Some(pb::assign::Step::Acceptance(a)) => O::AssignAcceptance {
                offer_id: opt_id(&format!("{F}.assign.acceptance.offer_id"), &a.offer_id)?,
            },
            None => {
                return Err(Error::invalid(
                    format!("{F}.assign.step"),
                    "offer or acceptance required",
                ));
            }
        },
        Op::Dispute(d) => O::Dispute {
            disputed_record: opt_id(&format!("{F}.dispute.disputed_record"), &d.disputed_record)?,
            reason: d.reason.clone(),
        },
        Op::Defer(d) => O::Defer {
            reason: d.reason.clone(),
            return_at: time(d.return_unix_ms),
            return_event: d.return_event.clone(),
        },
        Op::Resume(r) => O::Resume {
            event: r.event.clone(),
        },
        Op::RevokeRequest(r) => O::RevokeRequest {
            reason: r.reason.clone(),
        },
        Op::RevokePromise(r) => O::RevokePromise {
            reason: r.reason.clone(),
        },
        Op::RevokeStatement(r) => O::RevokeStatement {
            reason: r.reason.clone(),
        },
        Op::RevokeAcceptance(r) => O::RevokeAcceptance {
            reason: r.reason.clone(),
        },
        Op::Allow(a) => O::Allow {
            reason: a.reason.clone(),
            reopening_commitment_id: a.reopening_commitment_id.clone(),
        },
        Op::Refuse(r) => O::Refuse {
            reason: r.reason.clone(),
        },
        Op::Amend(a) => O::Amend {
            supersedes: opt_id(&format!("{F}.amend.supersedes"), &a.supersedes)?,
            terms: a.terms.as_ref().map(|_| terms(&a.terms)),
            participants: a
                .participants
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let field = format!("{F}.amend.participants[{i}].gate");
                    Ok(k::GateParticipants {
                        gate: opt_id(&field, &g.gate)?
                            .ok_or_else(|| Error::invalid(field, "required"))?,
                        participants: parties(&g.participants),
                    })
                })
                .collect::<R<Vec<_>>>()?,
        },
        Op::Notice(n) => O::Notice {
            notice_type: k::NoticeType::from_wire(n.notice_type),
            text: n.text.clone(),
        },
        Op::DeclareObsolete(d) => O::DeclareObsolete {
            parent_ref: d.parent_ref.clone(),
        },
        Op::Expire(_) => O::Expire,
        Op::AdministrativeClose(a) => O::AdministrativeClose {
            reason: a.reason.clone(),
        },
        Op::Claim(_) => O::Claim,
        Op::Unclaim(u) => O::Unclaim {
            reason: u.reason.clone(),
        },
        Op::Forward(f) => O::Forward {
            to: f.to.as_ref().map(queue),
        },
        Op::Nominate(n) => O::Nominate {
            candidate: party(&n.candidate),
        },
        Op::Offer(o) => O::Offer { to: party(&o.to) },
        Op::Reassign(r) => O::Reassign { to: party(&r.to) },
        Op::RenewLease(r) => O::RenewLease {
            lease_ms: time(r.lease_ms),
        },
        Op::OpenCondition(o) => O::OpenCondition {
            condition: condition(&o.condition),
        },
        Op::WithdrawCondition(_) => O::WithdrawCondition,
        Op::SatisfyCondition(_) => O::SatisfyCondition,
        Op::ReportConsumption(r) => O::ReportConsumption { amount: r.amount },
        Op::Admission(a) => O::Admission {
            record_id: opt_id(&format!("{F}.admission.record_id"), &a.record_id)?,
            peer: a.peer.clone(),
            outcome: k::AdmissionOutcome::from_wire(a.outcome),
            code: a.code.clone(),
            closes: opt_id(&format!("{F}.admission.closes"), &a.closes)?,
            at: 0,
        },
        Op::ActedUpon(a) => O::ActedUpon {
            record_id: opt_id(&format!("{F}.acted_upon.record_id"), &a.record_id)?,
            act: a.act.clone(),
        },
        Op::GateDecision(g) => O::GateDecision {
            answer: k::GateAnswer::from_wire(g.answer),
            content_digest: opt_id(
                &format!("{F}.gate_decision.content_digest"),
                &g.content_digest,
            )?,
            participant: party(&g.participant),
            reason: g.reason.clone(),
        },
        Op::Observation(o) => {
            if o.heartbeat_interval_ms < 0 {
                return Err(Error::invalid(
                    format!("{F}.observation.heartbeat_interval_ms"),
                    "must not be negative",
                ));
            }
            O::Observation(Box::new(k::Observation {
                execution: k::ExecutionReport::from_wire(o.execution),
                control: k::ControlReport::from_wire(o.control),
                heartbeat_interval_ms: time(o.heartbeat_interval_ms),
                left_cleanly: o.left_cleanly,
                checkpoint: o.checkpoint.clone(),
                external_state: o.external_state.clone(),
            }))
        }
        Op::StopRequest(s) => O::StopRequest {
            mode: k::StopMode::from_wire(s.mode),
            reason: s.reason.clone(),
        },
        Op::StopResponse(s) => O::StopResponse {
            answer: k::StopAnswer::from_wire(s.answer),
            reason: s.reason.clone(),
        },
        Op::ResumeAfterStop(r) => O::ResumeAfterStop {
            reason: r.reason.clone(),
        },
        Op::ControlLease(c) => O::ControlLease {
            holder: party(&c.holder),
            until: time(c.until_unix_ms),
        },
        Op::HandBackControl(h) => O::HandBackControl {
            handoff_note: h.handoff_note.clone(),
        },
        Op::Recheck(r) => O::Recheck {
            outcome: k::RecheckOutcome::from_wire(r.outcome),
            note: r.note.clone(),
        },
        Op::RunStart(_)
        | Op::RunTransition(_)
        | Op::RunAction(_)
        | Op::RunProposal(_)
        | Op::RunDecision(_)
        | Op::RunEvidence(_)
        | Op::RunOutput(_)
        | Op::RunAuditEvent(_) => run::operation(op)?
            .ok_or_else(|| Error::Internal("run record without run operation".into()))?,
        Op::Envelope(_) | Op::Tick(_) => envelope::operation(op)?
            .ok_or_else(|| Error::Internal("envelope record without envelope operation".into()))?,
    })
}

/// The wire form of a kernel party.
/// The ledger's record of the kernel's verdict (`LedgerEntry.outcome`): applied, or refused with
/// the rejection's code and detail. One place for every machine the writer feeds (the Work
/// projection, runs, envelopes).
pub fn outcome(verdict: Result<(), k::Rejection>) -> accord_proto::pb::work::v1::Outcome {
    match verdict {
        Ok(()) => accord_proto::pb::work::v1::Outcome {
            applied: true,
            ..Default::default()
        },
        Err(r) => accord_proto::pb::work::v1::Outcome {
            applied: false,
            rejection_code: r.code.as_str().to_string(),
            rejection_detail: r.detail,
        },
    }
}

pub fn party_to_pb(p: &k::Party) -> pb::PartyRef {
    pb::PartyRef {
        organisation: p.organisation.clone(),
        name: p.name.clone(),
    }
}
