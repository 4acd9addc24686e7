//! Inbox admission (seed 000, "Federation admission"): each record of a peer's envelope is
//! admitted, quarantined or rejected, in this order of checks:
//!
//! 1. envelope signature and peer: the payload type, the sender is an enabled peer, the TLS
//!    client certificate is that peer's identity (and its pinned leaf, if pinned), the envelope
//!    is addressed here, and it is signed by one of the peer's node keys valid now (a party key
//!    on an envelope is `not_node_key`) — otherwise the whole envelope is refused
//!    ([`Error::Refused`] with the code) and the refusal is recorded;
//! 2. dedup: a duplicate envelope, or a record decided before, gets the original receipt;
//! 3. well-formed (`malformed`);
//! 4. the author acts for the sending organisation (`unauthorized_author`), every signature is
//!    by the author's own party key or the peer's node key (`key_not_for_author`), and the record
//!    is signed by one of its keys valid now (`unknown_key`, `bad_signature`);
//! 5. proven: the envelope's log proof puts the record in the sender's log, else
//!    `["quarantined", "unproven"]` ([`super::logproof`]; an invalid proof refuses the envelope);
//!    records failing 3-5 count against the peer's [`super::budget`];
//! 6. basis known, else `["quarantined", "missing_basis"]` (also while an earlier record of the
//!    same commitment is quarantined, so a commitment's records apply in order);
//! 7. kernel validity: the record is appended to the ledger and the kernel decides
//!    (`["rejected", "invalid_operation:<kernel code>"]`);
//! 8. admitted.
//!
//! Every decision is recorded as a node-signed `admission` declaration by `<org>/work-service`
//! in the ledger (that is what links an admitted record to local Work, and what the receipt's
//! inclusion proof is about). Decisions of one peer are taken one envelope at a time (a per-peer
//! lock), so retries racing their original cannot decide a record twice.
//!
//! `inbox` keys: `r ‖ record id` → [`Entry`]; `e ‖ envelope id` → [`EnvelopeEntry`];
//! `x ‖ time ‖ n` → [`Refusal`] (the bounded ring in [`super::refusals`]).

use super::codes::{self, Decision};
use super::db;
use super::peers::Peer;
use super::quarantine;
use crate::error::Error;
use crate::ledger::Append;
use crate::node::Node;
use crate::projection::WORK_SERVICE;
use accord_kernel as k;
use accord_proto::pb::federation::v1::{DeliverResponse, Envelope, Receipt, ReceiptKind, Signed};
use accord_proto::pb::record::v1::{self as pb, Record, SignedRecord, record::Operation};
use accord_proto::signing::{self, ENVELOPE_PAYLOAD_TYPE, RECORD_PAYLOAD_TYPE, RecordId};
use prost::Message;
use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use super::refusals::refuse;

pub(crate) const CF: &str = "inbox";

/// The decision kept for one peer record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The peer it came from.
    pub peer: String,
    /// The envelope that first carried it.
    #[serde(with = "db::serde_bytes::id")]
    pub envelope_id: RecordId,
    /// The current decision (a quarantine closes later).
    pub decision: Decision,
    /// The latest admission declaration about it.
    #[serde(with = "db::serde_bytes::id")]
    pub admission_id: RecordId,
    /// Its ledger sequence.
    pub admission_seq: u64,
    /// The record's commitment ("" if it did not decode).
    pub commitment: String,
    /// When the current decision was taken (Unix ms).
    pub decided_at: i64,
    /// The original receipt (encoded `Signed`), answered to duplicates.
    #[serde(with = "db::serde_bytes::b64")]
    pub first_receipt: Vec<u8>,
    /// The operator's reason, when decided by hand.
    #[serde(default)]
    pub note: String,
}

/// A recorded envelope.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvelopeEntry {
    /// The sending peer.
    pub peer: String,
    /// When it was recorded.
    pub received_at: i64,
    /// The signed envelope (encoded `Signed`).
    #[serde(with = "db::serde_bytes::b64")]
    pub envelope: Vec<u8>,
    /// The answer given (encoded `DeliverResponse`), given again to a duplicate.
    #[serde(with = "db::serde_bytes::b64")]
    pub response: Vec<u8>,
}

/// The decision kept for a record.
pub fn entry(node: &Node, id: &RecordId) -> Result<Option<Entry>, Error> {
    db::get(node.ledger.store(), CF, &db::key(&[b"r", id]))
}

pub(crate) fn entry_key(id: &RecordId) -> Vec<u8> {
    db::key(&[b"r", id])
}

/// A record that passed checks 3 and 4.
pub(crate) struct Checked {
    pub id: RecordId,
    pub signed: SignedRecord,
    pub record: Record,
    pub input: k::Record,
}

/// Checks 3 and 4 for one record of `peer`. Err is (code, detail).
pub(crate) fn check(
    peer: &Peer,
    id: RecordId,
    signed: &SignedRecord,
    now: i64,
    signature_verified: bool,
) -> Result<Checked, (String, String)> {
    let malformed = |d: String| (codes::MALFORMED.to_string(), d);
    if signed.payload_type != RECORD_PAYLOAD_TYPE {
        return Err(malformed(format!(
            "payload type {:?} is not {RECORD_PAYLOAD_TYPE:?}",
            signed.payload_type
        )));
    }
    let record = Record::decode(signed.payload.as_ref())
        .map_err(|e| malformed(format!("payload does not decode: {e}")))?;
    let input =
        crate::convert::record_from_pb(id, &record).map_err(|e| malformed(e.to_string()))?;
    if input.author.organisation != peer.name() {
        return Err((
            codes::UNAUTHORIZED_AUTHOR.into(),
            format!(
                "author {} does not act for the sending organisation {:?}",
                input.author,
                peer.name()
            ),
        ));
    }
    peer.check_binding(&input.author.to_string(), &signed.signatures)
        .map_err(|d| (codes::KEY_NOT_FOR_AUTHOR.to_string(), d))?;
    if !signature_verified {
        peer.verify(
            RECORD_PAYLOAD_TYPE,
            &signed.payload,
            &signed.signatures,
            now,
        )
        .map_err(|(c, d)| (c.to_string(), d))?;
    }
    Ok(Checked {
        id,
        signed: signed.clone(),
        record,
        input,
    })
}

/// Builds a node-signed admission declaration about `record_id` (seed 000, "Federation
/// admission": "Linked to a local Work through an admission Declaration").
#[allow(clippy::too_many_arguments)]
pub(crate) fn admission_record(
    node: &Node,
    author: &str,
    peer: &str,
    record_id: &RecordId,
    commitment: &str,
    decision: &Decision,
    closes: Option<&RecordId>,
    declared_at: i64,
) -> Result<Append<k::Record>, Error> {
    let commitment = if commitment.is_empty() {
        format!("federation:{peer}")
    } else {
        commitment.to_string()
    };
    let record = Record {
        author: Some(pb::PartyRef {
            organisation: node.name().to_string(),
            name: author.to_string(),
        }),
        declared_at_unix_ms: declared_at,
        commitment_id: commitment,
        operation: Some(Operation::Admission(pb::Admission {
            record_id: record_id.to_vec().into(),
            peer: peer.to_string(),
            outcome: decision.outcome() as i32,
            code: decision.code().to_string(),
            closes: closes.map(|c| c.to_vec().into()).unwrap_or_default(),
        })),
        ..Default::default()
    };
    let signed = signing::sign_record(&node.signer, &record);
    let id = signing::record_id(RECORD_PAYLOAD_TYPE, &signed.payload);
    let input = crate::convert::record_from_pb(id, &record)?;
    Ok(Append { id, signed, input })
}

/// An admission receipt for a decided record.
pub(crate) fn admission_receipt(
    node: &Node,
    peer: &str,
    envelope_id: &RecordId,
    record_id: &RecordId,
    e: &Entry,
) -> Receipt {
    Receipt {
        kind: ReceiptKind::Admission as i32,
        receiver: node.name().to_string(),
        sender: peer.to_string(),
        envelope_id: envelope_id.to_vec().into(),
        record_id: record_id.to_vec().into(),
        outcome: e.decision.outcome() as i32,
        code: e.decision.code().to_string(),
        admission_record_id: e.admission_id.to_vec().into(),
        admission_sequence: e.admission_seq,
        issued_at_unix_ms: node.clock.now_ms(),
        ..Default::default()
    }
}

/// Step 1: who sent it. Err is the refusal to answer (already recorded).
fn authenticate(
    node: &Node,
    env: &Signed,
    chain: Option<&[CertificateDer<'_>]>,
    now: i64,
) -> Result<(Arc<Peer>, Envelope), Error> {
    if env.payload_type != ENVELOPE_PAYLOAD_TYPE {
        return Err(refuse(
            node,
            "",
            codes::MALFORMED,
            format!(
                "envelope payload type {:?} is not {ENVELOPE_PAYLOAD_TYPE:?}",
                env.payload_type
            ),
        ));
    }
    let e = Envelope::decode(env.payload.as_ref()).map_err(|err| {
        refuse(
            node,
            "",
            codes::MALFORMED,
            format!("envelope does not decode: {err}"),
        )
    })?;
    let fed = &node.federation;
    let Some(peer) = fed.peers.get(&e.sender) else {
        return Err(refuse(
            node,
            &e.sender,
            codes::UNKNOWN_PEER,
            format!("{:?} is not a peer of {}", e.sender, node.name()),
        ));
    };
    if !peer.enabled() {
        return Err(refuse(
            node,
            &e.sender,
            codes::PEER_DISABLED,
            format!("peer {:?} is disabled", e.sender),
        ));
    }
    if !chain.is_some_and(|c| peer.tls_identity_matches(c)) {
        return Err(refuse(
            node,
            &e.sender,
            codes::WRONG_TLS_IDENTITY,
            format!(
                "the TLS client certificate is not the identity configured for {:?}",
                e.sender
            ),
        ));
    }
    if e.receiver != node.name() {
        return Err(refuse(
            node,
            &e.sender,
            codes::WRONG_RECEIVER,
            format!(
                "envelope is for {:?}, this is {:?}",
                e.receiver,
                node.name()
            ),
        ));
    }
    // Only the peer's node key signs envelopes (issue 8): a party key speaks for its party's
    // records, never for the node.
    if let Some((i, s)) = env
        .signatures
        .iter()
        .enumerate()
        .find(|(_, s)| peer.is_party_key_name(&s.key_name))
    {
        return Err(refuse(
            node,
            &e.sender,
            codes::NOT_NODE_KEY,
            format!(
                "envelope signatures[{i}]: party key {:?}; only the node key signs envelopes",
                s.key_name.chars().take(128).collect::<String>()
            ),
        ));
    }
    if let Err((code, detail)) =
        peer.verify(ENVELOPE_PAYLOAD_TYPE, &env.payload, &env.signatures, now)
    {
        return Err(refuse(node, &e.sender, code, format!("envelope: {detail}")));
    }
    Ok((peer, e))
}

enum Work {
    /// Decided before: the original receipt.
    Dup(Signed),
    /// The same record earlier in this envelope.
    SameAs(usize),
    Reject {
        id: RecordId,
        commitment: String,
        code: String,
        detail: String,
    },
    Quarantine {
        c: Checked,
        missing: Vec<RecordId>,
        code: &'static str,
    },
    Kernel {
        c: Checked,
    },
}

/// `FederationService.Deliver`: admits one envelope (see the module doc).
pub async fn deliver(
    node: &Arc<Node>,
    env_signed: Signed,
    chain: Option<Arc<Vec<CertificateDer<'static>>>>,
) -> Result<DeliverResponse, Error> {
    let now = node.clock.now_ms();
    let (peer, env) = authenticate(
        node,
        &env_signed,
        chain.as_deref().map(|c| c.as_slice()),
        now,
    )?;
    let fed = &node.federation;
    let lock = fed.peer_lock(peer.name());
    let _guard = lock.lock().await;
    let store = node.ledger.store().clone();
    let env_id = signing::record_id(ENVELOPE_PAYLOAD_TYPE, &env_signed.payload);
    if let Some(e) = db::get::<EnvelopeEntry>(&store, CF, &db::key(&[b"e", &env_id]))? {
        tracing::info!(peer = peer.name(), envelope = %hex::encode(env_id), "duplicate envelope: original receipts");
        return DeliverResponse::decode(e.response.as_slice())
            .map_err(|e| Error::Storage(format!("inbox: stored response: {e}")));
    }

    // Check 5's evidence: the sender's checkpoint and inclusion proofs (an invalid proof refuses
    // the whole envelope here, before anything is written).
    let log = super::logproof::verify(node, &peer, &env, now).await?;

    // Record signatures, all at once (one Ed25519 batch); a record the batch does not establish
    // is checked alone below, for its reason code.
    let all: Vec<&SignedRecord> = env.records.iter().collect();
    let sig_ok = peer.verify_batch(RECORD_PAYLOAD_TYPE, &all, now);

    // Checks 2-5, in envelope order.
    let mut work: Vec<Work> = Vec::with_capacity(env.records.len());
    let mut coming: HashSet<RecordId> = HashSet::new();
    let mut first: HashMap<RecordId, usize> = HashMap::new();
    let mut quarantined_here: HashMap<String, Vec<(RecordId, Vec<RecordId>)>> = HashMap::new();
    let mut door: u32 = 0;
    for (i, signed) in env.records.iter().enumerate() {
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        if let Some(j) = first.get(&id) {
            work.push(Work::SameAs(*j));
            continue;
        }
        first.insert(id, i);
        if let Some(e) = entry(node, &id)? {
            let s = Signed::decode(e.first_receipt.as_slice())
                .map_err(|e| Error::Storage(format!("inbox: stored receipt: {e}")))?;
            work.push(Work::Dup(s));
            continue;
        }
        match check(&peer, id, signed, now, sig_ok[i]) {
            Err((code, detail)) => {
                // The declaration names no sender-chosen commitment: a record rejected at the
                // door is declared under `federation:<peer>` (issue 8).
                door += 1;
                work.push(Work::Reject {
                    id,
                    commitment: String::new(),
                    code,
                    detail,
                });
            }
            Ok(c) if !log.proven[i] => {
                door += 1;
                work.push(Work::Quarantine {
                    c,
                    missing: Vec::new(),
                    code: codes::UNPROVEN,
                });
            }
            Ok(c) => {
                let here = quarantined_here
                    .get(&c.record.commitment_id)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let missing = quarantine::missing(node, &c, &coming, None, here)?;
                if missing.is_empty() {
                    coming.insert(id);
                    work.push(Work::Kernel { c });
                } else {
                    quarantined_here
                        .entry(c.record.commitment_id.clone())
                        .or_default()
                        .push((id, missing.clone()));
                    work.push(Work::Quarantine {
                        c,
                        missing,
                        code: codes::MISSING_BASIS,
                    });
                }
            }
        }
    }

    // Records rejected at the door cost ledger writes: bounded per peer, checked before any.
    if !super::budget::take(node.name(), peer.name(), door, now) {
        tracing::warn!(
            peer = peer.name(),
            records = door,
            "federation: too many rejected records; envelope not admitted"
        );
        return Err(Error::ResourceExhausted(format!(
            "{}: {door} records of this envelope would be rejected; peer {} may have {} at once, {} a minute",
            codes::TOO_MANY_REJECTIONS,
            peer.name(),
            super::budget::BURST,
            super::budget::PER_MINUTE
        )));
    }

    // Check 7: the kernel, for every record that got this far (one group commit).
    let appends = work.iter().filter_map(|w| match w {
        Work::Kernel { c } => Some(node.ledger.append(Append {
            id: c.id,
            signed: c.signed.clone(),
            input: c.input.clone(),
        })),
        _ => None,
    });
    let mut kernel = futures::future::join_all(appends).await.into_iter();

    // The admission declarations (one more group commit).
    struct Decided {
        idx: usize,
        id: RecordId,
        commitment: String,
        decision: Decision,
        quarantine: Option<(Checked, Vec<RecordId>, &'static str)>,
    }
    let mut decided: Vec<Decided> = Vec::new();
    let mut declarations = Vec::new();
    let mut receipts: Vec<Option<Signed>> = vec![None; work.len()];
    let mut same_as = Vec::new();
    for (idx, w) in work.into_iter().enumerate() {
        let (id, commitment, decision, declared_at, q) = match w {
            Work::Dup(s) => {
                receipts[idx] = Some(s);
                continue;
            }
            Work::SameAs(j) => {
                same_as.push((idx, j));
                continue;
            }
            Work::Reject {
                id,
                commitment,
                code,
                detail,
            } => {
                tracing::info!(peer = peer.name(), record_id = %hex::encode(id), code = %code, detail = %detail, "federation: rejected");
                (id, commitment, Decision::Rejected(code), now, None)
            }
            Work::Quarantine { c, missing, code } => {
                let commitment = c.record.commitment_id.clone();
                (
                    c.id,
                    commitment,
                    Decision::Quarantined(code.into()),
                    now,
                    Some((c, missing, code)),
                )
            }
            Work::Kernel { c } => {
                let r = kernel
                    .next()
                    .ok_or_else(|| Error::Internal("kernel results out of step".into()))??;
                let d = if r.outcome.applied {
                    Decision::Admitted
                } else {
                    Decision::Rejected(codes::invalid_operation(&r.outcome.rejection_code))
                };
                // Deterministic bytes: a retry after a crash re-derives the same declaration.
                (c.id, c.record.commitment_id.clone(), d, r.recorded_at, None)
            }
        };
        declarations.push(admission_record(
            node,
            WORK_SERVICE,
            peer.name(),
            &id,
            &commitment,
            &decision,
            None,
            declared_at,
        )?);
        decided.push(Decided {
            idx,
            id,
            commitment,
            decision,
            quarantine: q,
        });
    }
    let mut ids = Vec::with_capacity(declarations.len());
    let appends = declarations.into_iter().map(|a| {
        ids.push(a.id);
        node.ledger.append(a)
    });
    let results = futures::future::join_all(appends).await;

    // Receipts, and everything kept, in one synced write.
    let mut batch = rocksdb::WriteBatch::default();
    let mut quarantined = Vec::new();
    for ((d, r), admission_id) in decided.into_iter().zip(results).zip(ids) {
        let r = r?;
        let mut e = Entry {
            peer: peer.name().to_string(),
            envelope_id: env_id,
            decision: d.decision,
            admission_id,
            admission_seq: r.sequence,
            commitment: d.commitment,
            decided_at: now,
            first_receipt: Vec::new(),
            note: String::new(),
        };
        let receipt = super::receipts::sign(
            &node.signer,
            &admission_receipt(node, peer.name(), &env_id, &d.id, &e),
        );
        e.first_receipt = receipt.encode_to_vec();
        node.metrics.admission(&e.decision);
        if e.decision == Decision::Admitted {
            tracing::debug!(peer = peer.name(), record_id = %hex::encode(d.id), decision = %e.decision, admission_seq = r.sequence, "federation: admission");
        } else {
            tracing::info!(peer = peer.name(), record_id = %hex::encode(d.id), decision = %e.decision, admission_seq = r.sequence, "federation: admission");
        }
        if let Some((c, missing, code)) = d.quarantine {
            quarantined.push(c.id);
            fed.quarantine.put(
                &mut batch,
                node,
                &c,
                peer.name(),
                &env_id,
                &admission_id,
                &missing,
                code,
                now,
            )?;
        }
        db::put(&mut batch, &store, CF, &entry_key(&d.id), &e)?;
        receipts[d.idx] = Some(receipt);
    }
    for (i, j) in same_as {
        receipts[i] = receipts[j].clone();
    }
    let env_receipt = super::receipts::sign(
        &node.signer,
        &Receipt {
            kind: ReceiptKind::EnvelopeRecorded as i32,
            receiver: node.name().to_string(),
            sender: peer.name().to_string(),
            envelope_id: env_id.to_vec().into(),
            issued_at_unix_ms: node.clock.now_ms(),
            ..Default::default()
        },
    );
    let mut all = vec![env_receipt];
    all.extend(receipts.into_iter().flatten());
    let response = DeliverResponse { receipts: all };
    let kept = EnvelopeEntry {
        peer: peer.name().to_string(),
        received_at: now,
        envelope: env_signed.encode_to_vec(),
        response: response.encode_to_vec(),
    };
    db::put(&mut batch, &store, CF, &db::key(&[b"e", &env_id]), &kept)?;
    log.keep(&mut batch, node, peer.name())?;
    let s = store.clone();
    tokio::task::spawn_blocking(move || db::write(&s, batch, true))
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
    // A basis may have entered the ledger (from this envelope, another peer or a local client)
    // after its waiters were checked and before they were written: look at them once now.
    fed.quarantine.wake(quarantined);
    tracing::debug!(peer = peer.name(), envelope = %hex::encode(env_id), records = env.records.len(), "envelope recorded");
    Ok(response)
}

/// `FederationService.GetReceipts`: the latest receipt of each record the calling peer (known
/// by its TLS identity) delivered, with the proof once a checkpoint includes the admission.
pub async fn get_receipts(
    node: &Arc<Node>,
    ids: Vec<RecordId>,
    chain: Option<Arc<Vec<CertificateDer<'static>>>>,
) -> Result<Vec<Signed>, Error> {
    let callers: Vec<String> = match chain.as_deref() {
        Some(c) => node
            .federation
            .peers
            .list()
            .into_iter()
            .filter(|p| p.enabled() && p.tls_identity_matches(c))
            .map(|p| p.name().to_string())
            .collect(),
        None => Vec::new(),
    };
    if callers.is_empty() {
        return Err(refuse(
            node,
            "",
            codes::WRONG_TLS_IDENTITY,
            "GetReceipts: the TLS client certificate is no enabled peer's identity".into(),
        ));
    }
    let n = node.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for id in ids {
            let Some(e) = entry(&n, &id)? else { continue };
            if !callers.contains(&e.peer) {
                continue;
            }
            let mut r = admission_receipt(&n, &e.peer, &e.envelope_id, &id, &e);
            super::receipts::attach_proof(&n, &mut r)?;
            out.push(super::receipts::sign(&n.signer, &r));
        }
        Ok(out)
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))?
}
