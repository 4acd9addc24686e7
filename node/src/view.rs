//! Kernel view → `accord.work.v1.GetCommitmentResponse` (the read side of the edge conversion).

use crate::convert::party_to_pb;
use accord_kernel as k;
use accord_proto::pb::work::v1 as pb;

/// The wire view of a commitment's derived state at `now` (history is added by the caller).
pub fn to_pb(c: &k::Commitment, now: i64) -> pb::GetCommitmentResponse {
    let v = k::view(c, now);
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
    let revoke_move = v
        .whose_move
        .iter()
        .find(|m| m.row == k::MoveRow::OpenRevokeRequest);
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
            .open_revokes
            .iter()
            .map(|r| pb::OpenRevoke {
                record_id: r.record.to_vec().into(),
                kind: r.kind.wire_name().to_string(),
                asked_of: revoke_move.and_then(|m| m.parties.first()).map(party_to_pb),
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
    }
}
