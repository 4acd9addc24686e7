//! The group-commit writer thread.

use super::store::{Batch, Store, storage, tree_key};
use super::{Append, Job};
use crate::error::Error;
use crate::metrics::AppendStage;
use accord_proto::merkle::{CompactRange, leaf_hash};
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::pb::work::v1::{LedgerEntry, Outcome as PbOutcome};
use accord_proto::signing::RecordId;
use prost::Message;
use rocksdb::{WriteBatch, WriteOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
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
    /// The hasher of each group commit's in-batch duplicate check.
    id_hashing: IdHashing,
}

type Reply = oneshot::Sender<Vec<Result<AppendResult, Error>>>;

/// The requests of one group commit: their records, where to answer, and when each was sent.
type Jobs<I> = Vec<(Vec<Append<I>>, Reply, Instant)>;

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
            id_hashing: IdHashing::random(),
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
        let mut jobs: Jobs<M::Input> = Vec::new();
        let mut stop = false;
        while let Some(first) = rx.blocking_recv() {
            // Group commit: everything queued now, up to `max_batch` records (a request larger
            // than that is still committed whole).
            let mut records = 0;
            let mut next = Some(first);
            while let Some(j) = next.take() {
                match j {
                    Job::Stop => stop = true,
                    Job::Append(a, reply, queued) => {
                        records += a.len();
                        jobs.push((a, reply, queued));
                    }
                }
                if records < self.max_batch && !stop {
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
                    if let Job::Append(a, reply, _) = j {
                        let _ = reply.send(a.iter().map(|_| Err(Error::LedgerStopped)).collect());
                    }
                }
                break;
            }
        }
        // Memtables to files, not only the WAL: the next open then replays no log.
        if let Err(e) = self.store.flush_all() {
            tracing::warn!(error = %e, "flush at shutdown");
        }
        tracing::info!(records = self.next, "ledger writer stopped");
    }

    fn commit(&mut self, jobs: &mut Jobs<M::Input>) -> Result<(), Error> {
        let started = Instant::now();
        let metrics = self.metrics.clone();
        let metrics = metrics.get();
        if let Some(m) = metrics {
            for (_, _, queued) in jobs.iter() {
                m.append_stage(AppendStage::WriterQueue, started - *queued);
            }
        }
        let now = self.clock.now_ms();
        let ids: Vec<RecordId> = jobs
            .iter()
            .flat_map(|(a, _, _)| a.iter().map(|a| a.id))
            .collect();
        let mut existing = self.store.seqs_of(&ids)?.into_iter();
        let (records, ids_cf, tree) = (
            self.store.cf("records")?,
            self.store.cf("ids")?,
            self.store.cf("tree")?,
        );
        // Sized for the whole group commit up front (each record's entry, id and about two tree
        // nodes, with RocksDB's per-key framing): no regrowth and copy while it fills.
        let bytes: usize = jobs
            .iter()
            .flat_map(|(a, _, _)| a.iter())
            .map(|a| a.signed.payload.len() + 320)
            .sum();
        let mut batch = WriteBatch::with_capacity_bytes(bytes);
        let mut replies: Vec<(Reply, Vec<Result<AppendResult, Error>>)> =
            Vec::with_capacity(jobs.len());
        let mut in_batch: HashMap<RecordId, AppendResult, IdHashing> =
            HashMap::with_hasher(self.id_hashing.clone());
        let mut answered = 0;
        for (appends, reply, _) in jobs.drain(..) {
            let mut results = Vec::with_capacity(appends.len());
            for a in appends {
                answered += 1;
                let old = existing.next().flatten();
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
                    results.push(r);
                    continue;
                }
                if let Some(r) = in_batch.get(&a.id) {
                    results.push(Ok(AppendResult {
                        duplicate: true,
                        ..r.clone()
                    }));
                    continue;
                }
                let Append { id, signed, input } = a;
                let seq = self.next;
                let outcome = self.machine.apply(seq, &id, &input, now);
                // The record is encoded once, straight into its stored entry; the leaf hash is
                // taken over those bytes (the encoded `SignedRecord`, RFC 6962 leaf input).
                let (entry, leaf) = encode_entry(seq, &id, &signed, now);
                let lh = leaf_hash(&entry[leaf]);
                let completed = self
                    .range
                    .push(lh)
                    .map_err(|e| Error::Internal(format!("tree: {e}")));
                // Level 0 (the leaf) and every perfect subtree it completes.
                for (level, index, hash) in completed? {
                    batch.put_cf(tree, tree_key(level, index), hash);
                }
                batch.put_cf(records, seq.to_be_bytes(), finish_entry(entry, &outcome));
                batch.put_cf(ids_cf, id, seq.to_be_bytes());
                self.next += 1;
                let r = AppendResult {
                    sequence: seq,
                    outcome,
                    duplicate: false,
                    recorded_at: now,
                };
                in_batch.insert(id, r.clone());
                results.push(Ok(r));
            }
            replies.push((reply, results));
        }
        if !batch.is_empty() {
            // The machine's derived state goes into the same synced write as the records.
            let mut with_state = Batch::from_raw(batch);
            let persisted = self.machine.persist(&self.store, &mut with_state);
            let batch = with_state.into_raw();
            if let Err(e) = persisted {
                for (reply, results) in replies {
                    let _ = reply.send(results.iter().map(|_| Err(Error::LedgerStopped)).collect());
                }
                return Err(e);
            }
            let mut wo = WriteOptions::default();
            wo.set_sync(true);
            let synced = Instant::now();
            if let Some(m) = metrics {
                m.append_stage(AppendStage::Apply, synced - started);
            }
            let records = batch.len();
            let written = if self.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
                Err(Error::Storage("injected write failure".into()))
            } else {
                self.store.db().write_opt(batch, &wo).map_err(storage)
            };
            tracing::trace!(
                records,
                jobs = replies.len(),
                write_us = synced.elapsed().as_micros() as u64,
                "group commit"
            );
            if let Err(e) = written {
                for (reply, results) in replies {
                    let _ = reply.send(results.iter().map(|_| Err(Error::LedgerStopped)).collect());
                }
                return Err(e);
            }
            let published = Instant::now();
            if let Some(m) = metrics {
                m.append_stage(AppendStage::Sync, published - synced);
            }
            // Synced: now readers may see the batch's derived state, before anyone hears of it.
            self.machine.publish();
            if let Some(m) = metrics {
                m.append_stage(AppendStage::Publish, published.elapsed());
            }
            self.len_tx.send_replace(self.next);
        }
        if let Some(m) = self.metrics.get() {
            m.group_commit(in_batch.len(), answered - in_batch.len());
        }
        for (reply, results) in replies {
            let _ = reply.send(results);
        }
        Ok(())
    }
}

/// `LedgerEntry { sequence, record_id, record, recorded_at_unix_ms }` with the record encoded
/// straight into it, and where the record's bytes (the Merkle leaf) are in it; [`finish_entry`]
/// appends the outcome. Byte for byte what `LedgerEntry::encode_to_vec` gives (prost writes
/// fields in number order and skips default scalars; `entry_encoding_matches_prost` checks it),
/// with one allocation and one copy of the payload per record (issue 14).
fn encode_entry(
    seq: u64,
    id: &RecordId,
    signed: &SignedRecord,
    now: i64,
) -> (Vec<u8>, std::ops::Range<usize>) {
    use prost::encoding::{self, WireType};
    let len = signed.encoded_len();
    let mut out = Vec::with_capacity(len + 160);
    if seq != 0 {
        encoding::uint64::encode(1, &seq, &mut out);
    }
    encoding::encode_key(2, WireType::LengthDelimited, &mut out);
    encoding::encode_varint(id.len() as u64, &mut out);
    out.extend_from_slice(id);
    encoding::encode_key(3, WireType::LengthDelimited, &mut out);
    encoding::encode_varint(len as u64, &mut out);
    let start = out.len();
    signed.encode_raw(&mut out);
    let leaf = start..out.len();
    if now != 0 {
        encoding::int64::encode(4, &now, &mut out);
    }
    (out, leaf)
}

/// Appends field 5 (the outcome) to an entry begun by [`encode_entry`].
fn finish_entry(mut entry: Vec<u8>, outcome: &Outcome) -> Vec<u8> {
    prost::encoding::message::encode(5, outcome, &mut entry);
    entry
}

/// Hashes record ids — SHA-256 digests, already uniform — with a few multiply-rotate rounds
/// instead of SipHash (issue 14: SipHash was on the writer's profile). The rounds start from a
/// key drawn per writer, so ids chosen to collide in some bits do not meet in one bucket.
#[derive(Clone)]
pub(super) struct IdHashing(u64);

impl IdHashing {
    pub(super) fn random() -> Self {
        use std::hash::BuildHasher;
        Self(std::collections::hash_map::RandomState::new().hash_one(0x0069_6473_5f6b_6579_u64))
    }
}

impl std::hash::BuildHasher for IdHashing {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.0)
    }
}

pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.0 = (self.0 ^ u64::from_le_bytes(b))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(29);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accord_proto::pb::record::v1::Signature;

    /// Ids that share all but their last byte hash apart (every byte is mixed in), and the same
    /// id hashes the same within a writer.
    #[test]
    fn id_hashing_mixes_every_byte() {
        use std::hash::BuildHasher;
        let h = IdHashing::random();
        let a = [7u8; 32];
        let mut b = a;
        b[31] ^= 1;
        assert_ne!(h.hash_one(a), h.hash_one(b));
        assert_eq!(h.hash_one(a), h.hash_one(a));
        let mut m: HashMap<RecordId, u32, IdHashing> = HashMap::with_hasher(h);
        m.insert(a, 1);
        m.insert(b, 2);
        assert_eq!((m.get(&a), m.get(&b)), (Some(&1), Some(&2)));
    }

    #[test]
    fn entry_encoding_matches_prost() {
        let signed = SignedRecord {
            payload_type: "application/vnd.accord.record.v1+protobuf".into(),
            payload: vec![1, 2, 3, 0, 255].into(),
            signatures: vec![Signature {
                key_name: "k".into(),
                key_id: vec![1, 2, 3, 4].into(),
                signature: vec![7; 64].into(),
            }],
        };
        let leaf = signed.encode_to_vec();
        for (seq, now, outcome) in [
            (0, 0, Outcome::default()),
            (
                7,
                1_700_000_000_000,
                Outcome {
                    applied: true,
                    ..Default::default()
                },
            ),
            (u64::MAX, -5, Outcome::default()),
        ] {
            let id = [seq as u8; 32];
            let entry = LedgerEntry {
                sequence: seq,
                record_id: id.to_vec().into(),
                record: Some(signed.clone()),
                recorded_at_unix_ms: now,
                outcome: Some(outcome.clone()),
            };
            let (begun, at) = encode_entry(seq, &id, &signed, now);
            // The leaf is exactly the record's own encoding.
            assert_eq!(&begun[at], &leaf[..]);
            let encoded = finish_entry(begun, &outcome);
            assert_eq!(encoded, entry.encode_to_vec());
            assert_eq!(LedgerEntry::decode(&encoded[..]).unwrap(), entry);
        }
    }
}
