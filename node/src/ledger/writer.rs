//! The group-commit writer: a two-stage pipeline (issue 14). The writer thread prepares a group
//! commit — duplicate checks, the machine's decisions, encoding, the Merkle tree, the machine's
//! derived state — while the previous one is written with `sync = true` on the sync thread;
//! once that write returns, the writer publishes it, advances the length watch and answers it.
//!
//! Invariants (ARCHITECTURE.md, "Invariants"):
//! - a batch's derived state is published, its length announced and its appends answered only
//!   after its synced write returned, and batches complete in sequence order;
//! - duplicates are found across every batch not yet synced (`unsynced`), not only the store;
//! - if a write fails, the batch prepared behind it fails too and the ledger stops;
//! - at most one batch is being written while at most one more is prepared (bounded memory).

use super::encode::{IdHashing, encode_entry, finish_entry};
use super::store::{Batch, CACHED_LEVEL, Store};
use super::tiles::{TileBuf, upper_key};
use super::{Append, AppendResult, Job, Machine};
use crate::error::Error;
use crate::metrics::AppendStage;
use accord_proto::merkle::{CompactRange, leaf_hash};
use accord_proto::signing::RecordId;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

type Reply = oneshot::Sender<Vec<Result<AppendResult, Error>>>;

/// The requests of one group commit: their records, where to answer, and when each was sent.
type Jobs<I> = Vec<(Vec<Append<I>>, Reply, Instant)>;

/// What the sync thread answers: the write's result and how long it took.
type Synced = (Result<(), Error>, Duration);

/// Called on the sync thread before each write (tests hold a batch in flight with it).
type SyncHook = Arc<dyn Fn() + Send + Sync>;

/// One write for the sync thread (`None`: nothing new, only order the answers).
type SyncJob = (Option<Batch>, oneshot::Sender<Synced>);

/// A prepared group commit: its write, the machine's publication, and whom to answer.
struct Prepared<P> {
    batch: Option<Batch>,
    pending: Option<P>,
    replies: Vec<(Reply, Vec<Result<AppendResult, Error>>)>,
    /// The new records' ids (dropped from `unsynced` once synced).
    ids: Vec<RecordId>,
    /// The ledger's length once it is synced.
    next: u64,
    answered: usize,
}

impl<P> Prepared<P> {
    /// Answers every append of the batch as its write's failure `cause` says: `NotWriter` when
    /// the store fenced the write (another instance holds the writer's lease, issue 31), else
    /// `LedgerStopped`.
    fn fail_by(self, cause: &Error) {
        let answer = || match cause {
            Error::NotWriter(m) => Error::NotWriter(m.clone()),
            _ => Error::LedgerStopped,
        };
        for (reply, results) in self.replies {
            let _ = reply.send(results.iter().map(|_| Err(answer())).collect());
        }
    }

    /// Answers every append of the batch `LedgerStopped`: its write failed or will not happen.
    fn fail(self) {
        for (reply, results) in self.replies {
            let _ = reply.send(results.iter().map(|_| Err(Error::LedgerStopped)).collect());
        }
    }
}

enum Event<I> {
    Job(Option<Job<I>>),
    Synced(Result<Synced, oneshot::error::RecvError>),
}

pub(super) struct Writer<M: Machine> {
    store: Arc<Store>,
    machine: M,
    next: u64,
    range: CompactRange,
    /// The last tile's nodes (levels below [`CACHED_LEVEL`]), rewritten whole by each group
    /// commit that adds to it (`super::tiles`).
    tile: TileBuf,
    max_batch: usize,
    len_tx: watch::Sender<u64>,
    metrics: Arc<std::sync::OnceLock<crate::metrics::Metrics>>,
    clock: crate::clock::Clock,
    /// Fault injection (tests only set it): the next synced writes fail as a disk error would.
    fail_writes: Arc<AtomicBool>,
    /// The records of every batch not synced yet (the one being written and the one being
    /// prepared), by id: a second append of one of them is its duplicate.
    unsynced: HashMap<RecordId, AppendResult, IdHashing>,
    before_sync: Option<SyncHook>,
}

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
        let tile = TileBuf::load(store.kv(), len)?;
        Ok(Self {
            store,
            machine,
            next: len,
            range,
            tile,
            max_batch,
            len_tx,
            metrics: Arc::default(),
            clock,
            fail_writes: Arc::default(),
            unsynced: HashMap::with_hasher(IdHashing::random()),
            before_sync: None,
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
    pub(super) fn faults(mut self, fail_writes: Arc<AtomicBool>) -> Self {
        self.fail_writes = fail_writes;
        self
    }

    /// Calls `hook` on the sync thread before each write.
    #[cfg(test)]
    fn before_sync(mut self, hook: SyncHook) -> Self {
        self.before_sync = Some(hook);
        self
    }

    /// Runs the pipeline until the ledger is stopped, every handle is dropped, or a write fails.
    pub(super) fn run(mut self, mut rx: mpsc::Receiver<Job<M::Input>>) {
        let (sync_tx, sync_rx) = std::sync::mpsc::sync_channel::<SyncJob>(1);
        let syncer = {
            let (store, fail) = (self.store.clone(), self.fail_writes.clone());
            let hook = self.before_sync.clone();
            std::thread::Builder::new()
                .name("ledger-sync".into())
                .spawn(move || sync_loop(&store, &fail, hook, sync_rx))
        };
        let syncer = match syncer {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::error!(error = %e, "spawn ledger sync thread; the ledger stops");
                None
            }
        };
        let mut in_flight: Option<(Prepared<M::Pending>, oneshot::Receiver<Synced>)> = None;
        let mut prepared: Option<Prepared<M::Pending>> = None;
        let mut stop = false;
        let mut failed = syncer.is_none();
        loop {
            if in_flight.is_none()
                && let Some(mut p) = prepared.take()
            {
                let (done_tx, done_rx) = oneshot::channel();
                if sync_tx.send((p.batch.take(), done_tx)).is_err() {
                    p.fail();
                    failed = true;
                } else {
                    in_flight = Some((p, done_rx));
                }
            }
            let take = prepared.is_none() && !stop && !failed;
            let event = match &mut in_flight {
                None if !take => break,
                None => Event::Job(rx.blocking_recv()),
                // Prepare the next batch while this one syncs; answer it as soon as it is synced.
                Some((_, done)) if take => futures::executor::block_on(async {
                    tokio::select! {
                        biased;
                        r = done => Event::Synced(r),
                        j = rx.recv() => Event::Job(j),
                    }
                }),
                Some((_, done)) => Event::Synced(futures::executor::block_on(done)),
            };
            match event {
                Event::Job(None) => stop = true,
                Event::Job(Some(first)) => {
                    let jobs = self.gather(first, &mut rx, &mut stop);
                    match self.prepare(jobs) {
                        Ok(p) => prepared = Some(p),
                        Err(e) => {
                            tracing::error!(error = %e, "ledger batch not prepared; the ledger stops until a restart");
                            failed = true;
                        }
                    }
                }
                Event::Synced(r) => {
                    let Some((p, _)) = in_flight.take() else {
                        continue;
                    };
                    let (written, took) = r.unwrap_or((
                        Err(Error::Internal("ledger sync thread ended".into())),
                        Duration::ZERO,
                    ));
                    match written {
                        Ok(()) => self.complete(p, took),
                        Err(e) => {
                            tracing::error!(error = %e, "ledger write failed; the ledger stops until a restart");
                            p.fail_by(&e);
                            // Prepared on top of the failed batch: it cannot be written either.
                            if let Some(q) = prepared.take() {
                                q.fail_by(&e);
                            }
                            failed = true;
                        }
                    }
                }
            }
        }
        rx.close();
        while let Ok(j) = rx.try_recv() {
            if let Job::Append(a, reply, _) = j {
                let _ = reply.send(a.iter().map(|_| Err(Error::LedgerStopped)).collect());
            }
        }
        drop(sync_tx);
        if let Some(h) = syncer {
            let _ = h.join();
        }
        // Memtables to files, not only the WAL: the next open then replays no log.
        if let Err(e) = self.store.flush_all() {
            tracing::warn!(error = %e, "flush at shutdown");
        }
        tracing::info!(records = self.next, "ledger writer stopped");
    }

    /// Group commit: `first` and everything queued now, up to `max_batch` records (a request
    /// larger than that is still committed whole); a `Stop` ends the group and sets `stop`.
    fn gather(
        &self,
        first: Job<M::Input>,
        rx: &mut mpsc::Receiver<Job<M::Input>>,
        stop: &mut bool,
    ) -> Jobs<M::Input> {
        let mut jobs = Vec::new();
        let mut records = 0;
        let mut next = Some(first);
        while let Some(j) = next.take() {
            match j {
                Job::Stop => *stop = true,
                Job::Append(a, reply, queued) => {
                    records += a.len();
                    jobs.push((a, reply, queued));
                }
            }
            if records < self.max_batch && !*stop {
                next = rx.try_recv().ok();
            }
        }
        jobs
    }

    /// Decides, encodes and persists one group commit into its write (not written yet). On an
    /// error every append of it is answered `LedgerStopped`.
    fn prepare(&mut self, jobs: Jobs<M::Input>) -> Result<Prepared<M::Pending>, Error> {
        let started = Instant::now();
        let metrics = self.metrics.clone();
        let metrics = metrics.get();
        if let Some(m) = metrics {
            for (_, _, queued) in jobs.iter() {
                m.append_stage(AppendStage::WriterQueue, started - *queued);
            }
        }
        let now = self.clock.now_ms();
        let all: Vec<RecordId> = jobs
            .iter()
            .flat_map(|(a, _, _)| a.iter().map(|a| a.id))
            .collect();
        let fail = |jobs: Jobs<M::Input>| {
            for (a, reply, _) in jobs {
                let _ = reply.send(a.iter().map(|_| Err(Error::LedgerStopped)).collect());
            }
        };
        let existing = match self.store.seqs_of(&all) {
            Ok(e) => e,
            Err(e) => {
                fail(jobs);
                return Err(e);
            }
        };
        let mut existing = existing.into_iter();
        // Sized for the whole group commit up front — each record's entry, id and about two tree
        // nodes, with RocksDB's per-key framing, and the machine's derived state, which holds the
        // record's content again (a commitment's terms) — so it does not regrow and copy
        // megabytes while it fills (issue 14: `sysmalloc` and page faults on the writer's
        // profile). Pages reserved and not written are never touched.
        let bytes: usize = jobs
            .iter()
            .flat_map(|(a, _, _)| a.iter())
            .map(|a| 2 * a.signed.payload.len() + 640)
            .sum();
        let mut batch = self.store.batch_for(bytes);
        let mut replies = Vec::with_capacity(jobs.len());
        let mut ids = Vec::with_capacity(all.len());
        let mut answered = 0;
        let mut broken = None;
        for (appends, reply, _) in jobs {
            let mut results = Vec::with_capacity(appends.len());
            for a in appends {
                answered += 1;
                if let Some(seq) = existing.next().flatten() {
                    results.push(self.stored_duplicate(seq));
                    continue;
                }
                // In this batch or in the one being synced.
                if let Some(r) = self.unsynced.get(&a.id) {
                    results.push(Ok(AppendResult {
                        duplicate: true,
                        ..r.clone()
                    }));
                    continue;
                }
                let Append {
                    id,
                    signed,
                    input,
                    at,
                } = a;
                let seq = self.next;
                let applied_at = at.filter(|t| *t != now).unwrap_or(0);
                let outcome = self.machine.apply(seq, &id, &input, at.unwrap_or(now));
                // The record is encoded once, straight into its stored entry; the leaf hash is
                // taken over those bytes (the encoded `SignedRecord`, RFC 6962 leaf input).
                let (entry, leaf) = encode_entry(seq, &id, &signed, now);
                let lh = leaf_hash(&entry[leaf]);
                match self.range.push(lh) {
                    // Level 0 (the leaf) and every perfect subtree it completes: the lower
                    // levels into the last tile, written whole when it fills or the batch ends.
                    Ok(completed) => {
                        for (level, index, hash) in completed {
                            let put = if level < CACHED_LEVEL {
                                self.tile.add(level, index, hash)
                            } else {
                                let k = upper_key(level, index);
                                self.store.put_ledger(&mut batch, "tree", &k, &hash)
                            };
                            if let Err(e) = put {
                                broken.get_or_insert(e);
                            }
                        }
                        if self.tile.is_full() {
                            self.put_tile(&mut batch, &mut broken);
                        }
                    }
                    Err(e) => {
                        broken.get_or_insert(Error::Internal(format!("tree: {e}")));
                    }
                }
                let entry = finish_entry(entry, &outcome, applied_at);
                let stored = self
                    .store
                    .put_ledger(&mut batch, "records", &seq.to_be_bytes(), &entry)
                    .and_then(|()| {
                        self.store
                            .put_ledger(&mut batch, "ids", &id, &seq.to_be_bytes())
                    });
                if let Err(e) = stored {
                    broken.get_or_insert(e);
                }
                self.next += 1;
                let r = AppendResult {
                    sequence: seq,
                    outcome,
                    duplicate: false,
                    recorded_at: now,
                    applied_at: at.unwrap_or(now),
                };
                self.unsynced.insert(id, r.clone());
                ids.push(id);
                results.push(Ok(r));
            }
            replies.push((reply, results));
        }
        self.put_tile(&mut batch, &mut broken);
        let mut prepared = Prepared {
            batch: None,
            pending: None,
            replies,
            ids,
            next: self.next,
            answered,
        };
        if let Some(e) = broken {
            prepared.fail();
            return Err(e);
        }
        if !batch.is_empty() {
            // The machine's derived state goes into the same synced write as the records.
            let mut with_state = batch;
            match self.machine.persist(&self.store, &mut with_state) {
                Ok(p) => prepared.pending = Some(p),
                Err(e) => {
                    prepared.fail();
                    return Err(e);
                }
            }
            prepared.batch = Some(with_state);
        }
        if let Some(m) = metrics {
            m.append_stage(AppendStage::Apply, started.elapsed());
        }
        Ok(prepared)
    }

    /// Adds the last tile to `batch` if it changed (`super::tiles::TileBuf::take`).
    fn put_tile(&mut self, batch: &mut Batch, broken: &mut Option<Error>) {
        if let Some((key, value)) = self.tile.take()
            && let Err(e) = self.store.put_ledger(batch, "tree", &key, &value)
        {
            broken.get_or_insert(e);
        }
    }

    /// The answer to an append of a record already synced at `seq`.
    fn stored_duplicate(&self, seq: u64) -> Result<AppendResult, Error> {
        match self.store.get(seq) {
            Ok(Some(e)) => Ok(AppendResult {
                sequence: seq,
                applied_at: super::applied_at(&e),
                outcome: e.outcome.unwrap_or_default(),
                duplicate: true,
                recorded_at: e.recorded_at_unix_ms,
            }),
            Ok(None) => Err(Error::Storage(format!(
                "id index points at missing sequence {seq}"
            ))),
            Err(e) => Err(e),
        }
    }

    /// `p`'s write is synced: publish it, then announce its length, then answer it.
    fn complete(&mut self, p: Prepared<M::Pending>, took: Duration) {
        let metrics = self.metrics.clone();
        let metrics = metrics.get();
        let fresh = p.ids.len();
        if let Some(pending) = p.pending {
            if let Some(m) = metrics {
                m.append_stage(AppendStage::Sync, took);
            }
            let published = Instant::now();
            // Synced: now readers may see the batch's derived state, before anyone hears of it.
            self.machine.publish(pending);
            if let Some(m) = metrics {
                m.append_stage(AppendStage::Publish, published.elapsed());
            }
            self.len_tx.send_replace(p.next);
        }
        for id in &p.ids {
            self.unsynced.remove(id);
        }
        tracing::trace!(
            records = fresh,
            jobs = p.replies.len(),
            write_us = took.as_micros() as u64,
            "group commit"
        );
        if let Some(m) = metrics {
            m.group_commit(fresh, p.answered - fresh);
        }
        for (reply, results) in p.replies {
            let _ = reply.send(results);
        }
    }
}

/// The sync thread: writes each batch with `sync = true`, in the order they come, and answers
/// when it returned (an empty job only keeps the answers in order).
fn sync_loop(
    store: &Store,
    fail: &AtomicBool,
    hook: Option<SyncHook>,
    rx: std::sync::mpsc::Receiver<SyncJob>,
) {
    while let Ok((batch, done)) = rx.recv() {
        if let (Some(h), Some(_)) = (&hook, &batch) {
            h();
        }
        let started = Instant::now();
        let written = match batch {
            None => Ok(()),
            Some(_) if fail.load(Ordering::SeqCst) => {
                Err(Error::Storage("injected write failure".into()))
            }
            Some(b) => store.write(b, true),
        };
        let _ = done.send((written, started.elapsed()));
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
