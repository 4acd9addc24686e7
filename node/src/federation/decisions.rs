//! The decisions store (issue 10, item 2): the one owner of the `inbox` and `quarantine` column
//! families. Admission ([`super::admission`]), the quarantine task ([`super::quarantine`]), log
//! proofs ([`super::logproof`]) and the refusal ring ([`super::refusals`]) all sit on these typed
//! operations; none of them knows a key layout or writes a column family of its own.
//!
//! `inbox` keys: `r ‖ record id` → [`Entry`]; `e ‖ envelope id` → [`EnvelopeEntry`];
//! `l ‖ peer` → [`Held`] (the peer's largest verified checkpoint); `x ‖ at ‖ n` → [`Refusal`].
//! `quarantine` keys: `q ‖ id` → [`QEntry`]; `w ‖ missing id ‖ id` (waiters);
//! `c ‖ SHA-256(commitment) ‖ qseq` → id (quarantined records per commitment, in order).

use super::codes::{self, Decision};
use super::db;
use crate::error::Error;
use crate::ledger::{Batch, Store};
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::signing::RecordId;
use prost::Message;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;

const INBOX: &str = "inbox";
const QUARANTINE: &str = "quarantine";

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

/// The largest checkpoint of a peer verified here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// Tree size.
    pub size: u64,
    /// Root hash, hex.
    pub root: String,
}

/// A refused envelope or call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refusal {
    /// The peer it claimed to come from.
    pub peer: String,
    /// The reason code.
    pub code: String,
    /// Detail.
    pub detail: String,
    /// When.
    pub at: i64,
}

/// A quarantined record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QEntry {
    /// The peer it came from.
    pub peer: String,
    /// The envelope that carried it.
    #[serde(with = "db::serde_bytes::id")]
    pub envelope_id: RecordId,
    /// The signed record (encoded `SignedRecord`), exactly as received.
    #[serde(with = "db::serde_bytes::b64")]
    pub signed: Vec<u8>,
    /// Its commitment.
    pub commitment: String,
    /// When it was quarantined (Unix ms).
    pub since: i64,
    /// Quarantine order.
    pub qseq: u64,
    /// The admission declaration that opened the quarantine.
    #[serde(with = "db::serde_bytes::id")]
    pub admission_id: RecordId,
    /// The record ids it waits for.
    #[serde(with = "db::serde_bytes::ids")]
    pub missing: Vec<RecordId>,
    /// The quarantine code ("" in entries written before it was kept: `missing_basis`).
    #[serde(default)]
    pub code: String,
    /// The time to apply it at once released ([`crate::federation::check::Checked::at`]).
    #[serde(default)]
    pub at: Option<i64>,
}

impl QEntry {
    /// The quarantine code.
    pub fn code(&self) -> &str {
        if self.code.is_empty() {
            codes::MISSING_BASIS
        } else {
            &self.code
        }
    }

    /// Whether it waits for a decision rather than for its basis (`unproven`: only the operator
    /// or the timeout closes it).
    pub fn unproven(&self) -> bool {
        self.code == codes::UNPROVEN
    }

    /// The record's author, if it decodes.
    pub fn author(&self) -> Option<accord_proto::pb::record::v1::PartyRef> {
        let s = SignedRecord::decode(self.signed.as_slice()).ok()?;
        Record::decode(s.payload.as_ref()).ok()?.author
    }
}

fn entry_key(id: &RecordId) -> Vec<u8> {
    db::key(&[b"r", id])
}

fn envelope_key(id: &RecordId) -> Vec<u8> {
    db::key(&[b"e", id])
}

fn held_key(peer: &str) -> Vec<u8> {
    db::key(&[b"l", peer.as_bytes()])
}

fn q_key(id: &RecordId) -> Vec<u8> {
    db::key(&[b"q", id])
}

fn w_key(missing: &RecordId, id: &RecordId) -> Vec<u8> {
    db::key(&[b"w", missing, id])
}

fn c_prefix(commitment: &str) -> Vec<u8> {
    db::prefix(&[b"c", &Sha256::digest(commitment.as_bytes())])
}

fn c_key(commitment: &str, qseq: u64) -> Vec<u8> {
    let mut k = c_prefix(commitment);
    k.extend_from_slice(&qseq.to_be_bytes());
    k
}

/// Typed access to the admission decisions (cf `inbox` and `quarantine`).
#[derive(Debug, Clone)]
pub struct Decisions {
    store: Arc<Store>,
}

impl Decisions {
    /// The decisions kept in `store` (opened with [`db::CFS`]).
    pub fn new(store: Arc<Store>) -> Decisions {
        Decisions { store }
    }

    /// A new write; apply it with [`Decisions::write`].
    pub fn batch(&self) -> Batch {
        Batch::default()
    }

    /// Writes `batch` (synced), off the async runtime.
    pub async fn write(&self, batch: Batch) -> Result<(), Error> {
        let s = self.store.clone();
        tokio::task::spawn_blocking(move || s.write(batch, true))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
    }

    /// Writes `batch` (synced), blocking.
    pub fn write_blocking(&self, batch: Batch) -> Result<(), Error> {
        self.store.write(batch, true)
    }

    // --- inbox: records, envelopes, held checkpoints ---

    /// The decision kept for a record.
    pub fn entry(&self, id: &RecordId) -> Result<Option<Entry>, Error> {
        db::get(&self.store, INBOX, &entry_key(id))
    }

    /// Keeps a record's decision.
    pub fn put_entry(&self, batch: &mut Batch, id: &RecordId, e: &Entry) -> Result<(), Error> {
        db::put(batch, &self.store, INBOX, &entry_key(id), e)
    }

    /// A recorded envelope.
    pub fn envelope(&self, id: &RecordId) -> Result<Option<EnvelopeEntry>, Error> {
        db::get(&self.store, INBOX, &envelope_key(id))
    }

    /// Keeps an envelope and its answer.
    pub fn put_envelope(
        &self,
        batch: &mut Batch,
        id: &RecordId,
        e: &EnvelopeEntry,
    ) -> Result<(), Error> {
        db::put(batch, &self.store, INBOX, &envelope_key(id), e)
    }

    /// The largest checkpoint of `peer` verified here, if any.
    pub fn held(&self, peer: &str) -> Result<Option<Held>, Error> {
        db::get(&self.store, INBOX, &held_key(peer))
    }

    /// Keeps `h` as `peer`'s largest verified checkpoint.
    pub fn put_held(&self, batch: &mut Batch, peer: &str, h: &Held) -> Result<(), Error> {
        db::put(batch, &self.store, INBOX, &held_key(peer), h)
    }

    // --- quarantine ---

    /// One quarantined record.
    pub fn quarantined(&self, id: &RecordId) -> Result<Option<QEntry>, Error> {
        db::get(&self.store, QUARANTINE, &q_key(id))
    }

    /// How many records are quarantined: counts keys, decodes nothing (metrics, status).
    pub fn quarantine_size(&self) -> Result<usize, Error> {
        db::count(&self.store, QUARANTINE, b"q\0")
    }

    /// Every quarantined record, in key order.
    pub fn all_quarantined(&self) -> Result<Vec<(RecordId, QEntry)>, Error> {
        db::scan(&self.store, QUARANTINE, b"q\0", usize::MAX)?
            .into_iter()
            .map(|(k, v)| {
                let id: RecordId = k[2..]
                    .try_into()
                    .map_err(|_| Error::Storage("quarantine: bad key".into()))?;
                Ok((id, db::decode(QUARANTINE, &v)?))
            })
            .collect()
    }

    /// Adds a quarantined record (and its waits) to `batch`.
    pub fn put_quarantined(
        &self,
        batch: &mut Batch,
        id: &RecordId,
        q: &QEntry,
    ) -> Result<(), Error> {
        db::put(batch, &self.store, QUARANTINE, &q_key(id), q)?;
        for m in &q.missing {
            db::put(batch, &self.store, QUARANTINE, &w_key(m, id), &())?;
        }
        if q.unproven() {
            // An unproven record holds back nothing of its commitment: a peer cannot block a
            // commitment with records its own log does not contain.
            return Ok(());
        }
        db::put(
            batch,
            &self.store,
            QUARANTINE,
            &c_key(&q.commitment, q.qseq),
            &hex::encode(id),
        )
    }

    /// Replaces what a quarantined record waits for.
    pub fn set_missing(
        &self,
        batch: &mut Batch,
        id: &RecordId,
        q: &QEntry,
        missing: Vec<RecordId>,
    ) -> Result<(), Error> {
        for m in &q.missing {
            db::delete(batch, &self.store, QUARANTINE, &w_key(m, id))?;
        }
        for m in &missing {
            db::put(batch, &self.store, QUARANTINE, &w_key(m, id), &())?;
        }
        let updated = QEntry {
            missing,
            ..q.clone()
        };
        db::put(batch, &self.store, QUARANTINE, &q_key(id), &updated)
    }

    /// Removes a quarantined record (it closed).
    pub fn forget_quarantined(
        &self,
        batch: &mut Batch,
        id: &RecordId,
        q: &QEntry,
    ) -> Result<(), Error> {
        db::delete(batch, &self.store, QUARANTINE, &q_key(id))?;
        for m in &q.missing {
            db::delete(batch, &self.store, QUARANTINE, &w_key(m, id))?;
        }
        db::delete(
            batch,
            &self.store,
            QUARANTINE,
            &c_key(&q.commitment, q.qseq),
        )
    }

    /// Records waiting for `id`.
    pub fn waiters(&self, id: &RecordId) -> Result<Vec<RecordId>, Error> {
        let p = db::prefix(&[b"w", id]);
        Ok(db::scan(&self.store, QUARANTINE, &p, usize::MAX)?
            .into_iter()
            .filter_map(|(k, _)| k[p.len()..].try_into().ok())
            .collect())
    }

    /// The records of `commitment` quarantined (waiting for their basis), with their
    /// quarantine order, oldest first.
    pub fn quarantined_in(&self, commitment: &str) -> Result<Vec<(u64, RecordId)>, Error> {
        let p = c_prefix(commitment);
        let mut out = Vec::new();
        for (k, v) in db::scan(&self.store, QUARANTINE, &p, usize::MAX)? {
            let qseq = k[p.len()..]
                .try_into()
                .map(u64::from_be_bytes)
                .unwrap_or(u64::MAX);
            let id: String = db::decode(QUARANTINE, &v)?;
            if let Ok(Ok(id)) = hex::decode(id).map(<RecordId>::try_from) {
                out.push((qseq, id));
            }
        }
        Ok(out)
    }
}

// --- the refusal ring (cf `inbox`, `x` keys; policy in `super::refusals`) ---

/// How many refusals are kept.
pub fn refusal_count(store: &Store) -> Result<usize, Error> {
    db::count(store, INBOX, b"x\0")
}

/// Keeps refusal `r` (the `n`-th of this process) and deletes the oldest while more than `max`
/// are kept or they are older than `cutoff`; `count` is how many were kept before. Returns how
/// many are kept after.
pub fn put_refusal(
    store: &Store,
    r: &Refusal,
    n: u64,
    count: usize,
    max: usize,
    cutoff: i64,
) -> Result<usize, Error> {
    let mut batch = Batch::default();
    let k = db::key(&[b"x", &r.at.to_be_bytes(), &n.to_be_bytes()]);
    db::put(&mut batch, store, INBOX, &k, r)?;
    let count = prune_into(store, &mut batch, count + 1, max, cutoff)?;
    store.write(batch, false)?;
    Ok(count)
}

/// Retention of the refusal ring (issue 15, item 4), off every write path: deletes the oldest
/// refusals while more than `max` are kept (`count` before) or they are older than `cutoff`.
/// Returns how many are kept after. Refusals are operational: no record, no decision about a
/// record and nothing a peer was answered with is among them.
pub fn prune_refusals(
    store: &Store,
    count: usize,
    max: usize,
    cutoff: i64,
) -> Result<usize, Error> {
    let mut batch = Batch::default();
    let kept = prune_into(store, &mut batch, count, max, cutoff)?;
    if !batch.is_empty() {
        store.write(batch, false)?;
    }
    Ok(kept)
}

/// Adds the deletions of [`prune_refusals`] to `batch`; returns how many are kept after.
fn prune_into(
    store: &Store,
    batch: &mut Batch,
    count: usize,
    max: usize,
    cutoff: i64,
) -> Result<usize, Error> {
    let mut count = count;
    let mut drop = Vec::new();
    store.scan_extra(INBOX, b"x\0", |key, _| {
        if !key.starts_with(b"x\0") {
            return false;
        }
        let at = key
            .get(2..10)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(i64::from_be_bytes)
            .unwrap_or(i64::MIN);
        if count <= max && at >= cutoff {
            return false;
        }
        drop.push(key.to_vec());
        count = count.saturating_sub(1);
        true
    })?;
    for key in drop {
        db::delete(batch, store, INBOX, &key)?;
    }
    Ok(count)
}

/// A page of refusals, newest first, starting after `token` (from a previous page; "" for the
/// first). Returns the page and the token of the next ("" at the end).
pub fn refusal_page(
    store: &Store,
    token: &str,
    size: usize,
) -> Result<(Vec<Refusal>, String), Error> {
    let from = if token.is_empty() {
        b"x\x01".to_vec()
    } else {
        hex::decode(token)
            .ok()
            .filter(|k| k.starts_with(b"x\0"))
            .ok_or_else(|| Error::invalid("page_token", "not a token from ListRefusals"))?
    };
    let mut out = Vec::new();
    let mut last = Vec::new();
    let mut more = false;
    let mut bad = None;
    store.scan_extra_rev(INBOX, &from, |k, v| {
        if !k.starts_with(b"x\0") {
            return false;
        }
        if !token.is_empty() && k == from.as_slice() {
            return true;
        }
        if out.len() >= size {
            more = true;
            return false;
        }
        match db::decode(INBOX, v) {
            Ok(r) => out.push(r),
            Err(e) => {
                bad = Some(e);
                return false;
            }
        }
        last = k.to_vec();
        true
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
    let next = if more && !last.is_empty() {
        hex::encode(last)
    } else {
        String::new()
    };
    Ok((out, next))
}
