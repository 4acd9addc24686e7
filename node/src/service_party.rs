//! The Work service party (seed 000, "Records written by the Work service"): on each clock tick it
//! asks the kernel what is due (`due_work`: expire, implicit accept, resume, unclaim), and writes
//! each as a record authored by `<org>/work-service`, signed with the node key, resting on its
//! prior declaration in `basis`. The records go through the same ledger path as any other, so the
//! kernel checks them again and they replay like any other.

use crate::node::Node;
use crate::projection::WORK_SERVICE;
use accord_kernel as k;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn to_pb(node: &Node, a: &k::ServiceAction, now: i64) -> pb::Record {
    let op = match &a.op {
        k::Operation::Expire => Op::Expire(pb::Expire {}),
        k::Operation::Accept {
            evidence_ref,
            implicit,
            step_up,
        } => Op::Accept(pb::Accept {
            evidence_ref: evidence_ref.clone(),
            implicit: *implicit,
            step_up: *step_up,
        }),
        k::Operation::Resume { event } => Op::Resume(pb::Resume {
            event: event.clone(),
        }),
        k::Operation::Unclaim { reason } => Op::Unclaim(pb::Unclaim {
            reason: reason.clone(),
        }),
        other => {
            tracing::error!(op = other.wire_name(), "unexpected Work service operation");
            Op::Notice(pb::Notice::default())
        }
    };
    pb::Record {
        author: Some(pb::PartyRef {
            organisation: node.name().to_string(),
            name: WORK_SERVICE.to_string(),
        }),
        declared_at_unix_ms: now,
        commitment_id: a.commitment.clone(),
        basis: a.basis.iter().map(|b| b.to_vec().into()).collect(),
        items: a.items.clone(),
        nonce: Default::default(),
        operation: Some(op),
    }
}

/// Writes what is due at `now`; returns how many records were written.
pub async fn tick(node: &Arc<Node>, now: i64) -> usize {
    let actions: Vec<k::ServiceAction> = match node.projection.read() {
        Ok(p) => p
            .open_ids()
            .filter_map(|id| p.get(id))
            .flat_map(|c| k::due_work(c, now))
            .collect(),
        Err(_) => return 0,
    };
    let mut written = 0;
    for a in actions {
        let record = to_pb(node, &a, now);
        let signed = signing::sign_record(&node.signer, &record);
        let id = signing::record_id(RECORD_PAYLOAD_TYPE, &signed.payload);
        let input = a
            .clone()
            .into_record(id, &k::Party::new(node.name(), WORK_SERVICE));
        match node
            .ledger
            .append(crate::ledger::Append { id, signed, input })
            .await
        {
            Ok(r) => {
                written += 1;
                tracing::info!(commitment = %a.commitment, kind = ?a.kind, sequence = r.sequence, applied = r.outcome.applied, "work service record");
            }
            Err(e) => tracing::warn!(error = %e, "work service record not written"),
        }
    }
    written
}

/// Ticks every `clock.tick_ms` until `shutdown`.
pub async fn run_clock(node: Arc<Node>, shutdown: CancellationToken) {
    let mut t = tokio::time::interval(Duration::from_millis(node.config.clock.tick_ms));
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = t.tick() => { tick(&node, node.clock.now_ms()).await; }
        }
    }
}
