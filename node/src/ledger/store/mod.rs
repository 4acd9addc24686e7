//! The node's storage boundary (issue 31): ordered key-value families with atomic batches,
//! behind one trait ([`Kv`]) with two engines — RocksDB, embedded, the default ([`rocks`]), and
//! PostgreSQL ([`postgres`]) — and the typed operations the ledger, the projection and
//! federation use on top of it ([`Store`]). The families:
//!
//! | family | key | value |
//! |---|---|---|
//! | `records` | sequence (u64 BE) | `LedgerEntry` (protobuf) |
//! | `ids` | record id (32 bytes) | sequence (u64 BE) |
//! | `tree` | levels ≥ 6: level (u8) ‖ index (u64 BE); below: one value per 64-leaf tile ([`super::tiles`]) | the perfect-subtree hash over leaves `[index·2^level, (index+1)·2^level)` |
//! | `meta` | name | value (checkpoints, counters) |
//! | others | declared by their owner at open ([`Store::open`]'s `extra`; federation's in `federation::db::CFS`) |
//!
//! In RocksDB a family is a column family; in PostgreSQL a `(family, key)` prefix of one table,
//! so both keep one layout and one key order (bytewise). Level 0 of `tree` holds the leaf
//! hashes. Every node of a perfect subtree is written once, in the same batch as the leaf that
//! completes it, so any root and any proof for any tree size is O(log n) point reads
//! ([`accord_proto::merkle::NodeSource`]).
//!
//! The engine is private to the ledger (issue 10, item 2): the writer thread is the only writer
//! of `records`, `ids` and `tree`, and `meta` is written through [`Store::put_meta`] /
//! [`Store::batch_meta`]. Other modules read and write only the families they declared at open,
//! through the typed operations below, which refuse the ledger's own.

mod nodes;
mod pg_write;
pub mod postgres;
mod rocks;

use crate::error::Error;
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use std::path::Path;

pub use nodes::{CACHED_LEVEL, LeafScanNodes, OneByOneNodes, TreeNodes};

/// The ledger's own families, created on open.
pub const CFS: &[&str] = &["records", "ids", "tree", "meta"];

/// One write of a [`Batch`] for an engine that applies it itself (PostgreSQL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Put(String, Vec<u8>, Vec<u8>),
    Delete(String, Vec<u8>),
    DeleteRange(String, Vec<u8>, Vec<u8>),
}

/// A write to several families, applied at once by [`Store::write`]. It takes the form of the
/// engine of the store its first write goes through: RocksDB's own `WriteBatch` (built in
/// place, as before the boundary), or a list of operations for PostgreSQL's transaction.
pub struct Batch(Repr);

enum Repr {
    Rocks(rocksdb::WriteBatch),
    Ops(Vec<Op>),
}

impl Default for Batch {
    fn default() -> Self {
        Batch(Repr::Ops(Vec::new()))
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = match &self.0 {
            Repr::Rocks(b) => b.len(),
            Repr::Ops(o) => o.len(),
        };
        f.debug_struct("Batch").field("len", &len).finish()
    }
}

impl Batch {
    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        match &self.0 {
            Repr::Rocks(b) => b.is_empty(),
            Repr::Ops(o) => o.is_empty(),
        }
    }

    /// A RocksDB batch with room for `bytes` (the writer sizes its group commit up front).
    fn rocks_with_capacity(bytes: usize) -> Batch {
        Batch(Repr::Rocks(rocksdb::WriteBatch::with_capacity_bytes(bytes)))
    }

    /// The RocksDB form (an empty batch takes it).
    fn rocks(&mut self) -> Result<&mut rocksdb::WriteBatch, Error> {
        if let Repr::Ops(o) = &self.0 {
            if !o.is_empty() {
                return Err(Error::Internal(
                    "a PostgreSQL batch given to RocksDB".into(),
                ));
            }
            self.0 = Repr::Rocks(rocksdb::WriteBatch::default());
        }
        match &mut self.0 {
            Repr::Rocks(b) => Ok(b),
            Repr::Ops(_) => Err(Error::Internal("batch form".into())),
        }
    }

    /// The list-of-operations form (an empty batch takes it).
    fn ops(&mut self) -> Result<&mut Vec<Op>, Error> {
        if let Repr::Rocks(b) = &self.0 {
            if !b.is_empty() {
                return Err(Error::Internal(
                    "a RocksDB batch given to PostgreSQL".into(),
                ));
            }
            self.0 = Repr::Ops(Vec::new());
        }
        match &mut self.0 {
            Repr::Ops(o) => Ok(o),
            Repr::Rocks(_) => Err(Error::Internal("batch form".into())),
        }
    }
}

/// The storage engine under [`Store`]: ordered families of byte keys (bytewise order) and
/// batches written atomically. Implemented by RocksDB ([`rocks::Rocks`]) and PostgreSQL
/// ([`postgres::Pg`]); a distributed transactional store would be a third.
pub trait Kv: Send + Sync {
    /// One value.
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    /// Several values, in the order asked; `sorted` when the keys are in key order.
    fn multi_get(
        &self,
        cf: &str,
        keys: &[&[u8]],
        sorted: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, Error>;
    /// Visits the entries in `[from, to)` (`to` `None`: to the end) in key order while `f`
    /// returns true.
    fn scan(
        &self,
        cf: &str,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error>;
    /// Visits the entries in reverse key order from the last key `<= from` while `f` returns
    /// true.
    fn scan_rev(
        &self,
        cf: &str,
        from: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error>;
    /// Adds a put to `batch`.
    fn put(&self, batch: &mut Batch, cf: &str, key: &[u8], value: &[u8]) -> Result<(), Error>;
    /// Adds a delete to `batch`.
    fn delete(&self, batch: &mut Batch, cf: &str, key: &[u8]) -> Result<(), Error>;
    /// Adds the deletion of the keys in `[from, to)` to `batch`.
    fn delete_range(
        &self,
        batch: &mut Batch,
        cf: &str,
        from: &[u8],
        to: &[u8],
    ) -> Result<(), Error>;
    /// Writes `batch` at once, all of it or nothing; `sync`: durable when it returns.
    fn write(&self, batch: Batch, sync: bool) -> Result<(), Error>;
}

enum Engine {
    Rocks(rocks::Rocks),
    Postgres(Box<postgres::Pg>),
}

/// The node's storage: the typed operations over an engine.
pub struct Store {
    engine: Engine,
    /// The families other modules declared at open (the engine refuses any other).
    extra: Vec<String>,
    /// Tree nodes of level ≥ [`CACHED_LEVEL`], kept in memory once read (issue 14): every proof
    /// shares the upper levels, and a stored node never changes (it is written once, when its
    /// perfect subtree completes).
    upper: nodes::UpperNodes,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.engine {
            Engine::Rocks(r) => f.debug_struct("Store").field("path", &r.path()).finish(),
            Engine::Postgres(p) => f.debug_struct("Store").field("postgres", p).finish(),
        }
    }
}

impl Store {
    /// Opens or creates the database with the ledger's column families and `extra` ones, owned
    /// by the modules that declare them (federation's: `federation::db::CFS`).
    /// The block cache is the configuration's default (`[storage] block_cache_mib`).
    pub fn open(dir: &Path, extra: &[&str]) -> Result<Store, Error> {
        let default = crate::config::StorageConfig::default().block_cache_mib;
        Self::open_tuned(dir, extra, default)
    }

    /// [`Store::open`] with a block cache of `block_cache_mib` MiB shared by every column family
    /// (`[storage] block_cache_mib`; issue 15: bounded memory).
    pub fn open_tuned(dir: &Path, extra: &[&str], block_cache_mib: u64) -> Result<Store, Error> {
        let rocks = rocks::Rocks::open(dir, extra, block_cache_mib)?;
        Self::with(Engine::Rocks(rocks), extra).moved()
    }

    /// The store on PostgreSQL ([`postgres::Pg::open`]).
    pub fn open_postgres(options: &postgres::PgOptions, extra: &[&str]) -> Result<Store, Error> {
        let pg = postgres::Pg::open(options)?;
        Self::with(Engine::Postgres(Box::new(pg)), extra).moved()
    }

    /// The store on PostgreSQL read without the lease, following its writer
    /// ([`postgres::Pg::follow`]).
    pub fn follow_postgres(options: &postgres::PgOptions, extra: &[&str]) -> Result<Store, Error> {
        let pg = postgres::Pg::follow(options)?;
        Ok(Self::with(Engine::Postgres(Box::new(pg)), extra))
    }

    /// The store with its tree moved out of an earlier layout (`super::tiles::legacy`): the
    /// writer's opens only, which hold the database (PostgreSQL: the lease).
    fn moved(self) -> Result<Store, Error> {
        let moved = super::tiles::legacy::migrate(&self)?;
        if moved > 0 {
            tracing::info!(
                nodes = moved,
                "tree: lower levels moved to one value per tile"
            );
        }
        Ok(self)
    }

    fn with(engine: Engine, extra: &[&str]) -> Store {
        Store {
            engine,
            extra: extra
                .iter()
                .filter(|n| !CFS.contains(n))
                .map(|n| n.to_string())
                .collect(),
            upper: Default::default(),
        }
    }

    /// [`Store::open`] for an offline audit (`accordctl ledger verify`), which writes nothing: a
    /// store whose tree is still in the layout before tiles ([`super::tiles`]) is not moved but
    /// refused, with what to do.
    pub fn open_unmoved(dir: &Path, extra: &[&str]) -> Result<Store, Error> {
        let default = crate::config::StorageConfig::default().block_cache_mib;
        let store = Self::with(
            Engine::Rocks(rocks::Rocks::open(dir, extra, default)?),
            extra,
        );
        if super::tiles::legacy::old_layout_present(&store)? {
            return Err(Error::FailedPrecondition(format!(
                "{}: the Merkle tree is stored in the layout of an earlier accord-node; start the \
                 node once (it moves the tree at open) and verify again",
                dir.display()
            )));
        }
        Ok(store)
    }

    /// The store as found, its tree not moved out of an earlier layout (tests of the reads a
    /// standby makes of a store its writer has not moved yet).
    #[cfg(test)]
    pub(in crate::ledger) fn open_as_found(dir: &Path) -> Result<Store, Error> {
        let default = crate::config::StorageConfig::default().block_cache_mib;
        Ok(Self::with(
            Engine::Rocks(rocks::Rocks::open(dir, &[], default)?),
            &[],
        ))
    }

    /// The engine.
    pub(in crate::ledger) fn kv(&self) -> &dyn Kv {
        match &self.engine {
            Engine::Rocks(r) => r,
            Engine::Postgres(p) => p.as_ref(),
        }
    }

    /// The RocksDB engine, for what only it has (the tree's layout move and its tests).
    pub(in crate::ledger) fn rocks_engine(&self) -> Option<&rocks::Rocks> {
        match &self.engine {
            Engine::Rocks(r) => Some(r),
            Engine::Postgres(_) => None,
        }
    }

    /// The PostgreSQL engine, if that is the store's.
    pub fn postgres(&self) -> Option<&postgres::Pg> {
        match &self.engine {
            Engine::Postgres(p) => Some(p),
            Engine::Rocks(_) => None,
        }
    }

    /// An empty batch for a group commit of about `bytes`, in this store's form.
    pub(in crate::ledger) fn batch_for(&self, bytes: usize) -> Batch {
        match &self.engine {
            Engine::Rocks(_) => Batch::rocks_with_capacity(bytes),
            Engine::Postgres(_) => Batch::default(),
        }
    }

    /// Adds a put to one of the ledger's own families (the writer only).
    pub(super) fn put_ledger(
        &self,
        batch: &mut Batch,
        cf: &str,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), Error> {
        self.kv().put(batch, cf, key, value)
    }

    /// The name of a family declared at open by another module; never one of [`CFS`].
    fn extra_cf<'a>(&self, name: &'a str) -> Result<&'a str, Error> {
        if CFS.contains(&name) {
            return Err(Error::Internal(format!(
                "column family {name} belongs to the ledger"
            )));
        }
        match self.extra.iter().any(|n| n == name) {
            true => Ok(name),
            false => Err(Error::Internal(format!("missing column family {name}"))),
        }
    }

    /// Reads a value of an extra column family.
    pub fn get_extra(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.kv().get(self.extra_cf(cf)?, key)
    }

    /// Adds a put to an extra column family to `batch`.
    pub fn put_extra(
        &self,
        batch: &mut Batch,
        cf: &str,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), Error> {
        self.kv().put(batch, self.extra_cf(cf)?, key, value)
    }

    /// Adds a delete in an extra column family to `batch`.
    pub fn delete_extra(&self, batch: &mut Batch, cf: &str, key: &[u8]) -> Result<(), Error> {
        self.kv().delete(batch, self.extra_cf(cf)?, key)
    }

    /// Adds the deletion of keys in `[from, to)` of an extra column family to `batch`.
    pub fn delete_range_extra(
        &self,
        batch: &mut Batch,
        cf: &str,
        from: &[u8],
        to: &[u8],
    ) -> Result<(), Error> {
        self.kv().delete_range(batch, self.extra_cf(cf)?, from, to)
    }

    /// Adds a `meta` value to `batch` (e.g. a cursor written with what it covers).
    pub fn batch_meta(&self, batch: &mut Batch, key: &str, value: &[u8]) -> Result<(), Error> {
        self.kv().put(batch, "meta", key.as_bytes(), value)
    }

    /// Writes `batch` at once; `sync` waits for it to be durable.
    pub fn write(&self, batch: Batch, sync: bool) -> Result<(), Error> {
        self.kv().write(batch, sync)
    }

    /// Visits the entries of an extra column family in key order from `from` (inclusive) while
    /// `f` returns true.
    pub fn scan_extra(
        &self,
        cf: &str,
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        self.kv().scan(self.extra_cf(cf)?, from, None, &mut f)
    }

    /// Visits the entries of an extra column family in reverse key order from the last key
    /// `<= from` while `f` returns true.
    pub fn scan_extra_rev(
        &self,
        cf: &str,
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        self.kv().scan_rev(self.extra_cf(cf)?, from, &mut f)
    }

    /// Number of records (one past the last sequence), read from the store (the writer's
    /// cached value is [`super::Ledger::len`]).
    pub fn record_count(&self) -> Result<u64, Error> {
        let mut last = None;
        self.kv()
            .scan_rev("records", &u64::MAX.to_be_bytes(), &mut |k, _| {
                last = Some(u64_key(k));
                false
            })?;
        match last {
            Some(k) => Ok(k? + 1),
            None => Ok(0),
        }
    }

    /// One entry by sequence.
    pub fn get(&self, seq: u64) -> Result<Option<LedgerEntry>, Error> {
        match self.kv().get("records", &seq.to_be_bytes())? {
            Some(v) => Ok(Some(decode_entry(&v)?)),
            None => Ok(None),
        }
    }

    /// The sequence of a record id.
    pub fn seq_of(&self, id: &RecordId) -> Result<Option<u64>, Error> {
        match self.kv().get("ids", id)? {
            Some(v) => Ok(Some(u64_key(&v)?)),
            None => Ok(None),
        }
    }

    /// Sequences of several record ids at once.
    pub fn seqs_of(&self, ids: &[RecordId]) -> Result<Vec<Option<u64>>, Error> {
        let keys: Vec<&[u8]> = ids.iter().map(|i| i.as_slice()).collect();
        self.kv()
            .multi_get("ids", &keys, false)?
            .into_iter()
            .map(|v| v.map(|v| u64_key(&v)).transpose())
            .collect()
    }

    /// One entry by record id.
    pub fn get_by_id(&self, id: &RecordId) -> Result<Option<LedgerEntry>, Error> {
        match self.seq_of(id)? {
            Some(s) => self.get(s),
            None => Ok(None),
        }
    }

    /// Up to `limit` entries from `from`, in order.
    pub fn range(&self, from: u64, limit: usize) -> Result<Vec<LedgerEntry>, Error> {
        let mut out = Vec::new();
        let mut bad = None;
        if limit > 0 {
            self.kv()
                .scan("records", &from.to_be_bytes(), None, &mut |_, v| {
                    match decode_entry(v) {
                        Ok(e) => out.push(e),
                        Err(e) => bad = Some(e),
                    }
                    bad.is_none() && out.len() < limit
                })?;
        }
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Reads a `meta` value.
    pub fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.kv().get("meta", key.as_bytes())
    }

    /// Writes a `meta` value durably.
    pub fn put_meta(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        let mut batch = Batch::default();
        self.batch_meta(&mut batch, key, value)?;
        self.write(batch, true)
    }

    /// Whether RocksDB has a flush or a compaction of the tree running or pending: `accordctl
    /// bench log` waits for it to end before timing proofs, so that its figures are those of a
    /// settled tree, not of reads racing the compaction of the bulk just written. PostgreSQL:
    /// never.
    pub fn tree_background_busy(&self) -> Result<bool, Error> {
        match &self.engine {
            Engine::Rocks(r) => r.tree_background_busy(),
            Engine::Postgres(_) => Ok(false),
        }
    }

    /// Compacts every column family down to its bottommost level (measurements of the space a
    /// ledger takes once its data is cold: `BENCHMARKS.md`, "Space"). PostgreSQL: nothing.
    pub fn compact(&self) -> Result<(), Error> {
        match &self.engine {
            Engine::Rocks(r) => r.compact(),
            Engine::Postgres(_) => Ok(()),
        }
    }

    /// Writes every column family's memtable to its files (at a clean stop), so that the next
    /// open has no write-ahead log to replay: start-up then costs the same at any ledger size
    /// (issue 15: before this, a node stopped after a bulk of writes replayed seconds of WAL).
    /// PostgreSQL: releases the writer's lease instead, so a restart need not wait for it.
    pub fn flush_all(&self) -> Result<(), Error> {
        match &self.engine {
            Engine::Rocks(r) => r.flush_all(),
            Engine::Postgres(p) => p.release(),
        }
    }

    /// RocksDB's memory, summed over every column family (issue 15: where a node's resident
    /// memory goes): `(property, bytes)` for the block cache's use and pinned part, the table
    /// readers outside it, and the memtables. Empty on PostgreSQL.
    pub fn memory(&self) -> Vec<(&'static str, u64)> {
        match &self.engine {
            Engine::Rocks(r) => r.memory(),
            Engine::Postgres(_) => Vec::new(),
        }
    }
}

pub(crate) fn storage(e: rocksdb::Error) -> Error {
    Error::Storage(e.into_string())
}

fn u64_key(k: &[u8]) -> Result<u64, Error> {
    let a: [u8; 8] = k
        .try_into()
        .map_err(|_| Error::Storage("bad u64 key".into()))?;
    Ok(u64::from_be_bytes(a))
}

fn decode_entry(v: &[u8]) -> Result<LedgerEntry, Error> {
    LedgerEntry::decode(v).map_err(|e| Error::Storage(format!("corrupt ledger entry: {e}")))
}

#[cfg(test)]
#[path = "space_tests.rs"]
mod space;
