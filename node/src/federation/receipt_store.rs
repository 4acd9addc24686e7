//! The sender's receipts (seed 000, "Durability states": federated → admitted, quarantined or
//! rejected): per (record, peer), the latest verified receipt and the durability it proves, in
//! the `receipts` column family, which this module owns. Keys: `r ‖ id ‖ peer` → [`PeerState`];
//! `p ‖ peer ‖ id` (receipts still lacking a decision or a proof, polled by the sender).

use super::codes::Decision;
use super::db;
use super::receipts::Verified;
use crate::error::Error;
use crate::ledger::{Batch as WriteBatch, Store};
use accord_proto::pb::federation::v1::Signed;
use accord_proto::pb::work::v1::{Durability, PeerDurability};
use accord_proto::signing::RecordId;
use prost::Message;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

const CF: &str = "receipts";

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
        let from = match after {
            Some(a) => {
                let mut k = p.clone();
                k.extend_from_slice(a);
                k.push(0);
                k
            }
            None => p.clone(),
        };
        Ok(db::scan_from(&self.store, CF, &p, &from, n)?
            .into_iter()
            .filter_map(|(k, _)| <RecordId>::try_from(&k[p.len()..]).ok())
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

    /// GetDurability's `peers` field: each peer's own state and decision, as the seed writes it.
    pub fn peer_durability(&self, id: &RecordId) -> Result<Vec<PeerDurability>, Error> {
        Ok(self
            .for_record(id)?
            .into_iter()
            .map(|(peer, s)| {
                let decision = s.decision();
                PeerDurability {
                    peer,
                    durability: s.durability,
                    outcome: decision.as_ref().map_or(0, |d| d.outcome() as i32),
                    decision: decision.map(|d| d.to_string()).unwrap_or_default(),
                    code: s.code,
                    receipt: s.receipt.into(),
                }
            })
            .collect())
    }
}

impl PeerState {
    /// The peer's decision (`None` while its receipt carries none: `federated`).
    pub fn decision(&self) -> Option<Decision> {
        match Durability::try_from(self.durability).ok()? {
            Durability::Admitted => Some(Decision::Admitted),
            Durability::Quarantined => Some(Decision::Quarantined(self.code.clone())),
            Durability::Rejected => Some(Decision::Rejected(self.code.clone())),
            _ => None,
        }
    }
}
