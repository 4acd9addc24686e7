//! Quarantine (seed 000, "Federation admission": `["quarantined", code]` — "Kept with no local
//! effect; later closes as admitted or rejected").
//!
//! A quarantined record is kept in the `quarantine` column family, not in the ledger, so the
//! kernel never sees it. It waits on the records it is missing: those named in its `basis`, and
//! any earlier quarantined record of the same commitment (so a commitment's records apply in
//! their order). The router, which tails the ledger, wakes the waiters of every record that
//! enters it; a quarantined record whose basis is all known is then appended and decided by the
//! kernel like any other. It closes:
//!
//! * as admitted (or `invalid_operation:<code>`) once its basis arrived;
//! * as `["rejected", "quarantine_timeout"]` after `federation.quarantine_timeout_ms`;
//! * by hand (`AdminService.DecideQuarantined`), declared by `<org>/operator`.
//!
//! Each closing is a new admission declaration whose `closes` names the one that opened the
//! quarantine. Keys: `q ‖ id` → [`QEntry`]; `w ‖ missing id ‖ id` (waiters);
//! `c ‖ SHA-256(commitment) ‖ qseq` → id (quarantined records per commitment, in order).

use super::codes::{self, Decision};
use super::db;
use super::inbox::{self, Checked, Entry};
use crate::error::Error;
use crate::ledger::{Append, Store};
use crate::node::Node;
use crate::projection::WORK_SERVICE;
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::signing::RecordId;
use prost::Message;
use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const CF: &str = "quarantine";

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

/// The quarantine's order counter and wake-up channel.
pub struct Quarantine {
    store: Arc<Store>,
    next: AtomicU64,
    tx: mpsc::UnboundedSender<RecordId>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<RecordId>>>,
}

impl std::fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quarantine").finish()
    }
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

impl Quarantine {
    /// Opens the quarantine.
    pub fn open(store: Arc<Store>) -> Result<Quarantine, Error> {
        let mut next = 0;
        for (_, v) in db::scan(&store, CF, b"q\0", usize::MAX)? {
            let q: QEntry = db::decode(CF, &v)?;
            next = next.max(q.qseq + 1);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Quarantine {
            store,
            next: AtomicU64::new(next),
            tx,
            rx: Mutex::new(Some(rx)),
        })
    }

    /// Adds a quarantined record to `batch`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &self,
        batch: &mut WriteBatch,
        _node: &Node,
        c: &Checked,
        peer: &str,
        envelope_id: &RecordId,
        admission_id: &RecordId,
        missing: &[RecordId],
        code: &str,
        now: i64,
    ) -> Result<(), Error> {
        let qseq = self.next.fetch_add(1, Ordering::Relaxed);
        let q = QEntry {
            peer: peer.to_string(),
            envelope_id: *envelope_id,
            signed: c.signed.encode_to_vec(),
            commitment: c.record.commitment_id.clone(),
            since: now,
            qseq,
            admission_id: *admission_id,
            missing: missing.to_vec(),
            code: code.to_string(),
        };
        db::put(batch, &self.store, CF, &q_key(&c.id), &q)?;
        for m in missing {
            db::put(batch, &self.store, CF, &w_key(m, &c.id), &())?;
        }
        if q.unproven() {
            // An unproven record holds back nothing of its commitment: a peer cannot block a
            // commitment with records its own log does not contain.
            return Ok(());
        }
        db::put(
            batch,
            &self.store,
            CF,
            &c_key(&q.commitment, qseq),
            &hex::encode(c.id),
        )
    }

    /// One quarantined record.
    pub fn get(&self, id: &RecordId) -> Result<Option<QEntry>, Error> {
        db::get(&self.store, CF, &q_key(id))
    }

    /// How many records are quarantined: counts keys, decodes nothing (metrics, status).
    pub fn size(&self) -> Result<usize, Error> {
        let mut it = self.store.db().raw_iterator_cf(self.store.cf(CF)?);
        it.seek(b"q\0");
        let mut n = 0;
        while it.key().is_some_and(|k| k.starts_with(b"q\0")) {
            n += 1;
            it.next();
        }
        it.status().map_err(|e| Error::Storage(e.into_string()))?;
        Ok(n)
    }

    /// Every quarantined record, oldest first.
    pub fn list(&self) -> Result<Vec<(RecordId, QEntry)>, Error> {
        let mut v: Vec<(RecordId, QEntry)> = db::scan(&self.store, CF, b"q\0", usize::MAX)?
            .into_iter()
            .map(|(k, v)| {
                let id: RecordId = k[2..]
                    .try_into()
                    .map_err(|_| Error::Storage("quarantine: bad key".into()))?;
                Ok((id, db::decode(CF, &v)?))
            })
            .collect::<Result<_, Error>>()?;
        v.sort_by_key(|(_, q)| q.qseq);
        Ok(v)
    }

    /// Records waiting for `id`.
    pub fn waiters(&self, id: &RecordId) -> Result<Vec<RecordId>, Error> {
        let p = db::prefix(&[b"w", id]);
        Ok(db::scan(&self.store, CF, &p, usize::MAX)?
            .into_iter()
            .filter_map(|(k, _)| k[p.len()..].try_into().ok())
            .collect())
    }

    /// Asks the quarantine task to look at these records again.
    pub fn wake(&self, ids: impl IntoIterator<Item = RecordId>) {
        for id in ids {
            let _ = self.tx.send(id);
        }
    }

    fn take_rx(&self) -> Option<mpsc::UnboundedReceiver<RecordId>> {
        self.rx.lock().ok()?.take()
    }

    fn forget(&self, batch: &mut WriteBatch, id: &RecordId, q: &QEntry) -> Result<(), Error> {
        db::delete(batch, &self.store, CF, &q_key(id))?;
        for m in &q.missing {
            db::delete(batch, &self.store, CF, &w_key(m, id))?;
        }
        db::delete(batch, &self.store, CF, &c_key(&q.commitment, q.qseq))
    }
}

/// What `c` is missing: `basis` records that are neither in the ledger nor `coming` in the same
/// envelope, and quarantined records of the same commitment (older than `before`, if given) —
/// except those that wait, directly or through others, for `c` itself (they are released by it).
/// `unwritten` are records of this commitment quarantined earlier in the same envelope.
pub(crate) fn missing(
    node: &Node,
    c: &Checked,
    coming: &HashSet<RecordId>,
    before: Option<u64>,
    unwritten: &[(RecordId, Vec<RecordId>)],
) -> Result<Vec<RecordId>, Error> {
    let store = node.ledger.store();
    let basis: Vec<RecordId> = c
        .input
        .basis
        .iter()
        .filter(|b| !coming.contains(*b))
        .copied()
        .collect();
    let mut out: Vec<RecordId> = Vec::new();
    for (b, seq) in basis.iter().zip(store.seqs_of(&basis)?) {
        if seq.is_none() && !out.contains(b) {
            out.push(*b);
        }
    }
    let p = c_prefix(&c.record.commitment_id);
    let mut same: Vec<(RecordId, Vec<RecordId>)> = unwritten.to_vec();
    for (k, v) in db::scan(store, CF, &p, usize::MAX)? {
        let qseq = k[p.len()..]
            .try_into()
            .map(u64::from_be_bytes)
            .unwrap_or(u64::MAX);
        if before.is_some_and(|b| qseq >= b) {
            continue;
        }
        let id: String = db::decode(CF, &v)?;
        let Ok(Ok(id)) = hex::decode(id).map(<RecordId>::try_from) else {
            continue;
        };
        if id == c.id {
            continue;
        }
        if let Some(q) = db::get::<QEntry>(store, CF, &q_key(&id))? {
            same.push((id, q.missing));
        }
    }
    // Those released (transitively) by `c` do not hold it back.
    let mut releases: HashSet<RecordId> = HashSet::from([c.id]);
    loop {
        let before_len = releases.len();
        for (id, q) in &same {
            if q.iter().any(|m| releases.contains(m)) {
                releases.insert(*id);
            }
        }
        if releases.len() == before_len {
            break;
        }
    }
    for (id, _) in same {
        if !releases.contains(&id) && !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

/// How a quarantine closes.
#[derive(Debug, Clone)]
pub enum Close {
    /// Its basis arrived: the kernel decides.
    Release,
    /// The operator decided.
    Operator {
        /// Admit (the kernel still decides) or reject.
        admit: bool,
        /// The operator's reason.
        reason: String,
    },
    /// It timed out.
    Timeout,
}

async fn close(
    node: &Arc<Node>,
    id: RecordId,
    q: QEntry,
    how: Close,
) -> Result<(Decision, RecordId), Error> {
    let now = node.clock.now_ms();
    let operator = super::OPERATOR_PARTY;
    let (decision, author, declared_at) = match &how {
        Close::Timeout => (
            Decision::Rejected(codes::QUARANTINE_TIMEOUT.into()),
            WORK_SERVICE,
            now,
        ),
        Close::Operator { admit: false, .. } => {
            (Decision::Rejected(codes::OPERATOR.into()), operator, now)
        }
        Close::Release | Close::Operator { admit: true, .. } => {
            let signed = SignedRecord::decode(q.signed.as_slice())
                .map_err(|e| Error::Storage(format!("quarantine: {e}")))?;
            let record = Record::decode(signed.payload.as_ref())
                .map_err(|e| Error::Storage(format!("quarantine: {e}")))?;
            let input = crate::convert::record_from_pb(id, &record)?;
            let r = node.ledger.append(Append { id, signed, input }).await?;
            let d = if r.outcome.applied {
                Decision::Admitted
            } else {
                Decision::Rejected(codes::invalid_operation(&r.outcome.rejection_code))
            };
            match how {
                Close::Release => (d, WORK_SERVICE, r.recorded_at),
                _ => (d, operator, now),
            }
        }
    };
    let a = inbox::admission_record(
        node,
        author,
        &q.peer,
        &id,
        &q.commitment,
        &decision,
        Some(&q.admission_id),
        declared_at,
    )?;
    let admission_id = a.id;
    let r = node.ledger.append(a).await?;
    let store = node.ledger.store().clone();
    let mut batch = WriteBatch::default();
    node.federation.quarantine.forget(&mut batch, &id, &q)?;
    if let Some(mut e) = db::get::<Entry>(&store, inbox::CF, &inbox::entry_key(&id))? {
        e.decision = decision.clone();
        e.admission_id = admission_id;
        e.admission_seq = r.sequence;
        e.decided_at = now;
        if let Close::Operator { reason, .. } = &how {
            e.note = reason.clone();
        }
        db::put(&mut batch, &store, inbox::CF, &inbox::entry_key(&id), &e)?;
    }
    let s = store.clone();
    tokio::task::spawn_blocking(move || db::write(&s, batch, true))
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
    tracing::info!(peer = %q.peer, record_id = %hex::encode(id), decision = %decision, author, admission_seq = r.sequence, "federation: quarantine closed");
    node.metrics.admission(&decision);
    let fed = &node.federation;
    fed.quarantine.wake(fed.quarantine.waiters(&id)?);
    Ok((decision, admission_id))
}

/// Looks at a quarantined record again: released when nothing is missing any more.
pub async fn process(node: &Arc<Node>, id: RecordId) -> Result<(), Error> {
    let fed = &node.federation;
    let Some(q) = fed.quarantine.get(&id)? else {
        return Ok(());
    };
    let lock = fed.peer_lock(&q.peer);
    let _g = lock.lock().await;
    let Some(q) = fed.quarantine.get(&id)? else {
        return Ok(());
    };
    if q.unproven() {
        return Ok(());
    }
    let signed = SignedRecord::decode(q.signed.as_slice())
        .map_err(|e| Error::Storage(format!("quarantine: {e}")))?;
    let record = Record::decode(signed.payload.as_ref())
        .map_err(|e| Error::Storage(format!("quarantine: {e}")))?;
    let input = crate::convert::record_from_pb(id, &record)?;
    let c = Checked {
        id,
        signed,
        record,
        input,
    };
    let now_missing = missing(node, &c, &HashSet::new(), Some(q.qseq), &[])?;
    if now_missing.is_empty() {
        close(node, id, q, Close::Release).await?;
    } else if now_missing != q.missing {
        let store = node.ledger.store();
        let mut batch = WriteBatch::default();
        for m in &q.missing {
            db::delete(&mut batch, store, CF, &w_key(m, &id))?;
        }
        for m in &now_missing {
            db::put(&mut batch, store, CF, &w_key(m, &id), &())?;
        }
        let updated = QEntry {
            missing: now_missing,
            ..q
        };
        db::put(&mut batch, store, CF, &q_key(&id), &updated)?;
        db::write(store, batch, true)?;
    }
    Ok(())
}

/// Admits or rejects a quarantined record by hand; returns the admission declaration's id.
pub async fn decide(
    node: &Arc<Node>,
    id: RecordId,
    admit: bool,
    reason: String,
) -> Result<(Decision, RecordId), Error> {
    let fed = &node.federation;
    let not_found = || Error::NotFound(format!("record {} is not quarantined", hex::encode(id)));
    let q = fed.quarantine.get(&id)?.ok_or_else(not_found)?;
    let lock = fed.peer_lock(&q.peer);
    let _g = lock.lock().await;
    let q = fed.quarantine.get(&id)?.ok_or_else(not_found)?;
    tracing::info!(record_id = %hex::encode(id), admit, reason = %reason, "federation: operator decision");
    close(node, id, q, Close::Operator { admit, reason }).await
}

/// Rejects every quarantined record older than the timeout.
pub async fn sweep(node: &Arc<Node>) -> Result<(), Error> {
    let timeout = node.config.federation.quarantine_timeout_ms as i64;
    let now = node.clock.now_ms();
    let fed = &node.federation;
    for (id, q) in fed.quarantine.list()? {
        if now - q.since < timeout {
            continue;
        }
        let lock = fed.peer_lock(&q.peer);
        let _g = lock.lock().await;
        if let Some(q) = fed.quarantine.get(&id)? {
            close(node, id, q, Close::Timeout).await?;
        }
    }
    Ok(())
}

/// The quarantine task: releases records whose basis arrived, and times quarantines out.
pub async fn run(node: Arc<Node>, shutdown: CancellationToken) {
    let fed = &node.federation;
    let Some(mut rx) = fed.quarantine.take_rx() else {
        return;
    };
    // Everything quarantined is looked at once at start-up (a crash may have come between a
    // basis entering the ledger and its waiters being woken).
    match fed.quarantine.list() {
        Ok(all) => fed.quarantine.wake(all.into_iter().map(|(id, _)| id)),
        Err(e) => tracing::warn!(error = %e, "quarantine: list"),
    }
    let period = (node.config.federation.quarantine_timeout_ms / 4).clamp(50, 1000);
    let mut tick = tokio::time::interval(Duration::from_millis(period));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(id) = rx.recv() => {
                if let Err(e) = process(&node, id).await {
                    tracing::warn!(record_id = %hex::encode(id), error = %e, "quarantine: re-evaluation failed");
                }
            }
            _ = tick.tick() => {
                if let Err(e) = sweep(&node).await {
                    tracing::warn!(error = %e, "quarantine: timeout sweep failed");
                }
            }
        }
    }
}
