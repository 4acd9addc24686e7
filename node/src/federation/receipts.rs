//! Receipts (DESIGN.md, "Federation": "The receiver answers with signed receipts: one when the
//! envelope is recorded, one when each record's admission is decided … A receipt should carry
//! proof, not a promise").
//!
//! * Signing and offline verification are protocol rules: [`sign`], [`verify`] and
//!   [`verify_many`] live in [`accord_proto::receipt`] and are re-exported here.
//! * Receiver side: [`attach_proof`] attaches, once available, the receiver's checkpoint that
//!   includes the admission record (the witnessed one if any, else the latest), the inclusion
//!   proof and the admission leaf.
//! * Sender side: [`ReceiptStore`] keeps, per (record, peer), the latest receipt and the
//!   durability it proves (seed 000, "Durability states": federated → admitted, quarantined or
//!   rejected), in the `receipts` column family.

pub use accord_proto::receipt::{Verified, sign, verify_many};

use super::codes::Decision;
use super::db;
use crate::error::Error;
use crate::ledger::Store;
use accord_proto::pb::federation::v1::{Receipt, Signed};
use accord_proto::pb::work::v1::{Durability, PeerDurability};
use accord_proto::signing::RecordId;
use prost::Message;
use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

const CF: &str = "receipts";

/// Fills in the checkpoint, inclusion proof and leaf of an admission receipt when a checkpoint
/// of the receiver includes `r.admission_sequence` (the witnessed one preferred).
pub fn attach_proof(node: &crate::node::Node, r: &mut Receipt) -> Result<(), Error> {
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

    /// Records delivered to `peer` whose receipt still lacks a decision or a proof, in id order,
    /// after `after` (a cursor, so that a long list is visited round-robin).
    pub fn pending(
        &self,
        peer: &str,
        after: Option<&RecordId>,
        n: usize,
    ) -> Result<Vec<RecordId>, Error> {
        let p = db::prefix(&[b"p", peer.as_bytes()]);
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF)?);
        match after {
            Some(a) => {
                let mut k = p.clone();
                k.extend_from_slice(a);
                k.push(0);
                it.seek(&k);
            }
            None => it.seek(&p),
        }
        let mut out = Vec::new();
        while out.len() < n {
            let Some(k) = it.key() else { break };
            if !k.starts_with(&p) {
                break;
            }
            if let Ok(id) = <RecordId>::try_from(&k[p.len()..]) {
                out.push(id);
            }
            it.next();
        }
        it.status().map_err(|e| Error::Storage(e.into_string()))?;
        Ok(out)
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
