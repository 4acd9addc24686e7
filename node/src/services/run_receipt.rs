//! The execution receipt in wire form (issue 12 item 9): the kernel's index of references
//! ([`kr::receipt`]) plus, for every referenced record, the signed record as logged, its leaf
//! index and its inclusion proof against the node's latest witnessed checkpoint that covers
//! them all (or, with none, the latest signed one, signed now if needed), whose note text the
//! receipt carries — so a reviewer checks it offline (`accordctl run verify-receipt`); and the
//! node's signature over the whole receipt, which binds what no record proves.

use crate::convert::run::state_to_wire;
use crate::error::Error;
use crate::node::Node;
use accord_kernel::run as kr;
use accord_proto::pb::run::v1 as pb;
use std::sync::Arc;

fn ids(list: &[[u8; 32]]) -> Vec<prost::bytes::Bytes> {
    list.iter().map(|i| i.to_vec().into()).collect()
}

/// The wire receipt of `r`, with proofs.
pub async fn build(node: &Arc<Node>, r: &kr::Receipt) -> Result<pb::RunReceipt, Error> {
    let refs = r.references();
    let n = node.clone();
    let entries = tokio::task::spawn_blocking(move || {
        let store = n.ledger.store();
        refs.iter()
            .map(|id| {
                let seq = store
                    .seq_of(id)?
                    .ok_or_else(|| Error::Internal("referenced record not in the ledger".into()))?;
                let e = store
                    .get(seq)?
                    .ok_or_else(|| Error::Internal("ledger entry missing".into()))?;
                Ok((*id, seq, e.record.unwrap_or_default()))
            })
            .collect::<Result<Vec<_>, Error>>()
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))??;
    let size = entries.iter().map(|(_, s, _)| s + 1).max().unwrap_or(0);
    let cp = match node.log.witnessed().filter(|c| c.size >= size) {
        Some(c) => c,
        None => crate::log::covering(&node.fed.checkpoints, size).await?,
    };
    let n = node.clone();
    let cp_size = cp.size;
    let records = tokio::task::spawn_blocking(move || {
        entries
            .into_iter()
            .map(|(id, seq, signed)| {
                let proof = crate::log::inclusion_proof(n.ledger.store(), seq, cp_size)?;
                Ok(pb::ReceiptRecord {
                    record_id: id.to_vec().into(),
                    sequence: seq,
                    record: Some(signed),
                    inclusion_proof: proof.into_iter().map(|h| h.to_vec().into()).collect(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))??;
    let mut receipt = pb::RunReceipt {
        run: r.run.clone(),
        run_record: r.run_record.to_vec().into(),
        commitment_id: r.commitment.clone().unwrap_or_default(),
        trigger: r.trigger.clone().unwrap_or_default(),
        initiator: r
            .initiator
            .as_ref()
            .map(|p| format!("{}/{}", p.organisation, p.name))
            .unwrap_or_default(),
        parent: r.parent.clone().unwrap_or_default(),
        created_at_unix_ms: r.created_at,
        started_at_unix_ms: r.started_at.unwrap_or(0),
        ended_at_unix_ms: r.ended_at.unwrap_or(0),
        state: state_to_wire(r.state),
        terminal: r.terminal,
        transitions: ids(&r.transitions),
        actions: ids(&r.actions),
        proposals: ids(&r.proposals),
        decisions: ids(&r.decisions),
        evidence: ids(&r.evidence),
        outputs: ids(&r.outputs),
        output_present: r.output_present,
        audit_events: ids(&r.audit_events),
        gated_actions: r
            .gated_actions
            .iter()
            .map(|g| pb::GatedAction {
                action: g.action.to_vec().into(),
                approvals: ids(&g.approvals),
            })
            .collect(),
        child_runs: r.child_runs as u64,
        persistence_mode: r.persistence_mode.clone().unwrap_or_default(),
        node: node.name().to_string(),
        checkpoint: cp.note,
        records,
        node_signature: None,
    };
    // The fields no record proves (times, child runs, node) are bound by the node's signature
    // over the whole receipt (issue 29, item 2; `accord_proto::run_receipt`).
    accord_proto::run_receipt::sign(&node.signer, &mut receipt);
    Ok(receipt)
}
