//! The embedded engine (the default): one RocksDB, a column family per family. Its tuning
//! (compression, block sizes, filters, memory bounds) is issue 14's and 15's, unchanged by the
//! storage boundary (issue 31): the typed operations of [`super::Store`] reach it through
//! [`super::Kv`].

use super::{Batch, CFS, Kv, storage};
use crate::error::Error;
use rocksdb::{BlockBasedOptions, ColumnFamilyDescriptor, DB, DBCompressionType, Options};
use std::path::Path;

/// The memtables of every column family together, bytes ([`super::Store::open`]).
pub const MEMTABLE_BUDGET: usize = 64 << 20;

/// The node's RocksDB.
pub struct Rocks {
    pub(in crate::ledger) db: DB,
}

/// Block compression of a column family (issue 15, item 5). Records (signed protobuf: names,
/// text, JSON-ish payloads) and the other modules' values compress; `ids` and `tree` hold
/// SHA-256 hashes, which do not, so compressing them would only cost CPU on every proof read.
/// LZ4 on the upper levels keeps flushes cheap; the bottommost level gets Zstandard for the
/// better ratio (on prose-like records LZ4 alone took 12 % more space). With dynamic level
/// sizing every L0 compaction writes the bottommost level, so its cost is every compaction's:
/// 16 KiB blocks (see [`cf_options`]) cut it by 43 %. Both codecs are compiled from source by the
/// rocksdb crate's `lz4` and `zstd` features: no system library is needed.
fn compression(name: &str) -> (DBCompressionType, DBCompressionType) {
    // The space measurement's baseline (`space::bytes_per_record`, test builds only).
    #[cfg(test)]
    if std::env::var_os("ACCORD_TEST_NO_COMPRESSION").is_some() {
        return (DBCompressionType::None, DBCompressionType::None);
    }
    match name {
        "ids" | "tree" => (DBCompressionType::None, DBCompressionType::None),
        _ => (DBCompressionType::Lz4, DBCompressionType::Zstd),
    }
}

/// The block size of compressed column families (see [`cf_options`]).
const COMPRESSED_BLOCK_SIZE: usize = 16 << 10;

/// The table options of every column family. Every index and filter block is charged to the
/// block cache (issue 15: without it, each open table file keeps its whole index in the heap,
/// outside any bound: RSS grew with the ledger, 909 MiB after 10,000 reads at 10^6 records);
/// the index and filter of the large families are partitioned, so only the partitions reads
/// touch are loaded, and the top level of each is pinned (small: one entry per partition).
fn cf_options(name: &str, cache: &rocksdb::Cache) -> Options {
    let mut o = Options::default();
    let (upper, bottom) = compression(name);
    o.set_compression_type(upper);
    o.set_bottommost_compression_type(bottom);
    let mut b = BlockBasedOptions::default();
    b.set_block_cache(cache);
    b.set_cache_index_and_filter_blocks(true);
    b.set_cache_index_and_filter_blocks_with_high_priority(true);
    b.set_pin_l0_filter_and_index_blocks_in_cache(true);
    b.set_format_version(5);
    b.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    b.set_partition_filters(true);
    b.set_metadata_block_size(4096);
    b.set_pin_top_level_index_and_filter(true);
    b.set_optimize_filters_for_memory(true);
    // Point lookups dominate `ids` (dedup), `tree` (every proof is O(log n) gets) and the
    // commitments' reads: bloom filters.
    if matches!(name, "ids" | "tree" | "pj_commitments" | "pj_readers") {
        b.set_bloom_filter(10.0, false);
    }
    if upper != DBCompressionType::None || name == "tree" {
        // Compressed families get 16 KiB blocks (RocksDB's default is 4 KiB): a quarter of the
        // per-block Zstandard work (building its tables was the top of the compaction threads'
        // profile: compaction CPU 6.9 s → 3.9 s in one bench run) and a better ratio; the block
        // cache holds blocks uncompressed, so hot point reads do not pay for the larger block
        // (issue 14, BENCHMARKS.md "Issue 14, session 7"). The tree too: one 64-leaf tile's
        // nodes take about 4.7 KiB, so with 16 KiB blocks most proofs read the lower half of
        // their path from one block (`super::tiles`).
        b.set_block_size(COMPRESSED_BLOCK_SIZE);
    }
    o.set_block_based_table_factory(&b);
    if name == "ids" || name == "pj_commitments" {
        // Every new record's id is looked up before it is written (dedup), and almost every
        // lookup misses: a whole-key bloom filter on the memtable answers those misses without
        // a skiplist search of random 32-byte keys (issue 14: `FindGreaterOrEqual` and memcmp
        // were the top of the writer's profile). Memory only; the files are unchanged. The same
        // for the commitments: a new commitment's id is looked up once (absent) per batch.
        o.set_memtable_prefix_bloom_ratio(0.1);
        o.set_memtable_whole_key_filtering(true);
    }
    o
}

impl Rocks {
    /// Opens or creates the database with the ledger's column families and `extra` ones.
    pub(super) fn open(dir: &Path, extra: &[&str], block_cache_mib: u64) -> Result<Rocks, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Storage(format!("create {}: {e}", dir.display())))?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(DBCompressionType::None);
        opts.increase_parallelism(2);
        // Bounds the write-ahead log a crash leaves to replay at the next open: past this size
        // RocksDB flushes the column families whose memtables hold the oldest log (issue 15:
        // start-up independent of history, also after a crash).
        opts.set_max_total_wal_size(64 << 20);
        // Bounds the memtables of all column families together (issue 15: each family's
        // default 64 MiB write buffer, times ~15 families, was unbounded in sum): past this the
        // largest memtable is flushed.
        opts.set_db_write_buffer_size(MEMTABLE_BUDGET);
        // Table files written by flushes and compactions are synced to disk a megabyte at a
        // time as they are written, not all at once when they are finished: one 64 MiB
        // writeback at the end of a flush stalled the ledger's synced log writes behind it on
        // the device (issue 14: `sync` maxima of 128 ms in the half-load phase, the p99's tail).
        opts.set_bytes_per_sync(1 << 20);
        let cache = rocksdb::Cache::new_lru_cache((block_cache_mib as usize) << 20);
        let cfs = CFS
            .iter()
            .chain(extra.iter().filter(|n| !CFS.contains(n)))
            .map(|n| ColumnFamilyDescriptor::new(*n, cf_options(n, &cache)));
        let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(storage)?;
        Ok(Rocks { db })
    }

    /// A column family handle.
    pub(in crate::ledger) fn cf(&self, name: &str) -> Result<&rocksdb::ColumnFamily, Error> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| Error::Internal(format!("missing column family {name}")))
    }

    pub(super) fn path(&self) -> &Path {
        self.db.path()
    }

    fn cf_names(&self) -> Vec<String> {
        DB::list_cf(&Options::default(), self.db.path()).unwrap_or_default()
    }

    /// Whether a flush or a compaction of the tree is running or pending.
    pub(super) fn tree_background_busy(&self) -> Result<bool, Error> {
        let cf = self.cf("tree")?;
        let mut busy = 0;
        for p in [
            "rocksdb.num-running-compactions",
            "rocksdb.num-running-flushes",
        ] {
            busy += self.db.property_int_value(p).map_err(storage)?.unwrap_or(0);
        }
        for p in [
            "rocksdb.compaction-pending",
            "rocksdb.mem-table-flush-pending",
        ] {
            busy += self
                .db
                .property_int_value_cf(cf, p)
                .map_err(storage)?
                .unwrap_or(0);
        }
        Ok(busy > 0)
    }

    /// Compacts every column family down to its bottommost level.
    pub(super) fn compact(&self) -> Result<(), Error> {
        for name in self.cf_names() {
            if let Some(cf) = self.db.cf_handle(&name) {
                self.db.flush_cf(cf).map_err(storage)?;
                self.db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
            }
        }
        Ok(())
    }

    /// Writes every column family's memtable to its files.
    pub(super) fn flush_all(&self) -> Result<(), Error> {
        let mut fo = rocksdb::FlushOptions::default();
        fo.set_wait(true);
        for name in self.cf_names() {
            if let Some(cf) = self.db.cf_handle(&name) {
                self.db.flush_cf_opt(cf, &fo).map_err(storage)?;
            }
        }
        Ok(())
    }

    /// RocksDB's memory (see [`super::Store::memory`]).
    pub(super) fn memory(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        // The block cache is shared: read through one family that uses it (`records`).
        let shared = self.cf("records").ok();
        for (name, per_cf) in [
            ("rocksdb.block-cache-usage", false),
            ("rocksdb.block-cache-pinned-usage", false),
            ("rocksdb.estimate-table-readers-mem", true),
            ("rocksdb.cur-size-all-mem-tables", true),
        ] {
            let v = if per_cf {
                self.cf_names()
                    .iter()
                    .filter_map(|n| self.db.cf_handle(n))
                    .filter_map(|cf| self.db.property_int_value_cf(cf, name).ok().flatten())
                    .sum()
            } else {
                shared
                    .and_then(|cf| self.db.property_int_value_cf(cf, name).ok().flatten())
                    .unwrap_or(0)
            };
            out.push((name, v));
        }
        out
    }
}

impl Kv for Rocks {
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .db
            .get_pinned_cf(self.cf(cf)?, key)
            .map_err(storage)?
            .map(|v| v.to_vec()))
    }

    fn multi_get(
        &self,
        cf: &str,
        keys: &[&[u8]],
        sorted: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, Error> {
        self.db
            .batched_multi_get_cf(self.cf(cf)?, keys.iter(), sorted)
            .into_iter()
            .map(|r| Ok(r.map_err(storage)?.map(|v| v.to_vec())))
            .collect()
    }

    fn scan(
        &self,
        cf: &str,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let mut ro = rocksdb::ReadOptions::default();
        if let Some(to) = to {
            ro.set_iterate_upper_bound(to.to_vec());
        }
        let mut it = self.db.raw_iterator_cf_opt(self.cf(cf)?, ro);
        it.seek(from);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if !f(k, v) {
                break;
            }
            it.next();
        }
        it.status().map_err(storage)
    }

    fn scan_rev(
        &self,
        cf: &str,
        from: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let mut it = self.db.raw_iterator_cf(self.cf(cf)?);
        it.seek_for_prev(from);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if !f(k, v) {
                break;
            }
            it.prev();
        }
        it.status().map_err(storage)
    }

    fn put(&self, batch: &mut Batch, cf: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let cf = self.cf(cf)?;
        batch.rocks()?.put_cf(cf, key, value);
        Ok(())
    }

    fn delete(&self, batch: &mut Batch, cf: &str, key: &[u8]) -> Result<(), Error> {
        let cf = self.cf(cf)?;
        batch.rocks()?.delete_cf(cf, key);
        Ok(())
    }

    fn delete_range(
        &self,
        batch: &mut Batch,
        cf: &str,
        from: &[u8],
        to: &[u8],
    ) -> Result<(), Error> {
        let cf = self.cf(cf)?;
        batch.rocks()?.delete_range_cf(cf, from, to);
        Ok(())
    }

    fn write(&self, mut batch: Batch, sync: bool) -> Result<(), Error> {
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(sync);
        let b = std::mem::take(batch.rocks()?);
        self.db.write_opt(b, &wo).map_err(storage)
    }
}
