//! Quarantine (seed 000, "Federation admission": `["quarantined", code]` — "Kept with no local
//! effect; later closes as admitted or rejected").
//!
//! A quarantined record is kept in the `quarantine` column family, not in the ledger, so the
//! kernel never sees it. It waits on the records it is missing: those named in its `basis`, any
//! earlier quarantined record of the same commitment (so a commitment's records apply in their
//! order), and — for a record of a commitment this node does not know yet — the commitment's
//! request. With three organisations a commitment's records reach a node by different peers'
//! queues, so a promise can arrive before the request it answers (the request's author's node
//! may still be backfilling this node); rejecting it as `unknown_commitment` lost it for good.
//! The request is not named by id in the waiting record, so it waits on [`commitment_key`] of
//! its commitment instead. The router, which tails the ledger, wakes the waiters of every record
//! that enters it (and of the commitment key of every request for an awaited commitment); a
//! quarantined record whose basis is all known is then appended and decided by the kernel like
//! any other. It closes:
//!
//! * as admitted (or `invalid_operation:<code>`) once its basis arrived;
//! * as `["rejected", "quarantine_timeout"]` after `federation.quarantine_timeout_ms`;
//! * by hand (`AdminService.DecideQuarantined`), declared by `<org>/operator`.
//!
//! Each closing is a new admission declaration whose `closes` names the one that opened the
//! quarantine; a timeout or an operator's decision is declared at the time the quarantine opened
//! (a release at the record's recorded time), so a retry after a crash re-creates the same
//! declaration ([`super::declaration`]). The records are kept by [`super::decisions`].

use super::check::Checked;
use super::codes::{self, Decision};
use super::decisions::Decisions;
use super::declaration::Declaration;
use super::error::FedError;
use crate::federation::FedContext;
use crate::ledger::Append;
use crate::ledger::Batch;
use crate::projection::WORK_SERVICE;
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::signing::RecordId;
use prost::Message;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use super::decisions::QEntry;

/// The quarantine's order counter and wake-up channel.
pub struct Quarantine {
    decisions: Decisions,
    next: AtomicU64,
    tx: mpsc::UnboundedSender<RecordId>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<RecordId>>>,
    /// Commitments that quarantined records wait for ([`commitment_key`]): the router decodes
    /// a routed record to look for their requests only while this is not empty.
    awaited: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quarantine").finish()
    }
}

impl Quarantine {
    /// Opens the quarantine over the decisions store.
    pub fn open(decisions: Decisions) -> Result<Quarantine, FedError> {
        let all = decisions.all_quarantined()?;
        let next = all.iter().map(|(_, q)| q.qseq + 1).max().unwrap_or(0);
        let awaited = all
            .iter()
            .filter(|(_, q)| q.missing.contains(&commitment_key(&q.commitment)))
            .map(|(_, q)| q.commitment.clone())
            .collect();
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Quarantine {
            decisions,
            next: AtomicU64::new(next),
            tx,
            rx: Mutex::new(Some(rx)),
            awaited: Mutex::new(awaited),
        })
    }

    /// Notes that a record waits for `commitment`'s request (before its quarantine is written:
    /// a request routed in between then wakes it, or the wake after the write finds it).
    pub(crate) fn await_commitment(&self, commitment: &str) {
        if let Ok(mut a) = self.awaited.lock() {
            a.insert(commitment.to_string());
        }
    }

    /// Whether any quarantined record waits for a commitment's request (the router's fast
    /// path: nothing to look for).
    pub(crate) fn awaits_commitments(&self) -> bool {
        self.awaited.lock().map_or(true, |a| !a.is_empty())
    }

    /// The records waiting for `commitment`'s request, if it is awaited; it is no longer
    /// (a record still missing it after it is looked at again is noted again by [`process`]).
    pub(crate) fn commitment_arrived(
        &self,
        commitment: &str,
    ) -> Result<Vec<RecordId>, crate::error::Error> {
        let awaited = self
            .awaited
            .lock()
            .map_or(true, |mut a| a.remove(commitment));
        if !awaited {
            return Ok(Vec::new());
        }
        self.decisions.waiters(&commitment_key(commitment))
    }

    /// After a quarantine of `commitment` closed: the commitment is no longer awaited once no
    /// quarantined record waits for its request (a timeout or an operator's decision closes
    /// them without the request ever coming; left in the set, the router would decode every
    /// record it routes until a restart).
    fn closed_in(&self, commitment: &str) -> Result<(), crate::error::Error> {
        let key = commitment_key(commitment);
        if self.awaited.lock().map_or(true, |a| a.contains(commitment))
            && self.decisions.waiters(&key)?.is_empty()
            && let Ok(mut a) = self.awaited.lock()
        {
            a.remove(commitment);
        }
        Ok(())
    }

    /// Adds a quarantined record to `batch`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &self,
        batch: &mut Batch,
        c: &Checked,
        peer: &str,
        envelope_id: &RecordId,
        admission_id: &RecordId,
        missing: &[RecordId],
        code: &str,
        now: i64,
    ) -> Result<(), FedError> {
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
            at: c.at,
        };
        Ok(self.decisions.put_quarantined(batch, &c.id, &q)?)
    }

    /// One quarantined record.
    pub fn get(&self, id: &RecordId) -> Result<Option<QEntry>, FedError> {
        Ok(self.decisions.quarantined(id)?)
    }

    /// How many records are quarantined: counts keys, decodes nothing (metrics, status).
    pub fn size(&self) -> Result<usize, crate::error::Error> {
        self.decisions.quarantine_size()
    }

    /// Every quarantined record, oldest first.
    pub fn list(&self) -> Result<Vec<(RecordId, QEntry)>, crate::error::Error> {
        let mut v = self.decisions.all_quarantined()?;
        v.sort_by_key(|(_, q)| q.qseq);
        Ok(v)
    }

    /// Records waiting for `id`.
    pub fn waiters(&self, id: &RecordId) -> Result<Vec<RecordId>, crate::error::Error> {
        self.decisions.waiters(id)
    }

    /// Asks the quarantine task to look at these records again.
    pub fn wake(&self, ids: impl IntoIterator<Item = RecordId>) {
        for id in ids {
            let _ = self.tx.send(id);
        }
    }

    pub(crate) fn take_rx(&self) -> Option<mpsc::UnboundedReceiver<RecordId>> {
        self.rx.lock().ok()?.take()
    }
}

/// What a record of a commitment this node does not know waits on in place of the request it
/// cannot name: a hash of the commitment's id under its own domain (never a record id: those
/// hash a payload type and a payload, `accord_proto::signing::record_id`).
pub(crate) fn commitment_key(commitment: &str) -> RecordId {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"accord.quarantine/awaited-commitment\0");
    h.update(commitment.as_bytes());
    h.finalize().into()
}

/// Whether `c` is a Work record whose commitment this node does not know, and that the kernel
/// would therefore reject as `unknown_commitment` (a request creates its commitment; admission
/// declarations, runs, envelopes and ticks are not such records), unless its request is
/// `creating` earlier in the same envelope.
fn commitment_unknown(cx: &FedContext, c: &Checked, creating: &HashSet<String>) -> bool {
    use accord_kernel::Operation as Op;
    if matches!(
        c.input.op,
        Op::Request(_) | Op::Admission { .. } | Op::Run(_) | Op::Envelope(_) | Op::Tick(_)
    ) || creating.contains(&c.record.commitment_id)
    {
        return false;
    }
    cx.projection
        .read()
        .is_ok_and(|p| p.get(&c.record.commitment_id).is_none())
}

/// What `c` is missing: `basis` records that are neither in the ledger nor `coming` in the same
/// envelope, its commitment's request while the commitment is unknown here and not `creating`
/// in the same envelope ([`commitment_key`]), and quarantined records of the same commitment
/// (older than `before`, if given) — except those that wait, directly or through others, for
/// `c` itself (they are released by it). `unwritten` are records of this commitment quarantined
/// earlier in the same envelope.
pub(crate) fn missing(
    cx: &FedContext,
    c: &Checked,
    coming: &HashSet<RecordId>,
    creating: &HashSet<String>,
    before: Option<u64>,
    unwritten: &[(RecordId, Vec<RecordId>)],
) -> Result<Vec<RecordId>, FedError> {
    let store = cx.ledger.store();
    let decisions = &cx.federation.decisions;
    let mut basis: Vec<RecordId> = c
        .input
        .basis
        .iter()
        .filter(|b| !coming.contains(*b))
        .copied()
        .collect();
    // A peer's decision about a record (its Work service party's admission: what a
    // commitment's home sends as the order every holder follows, issue 26) waits for that
    // record, and the commitment's later records wait behind it (commitment order, below).
    if let accord_kernel::Operation::Admission {
        record_id: Some(rid),
        ..
    } = &c.input.op
        && !coming.contains(rid)
        && !basis.contains(rid)
    {
        basis.push(*rid);
    }
    let mut out: Vec<RecordId> = Vec::new();
    if commitment_unknown(cx, c, creating) {
        cx.federation
            .quarantine
            .await_commitment(&c.record.commitment_id);
        out.push(commitment_key(&c.record.commitment_id));
    }
    for (b, seq) in basis.iter().zip(store.seqs_of(&basis)?) {
        if seq.is_none() && !out.contains(b) {
            out.push(*b);
        }
    }
    // Every quarantined record of the commitment, and whether it is older than `c` (only older
    // ones hold `c` back: commitment order).
    let mut same: Vec<(RecordId, Vec<RecordId>, bool)> = unwritten
        .iter()
        .map(|(id, m)| (*id, m.clone(), true))
        .collect();
    for (qseq, id) in decisions.quarantined_in(&c.record.commitment_id)? {
        if id == c.id {
            continue;
        }
        if let Some(q) = decisions.quarantined(&id)? {
            same.push((id, q.missing, before.is_none_or(|b| qseq < b)));
        }
    }
    // Those released (transitively) by `c` do not hold it back. The chain may run through
    // records younger than `c` (an older record waits for a basis that arrived after `c` and
    // itself waits for `c`), so the closure is over all of them; without that, such a chain
    // is a cycle of waits that only the quarantine timeout breaks.
    let mut releases: HashSet<RecordId> = HashSet::from([c.id]);
    // A request releases the records that wait for its commitment to be known.
    if matches!(c.input.op, accord_kernel::Operation::Request(_)) {
        releases.insert(commitment_key(&c.record.commitment_id));
    }
    loop {
        let before_len = releases.len();
        for (id, q, _) in &same {
            if q.iter().any(|m| releases.contains(m)) {
                releases.insert(*id);
            }
        }
        if releases.len() == before_len {
            break;
        }
    }
    for (id, _, older) in same {
        if older && !releases.contains(&id) && !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

/// How a quarantine closes.
#[derive(Debug, Clone)]
pub enum Close {
    /// Its basis arrived: the kernel decides (the record, if already decoded).
    Release(Option<Checked>),
    /// The operator decided.
    Operator {
        /// Admit (the kernel still decides) or reject.
        admit: bool,
        /// The operator's reason.
        reason: String,
        /// The record, if already decoded.
        checked: Option<Checked>,
    },
    /// It timed out.
    Timeout,
}

async fn close(
    cx: &FedContext,
    id: RecordId,
    q: QEntry,
    how: Close,
) -> Result<(Decision, RecordId), FedError> {
    let now = cx.clock.now_ms();
    let operator = super::OPERATOR_PARTY;
    // At the commitment's home, the record and the decision about it are adjacent (as in
    // admission: the decision is where every other holder applies it, issue 26).
    let ledger = cx.ledger.hold(cx.homed_here(&q.commitment)).await;
    // The declared time depends on the record and the decision only (issue 16): the time the
    // quarantine opened, or the released record's recorded time.
    let (decision, author, declared_at) = match &how {
        Close::Timeout => (
            Decision::Rejected(codes::QUARANTINE_TIMEOUT.into()),
            WORK_SERVICE,
            q.since,
        ),
        Close::Operator { admit: false, .. } => (
            Decision::Rejected(codes::OPERATOR.into()),
            operator,
            q.since,
        ),
        Close::Release(c)
        | Close::Operator {
            admit: true,
            checked: c,
            ..
        } => {
            let c = match c {
                Some(c) => c.clone(),
                None => kept(id, &q)?,
            };
            let r = ledger
                .append(Append {
                    id,
                    signed: c.signed,
                    input: c.input,
                    at: c.at,
                })
                .await?;
            let d = codes::decision_of(&r.outcome);
            match how {
                Close::Release(_) => (d, WORK_SERVICE, r.applied_at),
                _ => (d, operator, q.since),
            }
        }
    };
    let a = Declaration {
        author,
        peer: &q.peer,
        record_id: id,
        commitment: &q.commitment,
        decision: &decision,
        closes: Some(q.admission_id),
        declared_at,
    }
    // Signed: whether the peer proves declarations by the checkpoint was a property of the
    // envelope, long answered (and a quarantine's close is rare).
    .seal(Some(&cx.signer), cx.name())?;
    let admission_id = a.id;
    let r = ledger.append(a).await?;
    drop(ledger);
    let decisions = &cx.federation.decisions;
    let mut batch = decisions.batch();
    decisions.forget_quarantined(&mut batch, &id, &q)?;
    if let Some(mut e) = decisions.entry(&id)? {
        e.decision = decision.clone();
        e.admission_id = admission_id;
        e.admission_seq = r.sequence;
        e.decided_at = now;
        if let Close::Operator { reason, .. } = &how {
            e.note = reason.clone();
        }
        decisions.put_entry(&mut batch, &id, &e)?;
    }
    decisions.write(batch).await?;
    tracing::info!(peer = %q.peer, record_id = %hex::encode(id), decision = %decision, author, admission_seq = r.sequence, "federation: quarantine closed");
    cx.metrics.admission(&decision);
    let fed = &cx.federation;
    fed.quarantine.closed_in(&q.commitment)?;
    fed.quarantine.wake(fed.quarantine.waiters(&id)?);
    Ok((decision, admission_id))
}

/// The record a quarantine kept, decoded (it passed the checks when it was kept).
fn kept(id: RecordId, q: &QEntry) -> Result<Checked, FedError> {
    let signed = SignedRecord::decode(q.signed.as_slice())
        .map_err(|e| FedError::corrupt("quarantined record", e))?;
    let mut c =
        Checked::decode(id, signed).map_err(|e| FedError::corrupt("quarantined record", e))?;
    c.at = q.at;
    Ok(c)
}

/// Looks at a quarantined record again: released when nothing is missing any more.
pub async fn process(cx: &FedContext, id: RecordId) -> Result<(), FedError> {
    let fed = &cx.federation;
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
    // Decoded once: released, the same record goes to the kernel.
    let c = kept(id, &q)?;
    let now_missing = missing(cx, &c, &HashSet::new(), &HashSet::new(), Some(q.qseq), &[])?;
    if now_missing.is_empty() {
        close(cx, id, q, Close::Release(Some(c))).await?;
    } else if now_missing != q.missing {
        let mut batch = fed.decisions.batch();
        fed.decisions
            .set_missing(&mut batch, &id, &q, now_missing)?;
        fed.decisions.write(batch).await?;
    }
    Ok(())
}

/// Admits or rejects a quarantined record by hand; returns the admission declaration's id.
pub async fn decide(
    cx: &FedContext,
    id: RecordId,
    admit: bool,
    reason: String,
) -> Result<(Decision, RecordId), crate::error::Error> {
    let fed = &cx.federation;
    let q = fed
        .quarantine
        .get(&id)?
        .ok_or(FedError::NotQuarantined(id))?;
    let lock = fed.peer_lock(&q.peer);
    let _g = lock.lock().await;
    let q = fed
        .quarantine
        .get(&id)?
        .ok_or(FedError::NotQuarantined(id))?;
    tracing::info!(record_id = %hex::encode(id), admit, reason = %reason, "federation: operator decision");
    Ok(close(
        cx,
        id,
        q,
        Close::Operator {
            admit,
            reason,
            checked: None,
        },
    )
    .await?)
}

/// Rejects every quarantined record older than the timeout.
pub async fn sweep(cx: &FedContext) -> Result<(), FedError> {
    let timeout = cx.config.quarantine_timeout_ms as i64;
    let now = cx.clock.now_ms();
    let fed = &cx.federation;
    for (id, q) in fed.quarantine.list()? {
        if now - q.since < timeout {
            continue;
        }
        let lock = fed.peer_lock(&q.peer);
        let _g = lock.lock().await;
        if let Some(q) = fed.quarantine.get(&id)? {
            close(cx, id, q, Close::Timeout).await?;
        }
    }
    Ok(())
}
/// The quarantine task: releases records whose basis arrived, and times quarantines out.
pub async fn run(cx: FedContext, shutdown: CancellationToken) {
    let fed = &cx.federation;
    let Some(mut rx) = fed.quarantine.take_rx() else {
        return;
    };
    // Everything quarantined is looked at once at start-up (a crash may have come between a
    // basis entering the ledger and its waiters being woken).
    match fed.quarantine.list() {
        Ok(all) => fed.quarantine.wake(all.into_iter().map(|(id, _)| id)),
        Err(e) => tracing::warn!(error = %e, "quarantine: list"),
    }
    let period = (cx.config.quarantine_timeout_ms / 4).clamp(50, 1000);
    let mut tick = tokio::time::interval(Duration::from_millis(period));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(id) = rx.recv() => {
                if let Err(e) = process(&cx, id).await {
                    tracing::warn!(record_id = %hex::encode(id), error = %e, "quarantine: re-evaluation failed");
                }
            }
            _ = tick.tick() => {
                if let Err(e) = sweep(&cx).await {
                    tracing::warn!(error = %e, "quarantine: timeout sweep failed");
                }
            }
        }
    }
}
