//! Receipts (DESIGN.md, "Federation": "The receiver answers with signed receipts: one when the
//! envelope is recorded, one when each record's admission is decided … A receipt should carry
//! proof, not a promise").
//!
//! * Receiver side: [`sign`] and [`admission_receipt`], which attaches, once available, the
//!   receiver's checkpoint that includes the admission record (the witnessed one if any, else
//!   the latest), the inclusion proof and the admission leaf.
//! * Anyone: [`verify`] checks a receipt offline against the receiver's keys (and witnesses):
//!   the signature, the admission leaf, the checkpoint signature and the inclusion proof.
//! * Sender side: [`ReceiptStore`] keeps, per (record, peer), the latest receipt and the
//!   durability it proves (seed 000, "Durability states": federated → admitted, quarantined or
//!   rejected), in the `receipts` column family.

use super::codes::Decision;
use super::db;
use crate::error::Error;
use crate::ledger::Store;
use accord_proto::checkpoint::{Checkpoint, open_checkpoint};
use accord_proto::merkle::{leaf_hash, verify_inclusion};
use accord_proto::note::{Note, Signer, Verifier};
use accord_proto::pb::federation::v1::{Receipt, ReceiptKind, Signed};
use accord_proto::pb::record::v1::{Record, SignedRecord, record::Operation};
use accord_proto::pb::work::v1::{Durability, PeerDurability};
use accord_proto::signing::{self, RECEIPT_PAYLOAD_TYPE, RecordId};
use prost::Message;
use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

const CF: &str = "receipts";

/// Signs a receipt with the node key (DSSE, [`RECEIPT_PAYLOAD_TYPE`]).
pub fn sign(signer: &Signer, r: &Receipt) -> Signed {
    let payload = r.encode_to_vec();
    let sig = signing::sign(signer, RECEIPT_PAYLOAD_TYPE, &payload);
    Signed {
        payload: payload.into(),
        payload_type: RECEIPT_PAYLOAD_TYPE.into(),
        signatures: vec![sig],
    }
}

/// Fills in the checkpoint, inclusion proof and leaf of an admission receipt when a checkpoint
/// of the receiver includes `r.admission_sequence` (the witnessed one preferred).
pub fn attach_proof(node: &crate::server::Node, r: &mut Receipt) -> Result<(), Error> {
    let seq = r.admission_sequence;
    let cp = node
        .log
        .witnessed()
        .filter(|c| seq < c.size)
        .or_else(|| node.log.latest().filter(|c| seq < c.size));
    let Some(cp) = cp else { return Ok(()) };
    let store = node.ledger.store();
    let proof = crate::log::inclusion_proof(store, seq, cp.size)?;
    let leaf = store
        .get(seq)?
        .and_then(|e| e.record)
        .ok_or_else(|| Error::Storage(format!("admission record at {seq} is missing")))?;
    r.checkpoint = cp.note;
    r.inclusion_proof = proof.into_iter().map(|h| h.to_vec().into()).collect();
    r.admission_leaf = leaf.encode_to_vec().into();
    Ok(())
}

/// What [`verify`] established.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The decoded receipt.
    pub receipt: Receipt,
    /// For admission receipts: the decision.
    pub decision: Option<Decision>,
    /// The admission record is proven included in the receiver's signed checkpoint.
    pub proven: bool,
    /// The checkpoint's size, when proven.
    pub checkpoint_size: u64,
    /// Names of the witnesses whose cosignatures verified.
    pub witnessed_by: Vec<String>,
}

fn verify_signed(
    payload_type: &str,
    payload: &[u8],
    sigs: &[accord_proto::pb::record::v1::Signature],
    keys: &[Verifier],
) -> Result<(), String> {
    for sig in sigs {
        if let Some(k) = keys
            .iter()
            .find(|k| k.name() == sig.key_name && k.key_id()[..] == sig.key_id[..])
        {
            return signing::verify(k, payload_type, payload, sig)
                .map_err(|e| format!("signature: {e}"));
        }
    }
    Err("no signature by the receiver's key".into())
}

/// Verifies a signed receipt against the receiver's keys: its signature, and — when it carries
/// a checkpoint — that the admission leaf is the receiver's admission declaration about this
/// record with this outcome, that the checkpoint is signed by the receiver's log key (and
/// cosigned by every key in `witnesses`), and that the inclusion proof puts the leaf at the
/// admission sequence under the checkpoint's root.
pub fn verify(
    signed: &Signed,
    keys: &[Verifier],
    witnesses: &[Verifier],
) -> Result<Verified, String> {
    if signed.payload_type != RECEIPT_PAYLOAD_TYPE {
        return Err(format!(
            "payload type {:?} is not {RECEIPT_PAYLOAD_TYPE:?}",
            signed.payload_type
        ));
    }
    verify_signed(
        RECEIPT_PAYLOAD_TYPE,
        &signed.payload,
        &signed.signatures,
        keys,
    )?;
    let receipt = Receipt::decode(signed.payload.as_ref())
        .map_err(|e| format!("receipt does not decode: {e}"))?;
    let decision = match ReceiptKind::try_from(receipt.kind) {
        Ok(ReceiptKind::Admission) => Some(
            Decision::from_wire(receipt.outcome, &receipt.code)
                .ok_or("admission receipt without an outcome")?,
        ),
        Ok(ReceiptKind::EnvelopeRecorded) => None,
        _ => return Err(format!("unknown receipt kind {}", receipt.kind)),
    };
    let mut v = Verified {
        receipt,
        decision,
        proven: false,
        checkpoint_size: 0,
        witnessed_by: Vec::new(),
    };
    if v.receipt.checkpoint.is_empty() {
        if !witnesses.is_empty() {
            return Err("the receipt carries no checkpoint, so no witness cosignature".into());
        }
        return Ok(v);
    }
    let r = &v.receipt;
    // The admission leaf: the receiver's signed admission declaration about this record.
    let leaf = SignedRecord::decode(r.admission_leaf.as_ref())
        .map_err(|e| format!("admission leaf does not decode: {e}"))?;
    let leaf_id = signing::record_id(&leaf.payload_type, &leaf.payload);
    if leaf_id[..] != r.admission_record_id[..] {
        return Err("the admission leaf is not the admission record the receipt names".into());
    }
    verify_signed(&leaf.payload_type, &leaf.payload, &leaf.signatures, keys)
        .map_err(|e| format!("admission record {e}"))?;
    let record = Record::decode(leaf.payload.as_ref())
        .map_err(|e| format!("admission record does not decode: {e}"))?;
    let Some(Operation::Admission(a)) = &record.operation else {
        return Err("the admission leaf is not an admission declaration".into());
    };
    if a.record_id != r.record_id
        || a.outcome != r.outcome
        || a.code != r.code
        || a.peer != r.sender
    {
        return Err("the admission declaration does not say what the receipt says".into());
    }
    // The checkpoint, signed by the receiver's log key (whose name is the origin).
    let note = Note::parse(r.checkpoint.as_bytes()).map_err(|e| format!("checkpoint: {e}"))?;
    let cp = Checkpoint::parse(note.text()).map_err(|e| format!("checkpoint: {e}"))?;
    let log_keys: Vec<Verifier> = keys
        .iter()
        .filter(|k| k.name() == cp.origin)
        .cloned()
        .collect();
    if log_keys.is_empty() {
        return Err(format!(
            "no receiver key is named after the checkpoint origin {:?}",
            cp.origin
        ));
    }
    let opened = open_checkpoint(r.checkpoint.as_bytes(), &cp.origin, &log_keys, witnesses)
        .map_err(|e| format!("checkpoint: {e}"))?;
    for w in witnesses {
        if !opened
            .cosignatures()
            .any(|(c, _)| c.name() == w.name() && c.key_id() == w.key_id())
        {
            return Err(format!(
                "checkpoint is not cosigned by witness {}",
                w.name()
            ));
        }
        v.witnessed_by.push(w.name().to_string());
    }
    let proof: Vec<[u8; 32]> = r
        .inclusion_proof
        .iter()
        .map(|h| {
            h.as_ref()
                .try_into()
                .map_err(|_| "inclusion proof hash is not 32 bytes".to_string())
        })
        .collect::<Result<_, _>>()?;
    verify_inclusion(
        &leaf_hash(&r.admission_leaf),
        r.admission_sequence,
        cp.size,
        &proof,
        &cp.root,
    )
    .map_err(|e| format!("inclusion proof: {e}"))?;
    v.proven = true;
    v.checkpoint_size = cp.size;
    Ok(v)
}

/// The sender's knowledge of one record at one peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerState {
    /// `accord.work.v1.Durability`: federated, admitted, quarantined or rejected.
    pub durability: i32,
    /// Quarantine or rejection code.
    pub code: String,
    /// The admission is proven (checkpoint + inclusion proof verified).
    pub proven: bool,
    /// When the receipt was issued (peer's clock).
    pub issued_at: i64,
    /// The latest signed receipt (encoded `Signed`).
    #[serde(with = "db::serde_bytes::b64")]
    pub receipt: Vec<u8>,
}

impl PeerState {
    /// Nothing more to learn: decided for good and proven.
    pub fn is_final(&self) -> bool {
        self.proven
            && (self.durability == Durability::Admitted as i32
                || self.durability == Durability::Rejected as i32)
    }
}

/// The sender's receipts, per record and peer.
pub struct ReceiptStore {
    store: Arc<Store>,
}

impl std::fmt::Debug for ReceiptStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptStore").finish()
    }
}

fn state_key(id: &RecordId, peer: &str) -> Vec<u8> {
    db::key(&[b"r", id, peer.as_bytes()])
}

fn pending_key(peer: &str, id: &RecordId) -> Vec<u8> {
    db::key(&[b"p", peer.as_bytes(), id])
}

impl ReceiptStore {
    /// Over the `receipts` column family.
    pub fn new(store: Arc<Store>) -> Self {
        Self { store }
    }

    /// The state of `id` at `peer`.
    pub fn get(&self, id: &RecordId, peer: &str) -> Result<Option<PeerState>, Error> {
        db::get(&self.store, CF, &state_key(id, peer))
    }

    fn put(
        &self,
        batch: &mut WriteBatch,
        id: &RecordId,
        peer: &str,
        s: &PeerState,
    ) -> Result<(), Error> {
        db::put(batch, &self.store, CF, &state_key(id, peer), s)?;
        if s.is_final() {
            db::delete(batch, &self.store, CF, &pending_key(peer, id))
        } else {
            db::put(batch, &self.store, CF, &pending_key(peer, id), &())
        }
    }

    /// The envelope holding `ids` was recorded by `peer`: each becomes at least `federated`.
    pub fn envelope_recorded(
        &self,
        batch: &mut WriteBatch,
        peer: &str,
        ids: &[RecordId],
        receipt: &[u8],
        issued_at: i64,
    ) -> Result<(), Error> {
        for id in ids {
            if self.get(id, peer)?.is_none() {
                let s = PeerState {
                    durability: Durability::Federated as i32,
                    code: String::new(),
                    proven: false,
                    issued_at,
                    receipt: receipt.to_vec(),
                };
                self.put(batch, id, peer, &s)?;
            }
        }
        Ok(())
    }

    /// A verified admission receipt from `peer`; a newer receipt replaces an older one.
    /// Returns the new state when it changed.
    pub fn admission(
        &self,
        batch: &mut WriteBatch,
        peer: &str,
        v: &Verified,
        signed: &Signed,
    ) -> Result<Option<PeerState>, Error> {
        let Some(d) = &v.decision else {
            return Ok(None);
        };
        let id: RecordId = match v.receipt.record_id.as_ref().try_into() {
            Ok(id) => id,
            Err(_) => return Ok(None),
        };
        let durability = match d {
            Decision::Admitted => Durability::Admitted,
            Decision::Quarantined(_) => Durability::Quarantined,
            Decision::Rejected(_) => Durability::Rejected,
        } as i32;
        let new = PeerState {
            durability,
            code: d.code().to_string(),
            proven: v.proven,
            issued_at: v.receipt.issued_at_unix_ms,
            receipt: signed.encode_to_vec(),
        };
        if let Some(old) = self.get(&id, peer)? {
            let old_decided = old.durability != Durability::Federated as i32;
            if old == new
                || (old_decided && old.issued_at > new.issued_at)
                || (old.is_final() && !new.proven)
            {
                return Ok(None);
            }
        }
        self.put(batch, &id, peer, &new)?;
        Ok(Some(new))
    }

    /// Records delivered to `peer` whose receipt still lacks a decision or a proof.
    pub fn pending(&self, peer: &str, n: usize) -> Result<Vec<RecordId>, Error> {
        let p = db::prefix(&[b"p", peer.as_bytes()]);
        Ok(db::scan(&self.store, CF, &p, n)?
            .into_iter()
            .filter_map(|(k, _)| k[p.len()..].try_into().ok())
            .collect())
    }

    /// Every peer's state for a record.
    pub fn for_record(&self, id: &RecordId) -> Result<Vec<(String, PeerState)>, Error> {
        let p = db::prefix(&[b"r", id]);
        db::scan(&self.store, CF, &p, 1024)?
            .into_iter()
            .map(|(k, v)| {
                Ok((
                    String::from_utf8_lossy(&k[p.len()..]).into_owned(),
                    db::decode(CF, &v)?,
                ))
            })
            .collect()
    }

    /// GetDurability's `peers` field.
    pub fn peer_durability(&self, id: &RecordId) -> Result<Vec<PeerDurability>, Error> {
        Ok(self
            .for_record(id)?
            .into_iter()
            .map(|(peer, s)| PeerDurability {
                peer,
                durability: s.durability,
                code: s.code,
                receipt: s.receipt.into(),
            })
            .collect())
    }
}
