//! Kernel view → `accord.work.v1.GetCommitmentResponse` (the read side of the edge conversion).

use crate::convert::party_to_pb;
use accord_kernel as k;
use accord_proto::pb::work::v1 as pb;
use serde::Serialize;

/// The snake_case name a kernel enum serializes to (empty if it is not a plain name).
fn snake<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn gate_to_pb(g: &k::view::GateView) -> pb::Gate {
    let cond = &g.condition;
    pb::Gate {
        record_id: g.record.to_vec().into(),
        owner: Some(party_to_pb(&g.owner)),
        description: cond.description.clone(),
        kind: cond.kind.wire_name().unwrap_or_default().to_string(),
        addressed_to: cond.addressed_to.as_ref().map(party_to_pb),
        participants: g
            .participants
            .iter()
            .map(|(p, st)| pb::GateParticipant {
                party: Some(party_to_pb(p)),
                status: snake(st),
            })
            .collect(),
        aggregation: cond
            .aggregation
            .rule
            .wire_name()
            .unwrap_or("all")
            .to_string(),
        k: cond.aggregation.k,
        percent: cond.aggregation.percent,
        any_rejection_rejects: cond.aggregation.any_rejection_rejects,
        deadline_unix_ms: cond.deadline.unwrap_or(0),
        precondition_items: g.precondition_items.clone(),
        status: snake(&g.status),
        answers: g
            .answers
            .iter()
            .map(|a| pb::GateAnswer {
                record_id: a.answer.record.to_vec().into(),
                by: Some(party_to_pb(&a.answer.by)),
                answer: a.answer.answer.wire_name().unwrap_or_default().to_string(),
                terms_version: a.answer.terms_version.to_vec().into(),
                at_unix_ms: a.answer.at,
                valid: a.valid,
            })
            .collect(),
    }
}

fn offer_to_pb(o: &k::commitment::HandoverOffer) -> pb::HandoverOffer {
    pb::HandoverOffer {
        record_id: o.record.to_vec().into(),
        by: Some(party_to_pb(&o.by)),
        to: Some(party_to_pb(&o.to)),
        note: o.note.clone(),
    }
}

/// The wire view of a commitment's derived state at `now` (history is added by the caller);
/// whose move names the queue owners `access` lets act (issue 29).
pub fn to_pb(c: &k::Commitment, now: i64, access: &k::Access) -> pb::GetCommitmentResponse {
    let v = k::view(c, now, access);
    let next_move: Vec<_> = v
        .whose_move
        .iter()
        .flat_map(|m| m.parties.iter().map(party_to_pb))
        .collect();
    let next_move_reason = v
        .whose_move
        .iter()
        .map(|m| m.row.wire_name())
        .collect::<Vec<_>>()
        .join(",");
    pb::GetCommitmentResponse {
        commitment_id: v.commitment.clone(),
        state: v.summary.clone(),
        items: if c.has_line_items() {
            v.items
                .iter()
                .map(|i| pb::ItemState {
                    item: i.id.clone(),
                    state: i.state.wire_name().to_string(),
                })
                .collect()
        } else {
            Vec::new()
        },
        terminal: v.terminal,
        category: v.category.wire_name().to_string(),
        flags: v.flags.iter().map(|f| f.wire_name().to_string()).collect(),
        next_move,
        next_move_reason,
        assignment: v.assignment.wire_name().to_string(),
        open_revokes: v
            .revokes
            .iter()
            .map(|rv| pb::OpenRevoke {
                record_id: rv.revoke.record.to_vec().into(),
                kind: rv.revoke.kind.wire_name().to_string(),
                asked_of: rv.asked_of.first().map(party_to_pb),
                asked_of_all: rv.asked_of.iter().map(party_to_pb).collect(),
                by: Some(party_to_pb(&rv.revoke.by)),
                reason: rv.revoke.reason.clone(),
                items: rv.revoke.items.clone(),
            })
            .collect(),
        disputes: v
            .disputes
            .iter()
            .map(|d| pb::DisputeMark {
                record_id: d.record.to_vec().into(),
                disputed_record: d.disputed.to_vec().into(),
                reason: d.reason.clone(),
            })
            .collect(),
        deferral: v.deferral.as_ref().map(|d| pb::Deferral {
            record_id: d.record.to_vec().into(),
            return_unix_ms: d.return_at.unwrap_or(0),
            return_event: d.return_event.clone().unwrap_or_default(),
        }),
        version: v.terms_version.to_vec().into(),
        obligee: Some(party_to_pb(&v.obligee)),
        // "Obligor (or candidate)" (work.proto): while an open request is addressed to one
        // party, that candidate; a pool of candidates has no single one to show.
        obligor: v
            .obligor
            .as_ref()
            .or(v.offered_to.as_ref().filter(|_| !v.terminal))
            .map(party_to_pb),
        acceptor: Some(party_to_pb(&v.acceptor)),
        history: Vec::new(),
        forward_count: v.forward_count,
        reopened_as: v
            .reopened_by
            .last()
            .map(|l| l.reopening.clone())
            .unwrap_or_default(),
        reopens: v
            .reopens
            .as_ref()
            .map(|l| l.commitment.clone())
            .unwrap_or_default(),
        execution: v.execution.wire_name().to_string(),
        control: v.control.wire_name().to_string(),
        control_holder: v.control_holder.as_ref().map(party_to_pb),
        liveness: v.liveness.wire_name().to_string(),
        gates: v.gates.iter().map(gate_to_pb).collect(),
        candidates: v.candidates.iter().map(party_to_pb).collect(),
        principal: v.principal.as_ref().map(party_to_pb),
        accountable: Some(party_to_pb(&v.accountable)),
        budget: v.budget.as_ref().map(|b| pb::Budget {
            amount: b.amount,
            unit: b.unit.clone(),
        }),
        consumed: v.consumed,
        budget_exhausted: v.budget_exhausted,
        lease_until_unix_ms: v.lease_until.unwrap_or(0),
        counter_version: v
            .counter_version
            .map(|r| r.to_vec().into())
            .unwrap_or_default(),
        pending_delegate: v.pending_delegate.as_ref().map(offer_to_pb),
        pending_assign: v.pending_assign.as_ref().map(offer_to_pb),
        nominees: v.nominees.iter().map(party_to_pb).collect(),
        stop: v.stop.as_ref().map(|s| pb::StopRequestState {
            record_id: s.record.to_vec().into(),
            by: Some(party_to_pb(&s.by)),
            mode: s.mode.wire_name().unwrap_or_default().to_string(),
            reason: s.reason.clone(),
            at_unix_ms: s.at,
            response: s
                .response
                .as_ref()
                .and_then(|(a, _)| a.wire_name())
                .unwrap_or_default()
                .to_string(),
            response_record_id: s
                .response
                .as_ref()
                .map(|(_, r)| r.to_vec().into())
                .unwrap_or_default(),
            confirmed_record_id: s
                .confirmed
                .as_ref()
                .map(|(r, _)| r.to_vec().into())
                .unwrap_or_default(),
            resumed_record_id: s.resumed.map(|r| r.to_vec().into()).unwrap_or_default(),
        }),
        handover: v.handover.as_ref().map(|h| pb::HandoverState {
            lease_record_id: h.lease.to_vec().into(),
            holder: Some(party_to_pb(&h.holder)),
            until_unix_ms: h.until.unwrap_or(0),
            phase: snake(&h.phase),
            handed_back_record_id: h
                .handed_back
                .as_ref()
                .map(|(r, _)| r.to_vec().into())
                .unwrap_or_default(),
            handed_back_note: h
                .handed_back
                .as_ref()
                .map(|(_, n)| n.clone())
                .unwrap_or_default(),
            last_recheck: v
                .last_recheck
                .and_then(|o| o.wire_name())
                .unwrap_or_default()
                .to_string(),
        }),
        attention_marks: v
            .attention_marks
            .iter()
            .map(|a| pb::AttentionMark {
                record_id: a.record.to_vec().into(),
                to: a.to.iter().map(party_to_pb).collect(),
                about: a.about.clone(),
                reason: a.reason.clone(),
            })
            .collect(),
        terms_version_number: v.version,
    }
}
