//! The ledger: an append-only sequence of signed records in the store (RocksDB, or PostgreSQL:
//! [`store`]), committed into an RFC 6962
//! Merkle tree in the same synced write (DESIGN.md, "Ledger and durability").
//!
//! Appends go through one writer thread that does group commit: it drains every append that is
//! waiting (up to `max_batch`), assigns sequence numbers, lets the [`Machine`] (the Work kernel's
//! projection) decide each record's outcome in ledger order, and prepares records, id index,
//! Merkle nodes and outcomes as one `WriteBatch`, which a second thread writes with
//! `sync = true` while the writer prepares the next group (a two-stage pipeline, issue 14; at
//! most one group written while one more is prepared). Only after a group's write returns is any
//! of it answered `recorded`, the length watch advanced to it, and its derived state published
//! to readers ([`Machine::publish`] of that group's [`Machine::Pending`], not of the group being
//! prepared). A failed write poisons the ledger: the in-memory state may be ahead of the disk,
//! so the writer fails the group prepared behind it, stops, and every later append fails until a
//! restart recovers from disk.

mod encode;
mod follower;
mod machine;
mod store;
mod tiles;
mod writer;

pub use machine::{AcceptAll, AppendResult, Machine, Outcome};
pub use store::postgres::{Pg, PgOptions, Waiting};
pub use store::{Batch, Kv, LeafScanNodes, OneByOneNodes, Store, TreeNodes};

/// The time the kernel applied `entry` at (its `now`; issue 26): the author node's time for a
/// peer's record, else when it was recorded. Replay and `ledger verify` use it.
pub fn applied_at(entry: &accord_proto::pb::work::v1::LedgerEntry) -> i64 {
    if entry.applied_at_unix_ms != 0 {
        entry.applied_at_unix_ms
    } else {
        entry.recorded_at_unix_ms
    }
}

use crate::error::Error;
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// A record ready to append: verified, with its id and whatever the machine needs decoded.
#[derive(Debug)]
pub struct Append<I> {
    /// The record id.
    pub id: RecordId,
    /// The signed record, as received.
    pub signed: SignedRecord,
    /// The machine's decoded form.
    pub input: I,
    /// The time to apply it at, when another node's clock decided it (issue 26: a peer's
    /// record at the time its author's node applied it); `None` = the writer's clock.
    pub at: Option<i64>,
}

/// One message into the writer: every record of one request (or federation envelope), answered
/// together once the group commit that holds them is synced (issue 14: one channel message per
/// request, not per record).
pub(crate) enum Job<I> {
    Append(
        Vec<Append<I>>,
        oneshot::Sender<Vec<Result<AppendResult, Error>>>,
        /// When it was sent (the writer_queue stage of `accord_append_stage_seconds`).
        std::time::Instant,
    ),
    Stop,
}

/// Handle to the ledger: cheap to clone.
pub struct Ledger<I> {
    store: Arc<Store>,
    tx: mpsc::Sender<Job<I>>,
    len: watch::Receiver<u64>,
    metrics: Arc<std::sync::OnceLock<crate::metrics::Metrics>>,
    fail_writes: Arc<std::sync::atomic::AtomicBool>,
    /// Appends share it; [`Ledger::hold`] takes it alone, so that nothing is appended between
    /// the appends made through a [`Held`] (issue 26: at a commitment's home, a peer's record
    /// and the home's decision about it are adjacent in the order every holder follows).
    order: Arc<tokio::sync::RwLock<()>>,
}

/// The ledger, held by one caller or not ([`Ledger::hold`]): while held, every other append
/// waits until it is dropped.
pub struct Held<'a, I> {
    ledger: &'a Ledger<I>,
    order: Option<tokio::sync::RwLockWriteGuard<'a, ()>>,
}

impl<I: Send + 'static> Held<'_, I> {
    /// [`Ledger::append_many`]; while held, with no other append in between.
    pub async fn append_many(&self, appends: Vec<Append<I>>) -> Vec<Result<AppendResult, Error>> {
        match self.order {
            Some(_) => self.ledger.send(appends).await,
            None => self.ledger.append_many(appends).await,
        }
    }

    /// [`Ledger::append`], with no other append in between.
    pub async fn append(&self, a: Append<I>) -> Result<AppendResult, Error> {
        self.append_many(vec![a])
            .await
            .pop()
            .unwrap_or(Err(Error::LedgerStopped))
    }
}

impl<I> std::fmt::Debug for Ledger<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("len", &*self.len.borrow())
            .finish()
    }
}

impl<I> Clone for Ledger<I> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            tx: self.tx.clone(),
            len: self.len.clone(),
            metrics: self.metrics.clone(),
            fail_writes: self.fail_writes.clone(),
            order: self.order.clone(),
        }
    }
}

impl<I: Send + 'static> Ledger<I> {
    /// Opens (or creates) the ledger in `dir`, replays every record through `machine` to rebuild
    /// the projections, and starts the writer thread. The thread ends, flushing, when every
    /// handle is dropped.
    pub fn open<M>(
        dir: &Path,
        machine: M,
        max_batch: usize,
        clock: crate::clock::Clock,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        Self::open_with(dir, &[], machine, max_batch, clock)
    }

    /// [`Ledger::open`], also creating the column families `extra` that other modules own
    /// (reached through the store's typed operations; see `ledger/store.rs`).
    pub fn open_with<M>(
        dir: &Path,
        extra: &[&str],
        machine: M,
        max_batch: usize,
        clock: crate::clock::Clock,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        let default = crate::config::StorageConfig::default().block_cache_mib;
        Self::open_tuned(dir, extra, default, machine, max_batch, clock)
    }

    /// [`Ledger::open_with`] with the store's block cache of `block_cache_mib` MiB
    /// ([`Store::open_tuned`]; the node passes `[storage] block_cache_mib`).
    pub fn open_tuned<M>(
        dir: &Path,
        extra: &[&str],
        block_cache_mib: u64,
        machine: M,
        max_batch: usize,
        clock: crate::clock::Clock,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        let extra = families(extra, &machine);
        let store = Arc::new(Store::open_tuned(dir, &extra, block_cache_mib)?);
        Self::start(store, machine, max_batch, clock)
    }

    /// [`Ledger::open_with`] on PostgreSQL (issue 31): waits for the writer's lease, then
    /// opens as on RocksDB (the machine's watermark, then only the records after it).
    pub fn open_postgres<M>(
        options: &PgOptions,
        extra: &[&str],
        machine: M,
        max_batch: usize,
        clock: crate::clock::Clock,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        let extra = families(extra, &machine);
        let store = Arc::new(Store::open_postgres(options, &extra)?);
        Self::start(store, machine, max_batch, clock)
    }

    /// Follows the writer of the PostgreSQL store at `options` without its lease (a standby
    /// serving reads, issue 31): see [`follower`](self::follower).
    pub fn follow_postgres<M>(
        options: &PgOptions,
        extra: &[&str],
        machine: M,
        every: std::time::Duration,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        let extra = families(extra, &machine);
        let store = Arc::new(Store::follow_postgres(options, &extra)?);
        Self::follow(store, machine, every)
    }

    /// Replays what the machine's watermark does not cover and starts the writer over `store`.
    fn start<M>(
        store: Arc<Store>,
        mut machine: M,
        max_batch: usize,
        clock: crate::clock::Clock,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        let len = store.record_count()?;
        // The machine's persisted state reflects the records before its watermark (written in
        // the same synced batches); only the records after it are replayed, each chunk's derived
        // state written back at once.
        let mut seq = machine.open(&store)?.min(len);
        let from = seq;
        while seq < len {
            let mut batch = Batch::default();
            for entry in store.range(seq, 1024)? {
                machine.restore(&entry);
                seq = entry.sequence + 1;
            }
            let pending = machine.persist(&store, &mut batch)?;
            store.write(batch, true)?;
            machine.publish(pending);
        }
        if from == len {
            // Nothing replayed: still publish the machine's opened state once.
            let mut batch = Batch::default();
            let pending = machine.persist(&store, &mut batch)?;
            if !batch.is_empty() {
                store.write(batch, true)?;
            }
            machine.publish(pending);
        }
        tracing::info!(records = len, replayed = len - from, "ledger opened");
        let (len_tx, len_rx) = watch::channel(len);
        let (tx, rx) = mpsc::channel(max_batch.max(1) * 4);
        let metrics = Arc::new(std::sync::OnceLock::new());
        let fail_writes = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = writer::Writer::new(store.clone(), machine, len, max_batch, len_tx, clock)?
            .observed(metrics.clone())
            .faults(fail_writes.clone());
        let handle = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || w.run(rx))
            .map_err(|e| Error::Internal(format!("spawn ledger writer: {e}")))?;
        Ok((
            Self {
                store,
                tx,
                len: len_rx,
                metrics,
                fail_writes,
                order: Arc::default(),
            },
            handle,
        ))
    }

    /// Appends one record; resolves once it is durable (or was already in the ledger).
    pub async fn append(&self, a: Append<I>) -> Result<AppendResult, Error> {
        self.append_many(vec![a])
            .await
            .pop()
            .unwrap_or(Err(Error::LedgerStopped))
    }

    /// Appends several records in one message to the writer (in this order, in as few group
    /// commits as the writer's `max_batch` allows); resolves, with one result per record in the
    /// same order, once all of them are durable (or were already in the ledger).
    pub async fn append_many(&self, appends: Vec<Append<I>>) -> Vec<Result<AppendResult, Error>> {
        let _shared = self.order.read().await;
        self.send(appends).await
    }

    /// When `hold`, holds the ledger: appends made through the [`Held`] follow one another
    /// with no other append in between, until it is dropped (else it appends as usual). Hold
    /// it only across appends, with no other wait.
    pub async fn hold(&self, hold: bool) -> Held<'_, I> {
        Held {
            ledger: self,
            order: match hold {
                true => Some(self.order.write().await),
                false => None,
            },
        }
    }

    async fn send(&self, appends: Vec<Append<I>>) -> Vec<Result<AppendResult, Error>> {
        if appends.is_empty() {
            return Vec::new();
        }
        let n = appends.len();
        let stopped = || (0..n).map(|_| Err(Error::LedgerStopped)).collect();
        let started = std::time::Instant::now();
        let (tx, rx) = oneshot::channel();
        if self
            .tx
            .send(Job::Append(appends, tx, started))
            .await
            .is_err()
        {
            return stopped();
        }
        let Ok(r) = rx.await else {
            return stopped();
        };
        if let Some(m) = self.metrics.get() {
            let elapsed = started.elapsed();
            for _ in 0..n {
                m.append_latency(elapsed);
            }
        }
        r
    }

    /// Reports appends, group-commit sizes and append latency to `metrics` from now on.
    pub fn observe(&self, metrics: crate::metrics::Metrics) {
        let _ = self.metrics.set(metrics);
    }

    /// Stops the writer after the appends already queued; later appends fail with
    /// [`Error::LedgerStopped`]. Used at graceful shutdown.
    pub async fn stop(&self) {
        let _ = self.tx.send(Job::Stop).await;
    }

    /// Fault injection for tests: every later synced write fails as a disk error would (the
    /// writer then stops, as after a real failure).
    #[cfg(test)]
    pub(crate) fn fail_writes(&self) {
        self.fail_writes
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The storage, for reads.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Records durably in the ledger (the next sequence number).
    pub fn len(&self) -> u64 {
        *self.len.borrow()
    }

    /// Whether the ledger has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Watches the ledger's length (for tailing streams and the checkpointer).
    pub fn watch_len(&self) -> watch::Receiver<u64> {
        self.len.clone()
    }

    /// One entry by record id.
    pub fn get_by_id(&self, id: &RecordId) -> Result<Option<LedgerEntry>, Error> {
        self.store.get_by_id(id)
    }
}

/// The column families a store opens: `extra` (other modules') and the machine's.
fn families<'a, M: Machine>(extra: &[&'a str], machine: &'a M) -> Vec<&'a str> {
    extra
        .iter()
        .chain(machine.column_families())
        .copied()
        .collect()
}

/// Grows a test ledger to `to` records (record `i`'s id and payload are `i` in big-endian),
/// 4,096 to a writer message: the tree's tests build their trees with it.
#[cfg(test)]
pub(crate) async fn grow(ledger: &Ledger<()>, to: u64) {
    let mut from = ledger.len();
    while from < to {
        let end = to.min(from + 4096);
        let appends = (from..end)
            .map(|i| {
                let mut id = [0u8; 32];
                id[..8].copy_from_slice(&i.to_be_bytes());
                Append {
                    id,
                    signed: SignedRecord {
                        payload: i.to_be_bytes().to_vec().into(),
                        payload_type: "test".into(),
                        signatures: vec![],
                    },
                    input: (),
                    at: None,
                }
            })
            .collect();
        for r in ledger.append_many(appends).await {
            r.expect("append");
        }
        from = end;
    }
    assert_eq!(ledger.len(), to);
}
