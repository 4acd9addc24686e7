//! One envelope's round trip to a peer, in three steps so the sender can keep several in flight
//! (issue 14, pipelined delivery; [`super::sender`] drives them):
//!
//! 1. [`prepare`] — load the records of the outbox items from the ledger, prove them
//!    ([`super::logproof`]) and sign the envelope with the node key (DSSE,
//!    `ENVELOPE_PAYLOAD_TYPE`);
//! 2. [`transmit`] — `Deliver` it and verify the answer: the envelope receipt must be about this
//!    envelope, each record receipt must verify with the peer's keys and be about one of its
//!    records (others are ignored and logged);
//! 3. [`acknowledge`] — store the receipts, advance each record's durability (federated →
//!    admitted, quarantined or rejected) and remove the items from the outbox, in one synced
//!    write. The sender acknowledges envelopes strictly in the order it sent them, so the outbox
//!    only ever shrinks from its head.

use super::FedContext;
use super::outbox::Item;
use super::peers::Peer;
use super::receipts;
use crate::error::Error;
use accord_proto::note::Verifier;
use accord_proto::pb::federation::v1::{DeliverRequest, Envelope, ReceiptKind, Signed};
use accord_proto::signing::{self, ENVELOPE_PAYLOAD_TYPE, RecordId};
use prost::Message;
use std::collections::HashSet;
use std::sync::atomic::Ordering;

/// Most bytes of records in one envelope.
const MAX_ENVELOPE_BYTES: usize = 4 * 1024 * 1024;

/// Why a round trip failed.
pub(super) enum Fail {
    /// The peer said ResourceExhausted: slow down.
    Exhausted(String),
    /// Anything else: back off.
    Other(String),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Other(e.to_string())
    }
}

impl Fail {
    pub(super) fn into_message(self) -> String {
        match self {
            Fail::Exhausted(m) | Fail::Other(m) => m,
        }
    }
}

pub(super) fn status_fail(s: tonic::Status) -> Fail {
    let reason = s
        .metadata()
        .get("accord-reason")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if let Some(cause) = super::handshake::classify(&s) {
        return Fail::Other(cause);
    }
    let msg = format!("{:?}: {} {}", s.code(), reason, s.message());
    if s.code() == tonic::Code::ResourceExhausted {
        Fail::Exhausted(msg)
    } else {
        Fail::Other(msg)
    }
}

pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
}

/// A signed envelope ready to send.
pub(super) struct Prepared {
    req: DeliverRequest,
    env_id: RecordId,
    /// Outbox sequences of its records, in order.
    pub seqs: Vec<u64>,
    ids: Vec<RecordId>,
    /// The size of the checkpoint proving it (the peer holds it once it answered).
    pub checkpoint_size: u64,
}

impl Prepared {
    /// The outbox sequence of its first record.
    pub fn first_sequence(&self) -> u64 {
        self.seqs.first().copied().unwrap_or(0)
    }

    /// The request (tests send it by hand).
    #[cfg(test)]
    pub fn request(&self) -> DeliverRequest {
        self.req.clone()
    }

    /// The outbox sequence after its last record.
    pub fn end_sequence(&self) -> u64 {
        self.seqs.last().map_or(0, |s| s + 1)
    }
}

/// The verified answer to a [`Prepared`] envelope.
pub(super) struct Answered {
    prepared: Prepared,
    env_receipt: Vec<u8>,
    issued: i64,
    verified: Vec<(receipts::Verified, Signed)>,
    /// The peer keeps pipelined envelopes in order (`DeliverResponse.sequenced`).
    pub sequenced: bool,
}

/// Step 1: the envelope of `items` (up to [`MAX_ENVELOPE_BYTES`] of them), proven from the
/// checkpoint size `held` the peer is believed to hold, naming `previous` (the first sequence of
/// the envelope in flight before it, if any).
pub(super) async fn prepare(
    cx: &FedContext,
    peer: &Peer,
    items: Vec<(u64, Item)>,
    held: u64,
    previous: Option<u64>,
) -> Result<Prepared, Fail> {
    let n = cx.clone();
    let loaded = blocking(move || {
        let store = n.ledger.store();
        let mut out = Vec::with_capacity(items.len());
        let mut bytes = 0;
        for (seq, item) in items {
            let e = store.get(item.ledger_seq)?.ok_or_else(|| {
                Error::Storage(format!("outbox names missing sequence {}", item.ledger_seq))
            })?;
            let at = crate::ledger::applied_at(&e);
            let r = e
                .record
                .ok_or_else(|| Error::Storage("ledger entry without record".into()))?;
            bytes += r.encoded_len();
            if !out.is_empty() && bytes > MAX_ENVELOPE_BYTES {
                break;
            }
            out.push((seq, item, r, at));
        }
        Ok(out)
    })
    .await?;
    // The proof that we recorded every record we send (issue 8): a checkpoint covering the
    // batch — the latest, or one signed now — and each record's inclusion proof.
    let leaves: Vec<u64> = loaded.iter().map(|(_, i, _, _)| i.ledger_seq).collect();
    let need = leaves.iter().max().map_or(0, |m| m + 1);
    let cp = crate::log::covering(&cx.checkpoints, need).await?;
    let (n, cp2) = (cx.clone(), cp.clone());
    let log_proof = blocking(move || super::logproof::build(&n, &cp2, &leaves, held)).await?;
    let seqs: Vec<u64> = loaded.iter().map(|(s, _, _, _)| *s).collect();
    let ids: Vec<RecordId> = loaded.iter().map(|(_, i, _, _)| i.record_id).collect();
    let applied_at: Vec<i64> = loaded.iter().map(|(_, _, _, t)| *t).collect();
    let env = Envelope {
        sender: cx.name().to_string(),
        receiver: peer.name().to_string(),
        first_sequence: seqs.first().copied().unwrap_or(0),
        sent_at_unix_ms: cx.clock.now_ms(),
        records: loaded.into_iter().map(|(_, _, r, _)| r).collect(),
        log_proof: Some(log_proof),
        previous_first_sequence: previous,
        applied_at_unix_ms: applied_at,
        // `receipts::verify_many` proves an unsigned declaration by the checkpoint.
        checkpointed_declarations: true,
    };
    let payload = env.encode_to_vec();
    let sig = signing::sign(&cx.signer, ENVELOPE_PAYLOAD_TYPE, &payload);
    let env_id = signing::record_id(ENVELOPE_PAYLOAD_TYPE, &payload);
    let req = DeliverRequest {
        envelope: Some(Signed {
            payload: payload.into(),
            payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
            signatures: vec![sig],
        }),
    };
    Ok(Prepared {
        req,
        env_id,
        seqs,
        ids,
        checkpoint_size: cp.size,
    })
}

/// Step 2: sends the envelope and verifies the answer (nothing is written here).
pub(super) async fn transmit(cx: &FedContext, peer: &Peer, p: Prepared) -> Result<Answered, Fail> {
    let resp = cx
        .transport
        .deliver(peer, p.req.clone())
        .await
        .map_err(status_fail)?;
    let keys: Vec<Verifier> = peer.keys_at(cx.clock.now_ms()).cloned().collect();
    let first = resp
        .receipts
        .first()
        .ok_or_else(|| Fail::Other("no envelope receipt in the answer".into()))?;
    let mut all = receipts::verify_many(&resp.receipts, &keys, &[]).into_iter();
    let v = all
        .next()
        .unwrap_or_else(|| Err("missing".into()))
        .map_err(|e| Fail::Other(format!("envelope receipt: {e}")))?;
    let r = &v.receipt;
    if r.kind != ReceiptKind::EnvelopeRecorded as i32
        || r.envelope_id[..] != p.env_id[..]
        || r.receiver != peer.name()
        || r.sender != cx.name()
    {
        return Err(Fail::Other(
            "the envelope receipt is not about this envelope".into(),
        ));
    }
    let want: HashSet<RecordId> = p.ids.iter().copied().collect();
    let mut verified = Vec::new();
    for ((i, s), checked) in resp.receipts.iter().enumerate().skip(1).zip(all) {
        match checked {
            Ok(v)
                if v.decision.is_some()
                    && v.receipt.receiver == peer.name()
                    && v.receipt.sender == cx.name()
                    && <RecordId>::try_from(v.receipt.record_id.as_ref())
                        .is_ok_and(|id| want.contains(&id)) =>
            {
                verified.push((v, s.clone()))
            }
            Ok(_) => tracing::warn!(
                peer = peer.name(),
                index = i,
                "receipt is not about a record of this envelope; ignored"
            ),
            Err(e) => {
                tracing::warn!(peer = peer.name(), index = i, error = %e, "receipt does not verify; ignored")
            }
        }
    }
    Ok(Answered {
        env_receipt: first.encode_to_vec(),
        issued: r.issued_at_unix_ms,
        prepared: p,
        verified,
        sequenced: resp.sequenced,
    })
}

/// Step 3: keeps the answer and removes the envelope's items from the outbox (one synced
/// write); returns how many records it carried.
pub(super) async fn acknowledge(cx: &FedContext, peer: &str, a: Answered) -> Result<usize, Fail> {
    // The peer verified our checkpoint (it answered): it holds at least this size now.
    cx.federation
        .health(peer)
        .log_size
        .fetch_max(a.prepared.checkpoint_size, Ordering::Relaxed);
    let (n, peer_name) = (cx.clone(), peer.to_string());
    let Answered {
        prepared: p,
        env_receipt,
        issued,
        verified,
        ..
    } = a;
    let count = p.seqs.len();
    let env_id = p.env_id;
    blocking(move || {
        let fed = &n.federation;
        let mut batch = crate::ledger::Batch::default();
        // A record with its admission receipt in this answer needs no `federated` state first
        // (the admission receipt replaces it in the same write): one read and write less each.
        let decided: HashSet<&[u8]> = verified
            .iter()
            .map(|(v, _)| v.receipt.record_id.as_ref())
            .collect();
        let undecided: Vec<RecordId> = p
            .ids
            .iter()
            .filter(|id| !decided.contains(&id[..]))
            .copied()
            .collect();
        fed.receipts.envelope_recorded(&mut batch, &peer_name, &undecided, &env_receipt, issued)?;
        for (v, s) in &verified {
            if let Some(d) = &v.decision {
                tracing::debug!(peer = %peer_name, record_id = %hex::encode(&v.receipt.record_id), decision = %d, "receipt");
            }
            fed.receipts.admission(&mut batch, &peer_name, v, s)?;
        }
        fed.outbox.remove(&mut batch, &peer_name, &p.seqs)?;
        super::db::write(n.ledger.store(), batch, true)?;
        fed.outbox.removed(&peer_name, &p.seqs);
        Ok(())
    })
    .await?;
    tracing::debug!(peer, records = count, envelope = %hex::encode(env_id), "envelope delivered");
    Ok(count)
}
