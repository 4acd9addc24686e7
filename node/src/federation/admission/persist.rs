//! Phase 5: receipts, and everything kept about the envelope — each record's decision,
//! quarantined records, the envelope's answer (given again to a duplicate) and the peer's
//! largest checkpoint — in one synced write to the decisions store.

use super::declare::Declared;
use crate::federation::FedContext;
use crate::federation::codes::Decision;
use crate::federation::decisions::{Entry, EnvelopeEntry};
use crate::federation::declaration::admission_receipt;
use crate::federation::error::FedError;
use crate::federation::logproof;
use crate::federation::peers::Peer;
use crate::federation::receipts;
use accord_proto::pb::federation::v1::{DeliverResponse, Receipt, ReceiptKind, Signed};
use accord_proto::signing::RecordId;
use prost::Message;

/// What the earlier phases established about one envelope.
pub(super) struct Admitted<'a> {
    pub peer: &'a Peer,
    pub env_signed: &'a Signed,
    pub env_id: RecordId,
    /// Per envelope position: the original receipt of a record decided before.
    pub receipts: Vec<Option<Signed>>,
    /// (position, earlier position of the same record).
    pub same_as: Vec<(usize, usize)>,
    pub declared: Vec<Declared>,
    pub log: &'a logproof::Verified,
    pub now: i64,
}

/// Keeps the envelope's decisions and answers it.
pub(super) async fn envelope(
    cx: &FedContext,
    a: Admitted<'_>,
) -> Result<DeliverResponse, FedError> {
    let fed = &cx.federation;
    let peer = a.peer.name();
    let issued = cx.clock.now_ms();
    let mut batch = fed.decisions.batch();
    let mut quarantined = Vec::new();
    let mut quarantined_commitments = std::collections::BTreeSet::new();
    // Every receipt of the answer — the envelope's first, then each record decided now — is
    // signed at once (issue 14): one signature over the batch's Merkle root, not one per record.
    let mut unsigned = Vec::with_capacity(a.declared.len() + 1);
    unsigned.push(Receipt {
        kind: ReceiptKind::EnvelopeRecorded as i32,
        receiver: cx.name().to_string(),
        sender: peer.to_string(),
        envelope_id: a.env_id.to_vec().into(),
        issued_at_unix_ms: issued,
        ..Default::default()
    });
    let mut entries = Vec::with_capacity(a.declared.len());
    for Declared {
        decided: d,
        admission_id,
        appended: r,
    } in a.declared
    {
        let e = Entry {
            peer: peer.to_string(),
            envelope_id: a.env_id,
            decision: d.decision,
            admission_id,
            admission_seq: r.sequence,
            commitment: d.commitment,
            decided_at: a.now,
            first_receipt: Vec::new(),
            note: String::new(),
        };
        unsigned.push(admission_receipt(cx.name(), &a.env_id, &d.id, &e, issued));
        cx.metrics.admission(&e.decision);
        if e.decision == Decision::Admitted {
            tracing::debug!(peer, record_id = %hex::encode(d.id), decision = %e.decision, admission_seq = r.sequence, "federation: admission");
        } else {
            tracing::info!(peer, record_id = %hex::encode(d.id), decision = %e.decision, admission_seq = r.sequence, "federation: admission");
        }
        if let Some((c, missing, code)) = &d.quarantine {
            quarantined.push(c.id);
            quarantined_commitments.insert(c.record.commitment_id.clone());
            fed.quarantine.put(
                &mut batch,
                c,
                peer,
                &a.env_id,
                &admission_id,
                missing,
                code,
                a.now,
            )?;
        }
        entries.push((d.idx, d.id, e));
    }
    let mut signed =
        receipts::sign_batch(&cx.signer, cx.name(), peer, issued, unsigned).into_iter();
    let env_receipt = signed
        .next()
        .ok_or_else(|| crate::error::Error::Internal("no envelope receipt".into()))?;
    let mut receipts_out = a.receipts;
    for ((idx, id, mut e), receipt) in entries.into_iter().zip(signed) {
        e.first_receipt = receipt.encode_to_vec();
        fed.decisions.put_entry(&mut batch, &id, &e)?;
        receipts_out[idx] = Some(receipt);
    }
    for (i, j) in a.same_as {
        receipts_out[i] = receipts_out[j].clone();
    }
    let mut all = Vec::with_capacity(receipts_out.len() + 1);
    all.push(env_receipt);
    all.extend(receipts_out.into_iter().flatten());
    let response = DeliverResponse {
        receipts: all,
        sequenced: true,
    };
    let kept = EnvelopeEntry {
        peer: peer.to_string(),
        received_at: a.now,
        envelope: a.env_signed.encode_to_vec(),
        response: response.encode_to_vec(),
    };
    fed.decisions.put_envelope(&mut batch, &a.env_id, &kept)?;
    a.log.keep(&mut batch, cx, peer)?;
    fed.decisions.write(batch).await?;
    // A basis may have entered the ledger (from this envelope, another peer or a local client)
    // after its waiters were checked and before they were written: look at them once now.
    fed.quarantine.wake(quarantined);
    // A record just quarantined may close a chain of waits among the records of its commitment
    // already quarantined (one waiting for a basis that waits for an older one): the older ones
    // are looked at again, and the one that starts the chain is released (found by the
    // deterministic simulation: seeds 32, 43, 90).
    for commitment in &quarantined_commitments {
        fed.quarantine.wake(
            fed.decisions
                .quarantined_in(commitment)?
                .into_iter()
                .map(|(_, id)| id),
        );
    }
    tracing::debug!(peer, envelope = %hex::encode(a.env_id), "envelope recorded");
    Ok(response)
}
