//! The group-commit writer thread.

use super::store::{Batch, Store, storage, tree_key};
use super::{Append, Job};
use crate::error::Error;
use accord_proto::merkle::{CompactRange, leaf_hash};
use accord_proto::pb::work::v1::{LedgerEntry, Outcome as PbOutcome};
use accord_proto::signing::RecordId;
use prost::Message;
use rocksdb::{WriteBatch, WriteOptions};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// The kernel's verdict on one record.
pub type Outcome = PbOutcome;

/// What the ledger feeds: the Work projection. It is called in ledger order, from the writer
/// thread only, exactly once per record (at append, or at restore after a restart).
pub trait Machine: Send + 'static {
    /// The decoded form of a record that `apply` needs.
    type Input: Send + 'static;
    /// Decides and applies a new record at `now` (the time it is recorded at).
    fn apply(&mut self, seq: u64, id: &RecordId, input: &Self::Input, now: i64) -> Outcome;
    /// Re-applies a stored entry at start-up (replay); must reach the same outcome.
    fn restore(&mut self, entry: &LedgerEntry);
    /// The column families the machine's persisted state lives in (created by the ledger's
    /// store at open).
    fn column_families(&self) -> &'static [&'static str] {
        &[]
    }
    /// Opens the machine's persisted state in `store` at start-up; returns the sequence from
    /// which the ledger replays the records through [`Machine::restore`] (its watermark; 0 —
    /// everything — for a machine that persists nothing).
    fn open(&mut self, store: &Arc<Store>) -> Result<u64, Error> {
        let _ = store;
        Ok(0)
    }
    /// Adds the derived state of the records applied (or restored) since the last call to
    /// `batch`, the synced write that also holds those records (issue 15: persisted
    /// projections, same batch, with the watermark). An error fails the write.
    fn persist(&mut self, store: &Store, batch: &mut Batch) -> Result<(), Error> {
        let _ = (store, batch);
        Ok(())
    }
    /// Makes everything applied or restored so far visible to readers. The writer calls it
    /// only after the batch's synced write returned (reads see only synced records), and the
    /// ledger once after the replay at start-up.
    fn publish(&mut self) {}
}

/// The answer to an append.
#[derive(Debug, Clone)]
pub struct AppendResult {
    /// The record's sequence number (leaf index).
    pub sequence: u64,
    /// The kernel's verdict.
    pub outcome: Outcome,
    /// True when the record was already in the ledger.
    pub duplicate: bool,
    /// When it was recorded.
    pub recorded_at: i64,
}

pub(super) struct Writer<M: Machine> {
    store: Arc<Store>,
    machine: M,
    next: u64,
    range: CompactRange,
    max_batch: usize,
    len_tx: watch::Sender<u64>,
    metrics: Arc<std::sync::OnceLock<crate::metrics::Metrics>>,
    clock: crate::clock::Clock,
    /// Fault injection (tests only set it): the next synced writes fail as a disk error would.
    fail_writes: Arc<std::sync::atomic::AtomicBool>,
}

type Reply = oneshot::Sender<Result<AppendResult, Error>>;

impl<M: Machine> Writer<M> {
    pub(super) fn new(
        store: Arc<Store>,
        machine: M,
        len: u64,
        max_batch: usize,
        len_tx: watch::Sender<u64>,
        clock: crate::clock::Clock,
    ) -> Result<Self, Error> {
        // The frontier of a tree of size n: its perfect subtrees, one per set bit (O(log n) reads).
        let range = CompactRange::from_source(&super::TreeNodes(&store), len)
            .map_err(|e| Error::Storage(format!("tree frontier: {e}")))?;
        Ok(Self {
            store,
            machine,
            next: len,
            range,
            max_batch,
            len_tx,
            metrics: Arc::default(),
            clock,
            fail_writes: Arc::default(),
        })
    }

    /// Reports group commits to the metrics set (later) in `metrics`.
    pub(super) fn observed(
        mut self,
        metrics: Arc<std::sync::OnceLock<crate::metrics::Metrics>>,
    ) -> Self {
        self.metrics = metrics;
        self
    }

    /// Shares the fault-injection switch (see [`super::Ledger::fail_writes`]).
    pub(super) fn faults(mut self, fail_writes: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.fail_writes = fail_writes;
        self
    }

    pub(super) fn run(mut self, mut rx: mpsc::Receiver<Job<M::Input>>) {
        let mut jobs = Vec::with_capacity(self.max_batch);
        let mut stop = false;
        while let Some(first) = rx.blocking_recv() {
            let mut next = Some(first);
            while let Some(j) = next.take() {
                match j {
                    Job::Stop => stop = true,
                    append => jobs.push(append),
                }
                if jobs.len() < self.max_batch && !stop {
                    next = rx.try_recv().ok();
                }
            }
            let failed = self.commit(&mut jobs).err();
            if let Some(e) = &failed {
                tracing::error!(error = %e, "ledger write failed; the ledger stops until a restart");
            }
            if stop || failed.is_some() {
                rx.close();
                while let Ok(j) = rx.try_recv() {
                    if let Job::Append(_, reply) = j {
                        let _ = reply.send(Err(Error::LedgerStopped));
                    }
                }
                break;
            }
        }
        if let Err(e) = self.store.db().flush_wal(true) {
            tracing::warn!(error = %e, "flush at shutdown");
        }
        tracing::info!(records = self.next, "ledger writer stopped");
    }

    fn commit(&mut self, jobs: &mut Vec<Job<M::Input>>) -> Result<(), Error> {
        let now = self.clock.now_ms();
        let ids: Vec<RecordId> = jobs
            .iter()
            .map(|j| match j {
                Job::Append(a, _) => a.id,
                Job::Stop => [0; 32],
            })
            .collect();
        let existing = self.store.seqs_of(&ids)?;
        let (records, ids_cf, tree) = (
            self.store.cf("records")?,
            self.store.cf("ids")?,
            self.store.cf("tree")?,
        );
        let mut batch = WriteBatch::default();
        let mut replies: Vec<(Reply, Result<AppendResult, Error>)> = Vec::with_capacity(jobs.len());
        let mut in_batch: HashMap<RecordId, AppendResult> = HashMap::new();
        for (job, old) in jobs.drain(..).zip(existing) {
            let Job::Append(a, reply) = job else { continue };
            if let Some(seq) = old {
                let r = match self.store.get(seq) {
                    Ok(Some(e)) => Ok(AppendResult {
                        sequence: seq,
                        outcome: e.outcome.unwrap_or_default(),
                        duplicate: true,
                        recorded_at: e.recorded_at_unix_ms,
                    }),
                    Ok(None) => Err(Error::Storage(format!(
                        "id index points at missing sequence {seq}"
                    ))),
                    Err(e) => Err(e),
                };
                replies.push((reply, r));
                continue;
            }
            if let Some(r) = in_batch.get(&a.id) {
                replies.push((
                    reply,
                    Ok(AppendResult {
                        duplicate: true,
                        ..r.clone()
                    }),
                ));
                continue;
            }
            let Append { id, signed, input } = *a;
            let seq = self.next;
            let outcome = self.machine.apply(seq, &id, &input, now);
            let leaf = signed.encode_to_vec();
            let lh = leaf_hash(&leaf);
            let completed = self
                .range
                .push(lh)
                .map_err(|e| Error::Internal(format!("tree: {e}")));
            // Level 0 (the leaf) and every perfect subtree it completes.
            for (level, index, hash) in completed? {
                batch.put_cf(tree, tree_key(level, index), hash);
            }
            let entry = LedgerEntry {
                sequence: seq,
                record_id: id.to_vec().into(),
                record: Some(signed),
                recorded_at_unix_ms: now,
                outcome: Some(outcome.clone()),
            };
            batch.put_cf(records, seq.to_be_bytes(), entry.encode_to_vec());
            batch.put_cf(ids_cf, id, seq.to_be_bytes());
            self.next += 1;
            let r = AppendResult {
                sequence: seq,
                outcome,
                duplicate: false,
                recorded_at: now,
            };
            in_batch.insert(id, r.clone());
            replies.push((reply, Ok(r)));
        }
        if !batch.is_empty() {
            // The machine's derived state goes into the same synced write as the records.
            let mut with_state = Batch::from_raw(batch);
            let persisted = self.machine.persist(&self.store, &mut with_state);
            let batch = with_state.into_raw();
            if let Err(e) = persisted {
                for (reply, _) in replies {
                    let _ = reply.send(Err(Error::LedgerStopped));
                }
                return Err(e);
            }
            let mut wo = WriteOptions::default();
            wo.set_sync(true);
            let started = std::time::Instant::now();
            let records = batch.len();
            let written = if self.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
                Err(Error::Storage("injected write failure".into()))
            } else {
                self.store.db().write_opt(batch, &wo).map_err(storage)
            };
            tracing::trace!(
                records,
                jobs = replies.len(),
                write_us = started.elapsed().as_micros() as u64,
                "group commit"
            );
            if let Err(e) = written {
                for (reply, _) in replies {
                    let _ = reply.send(Err(Error::LedgerStopped));
                }
                return Err(e);
            }
            // Synced: now readers may see the batch's derived state, before anyone hears of it.
            self.machine.publish();
            self.len_tx.send_replace(self.next);
        }
        if let Some(m) = self.metrics.get() {
            m.group_commit(in_batch.len(), replies.len() - in_batch.len());
        }
        for (reply, r) in replies {
            let _ = reply.send(r);
        }
        Ok(())
    }
}
