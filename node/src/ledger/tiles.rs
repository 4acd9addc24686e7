//! Keys of the `tree` column family: the Merkle tree's lower levels stored tile by tile
//! (issue 14, item 4).
//!
//! A proof over n leaves needs one node per level. The levels ≥ [`CACHED_LEVEL`] are shared by
//! every proof and kept in memory ([`super::store`]'s upper-level cache); the levels below it
//! are read from RocksDB. Stored level by level (`level ‖ index`), the six lower nodes of one
//! proof sat in six different blocks, so on a tree larger than the block cache (10^6 leaves and
//! up) a proof cost six block reads where a record read costs one: inclusion proofs took 10×
//! longer at 10^6 leaves than at 10^3 while record reads took 1.8× (BENCHMARKS.md).
//!
//! So the levels below [`CACHED_LEVEL`] are keyed by *tile*: the perfect subtree over 64
//! aligned leaves (the tiles of c2sp.org/tlog-tiles, with height 6). Every node of one tile —
//! its 64 leaves and 62 inner nodes below the tile's root, about 4.7 KiB with RocksDB's
//! framing — has the same key prefix, so they are contiguous on disk, and the lower half of
//! any inclusion proof (the siblings of a leaf inside its tile) lies in one or two blocks:
//!
//! | level | key |
//! |---|---|
//! | `< CACHED_LEVEL` | [`TILE_TAG`] ‖ tile (u64 BE: `index >> (CACHED_LEVEL − level)`) ‖ level (u8) ‖ offset in the tile (u8) |
//! | `≥ CACHED_LEVEL` | level (u8) ‖ index (u64 BE) — one level's nodes contiguous, so the cache fills by range scans |
//!
//! The tile root itself is level [`CACHED_LEVEL`] and lives in the upper layout.
//!
//! Stores written before this layout kept every level as `level ‖ index`; [`migrate`] moves
//! their lower levels to tile keys when the store is opened (once: afterwards no such key is
//! left), in atomic batches, so a crash in the middle leaves every node under one of its two
//! keys and the next open finishes the move.

use super::store::{CACHED_LEVEL, storage};
use crate::error::Error;

/// The first byte of a tile key: above every level (levels are < 64).
pub const TILE_TAG: u8 = 0x80;

/// A key of the `tree` column family: 9 bytes for an upper-level node, 11 for a tile's node.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct TreeKey {
    bytes: [u8; 11],
    len: u8,
}

impl AsRef<[u8]> for TreeKey {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The key of tree node (`level`, `index`) (the layout above).
pub fn tree_key(level: u32, index: u64) -> TreeKey {
    let mut bytes = [0u8; 11];
    if level < CACHED_LEVEL {
        let shift = CACHED_LEVEL - level;
        bytes[0] = TILE_TAG;
        bytes[1..9].copy_from_slice(&(index >> shift).to_be_bytes());
        bytes[9] = level as u8;
        // < 2^shift ≤ 64: fits a byte.
        bytes[10] = (index & ((1 << shift) - 1)) as u8;
        TreeKey { bytes, len: 11 }
    } else {
        bytes[0] = level as u8;
        bytes[1..9].copy_from_slice(&index.to_be_bytes());
        TreeKey { bytes, len: 9 }
    }
}

/// The node (`level`, `index`) a stored key names, `None` for a key of neither layout.
pub fn parse_key(key: &[u8]) -> Option<(u32, u64)> {
    match key.len() {
        9 if key[0] < TILE_TAG => {
            let index = u64::from_be_bytes(key[1..9].try_into().ok()?);
            Some((u32::from(key[0]), index))
        }
        11 if key[0] == TILE_TAG && u32::from(key[9]) < CACHED_LEVEL => {
            let level = u32::from(key[9]);
            let shift = CACHED_LEVEL - level;
            let tile = u64::from_be_bytes(key[1..9].try_into().ok()?);
            let offset = u64::from(key[10]);
            if offset >= 1 << shift {
                return None;
            }
            Some((level, (tile << shift) | offset))
        }
        _ => None,
    }
}

/// Whether the store still holds a node under the layout before tiles (one seek).
pub(super) fn old_layout_present(
    db: &rocksdb::DB,
    cf: &rocksdb::ColumnFamily,
) -> Result<bool, Error> {
    let mut ro = rocksdb::ReadOptions::default();
    ro.set_iterate_upper_bound(vec![CACHED_LEVEL as u8]);
    let mut it = db.raw_iterator_cf_opt(cf, ro);
    it.seek([0u8]);
    let found = it.key().is_some();
    it.status().map_err(storage)?;
    Ok(found)
}

/// Nodes moved per atomic batch by [`migrate`].
const MIGRATE_BATCH: usize = 65_536;

/// Moves the lower levels of a store written with the old layout (`level ‖ index` for every
/// level) to tile keys; returns how many nodes moved (0, after one seek, on a store that has
/// none). One pass of one iterator (its view is fixed when it is made, so the batches written
/// behind it do not disturb it); each batch puts its nodes under their new keys and deletes the
/// old keys atomically, synced, so a crash leaves every node under one of its two keys and the
/// next open moves what is left. A key in the old levels' range that is not a node's is refused
/// (a corrupt store), not deleted.
pub(super) fn migrate(db: &rocksdb::DB, cf: &rocksdb::ColumnFamily) -> Result<u64, Error> {
    let mut ro = rocksdb::ReadOptions::default();
    ro.set_iterate_upper_bound(vec![CACHED_LEVEL as u8]);
    let mut it = db.raw_iterator_cf_opt(cf, ro);
    it.seek([0u8]);
    let mut wo = rocksdb::WriteOptions::default();
    wo.set_sync(true);
    let mut moved = 0u64;
    let mut batch = rocksdb::WriteBatch::default();
    loop {
        let next = match (it.key(), it.value()) {
            (Some(k), Some(v)) => Some((k, v)),
            _ => None,
        };
        if let Some((k, v)) = next {
            let Some((level, index)) = parse_key(k).filter(|_| k.len() == 9) else {
                return Err(Error::Storage(format!(
                    "tree: unexpected key {} in the old layout's range",
                    hex::encode(k)
                )));
            };
            batch.put_cf(cf, tree_key(level, index), v);
            batch.delete_cf(cf, k);
            moved += 1;
        }
        if next.is_none() || batch.len() >= 2 * MIGRATE_BATCH {
            if !batch.is_empty() {
                db.write_opt(std::mem::take(&mut batch), &wo)
                    .map_err(storage)?;
            }
            if next.is_none() {
                it.status().map_err(storage)?;
                return Ok(moved);
            }
        }
        it.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_tiles_nodes_share_its_prefix_and_levels_stay_apart() {
        // Leaf 130 is in tile 2 (leaves 128..192); its siblings' keys below the cached level
        // all start with the tile's prefix.
        let prefix = tree_key(0, 130).as_ref()[..9].to_vec();
        for (level, index) in [(0, 131), (1, 64), (2, 33), (3, 17), (4, 9), (5, 5)] {
            assert_eq!(tree_key(level, index).as_ref()[..9], prefix[..]);
        }
        assert_ne!(tree_key(0, 192).as_ref()[..9], prefix[..]);
        // The cached levels keep `level ‖ index`, contiguous within a level.
        assert_eq!(tree_key(6, 2).as_ref(), &[6, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert!(tree_key(6, 2) < tree_key(6, 3) && tree_key(6, 3) < tree_key(7, 0));
        // Keys of a tile's leaves are in leaf order, and tiles in tile order.
        assert!(tree_key(0, 63) < tree_key(1, 0));
        assert!(tree_key(5, 1) < tree_key(0, 64));
    }

    #[test]
    fn keys_of_neither_layout_are_refused() {
        assert_eq!(parse_key(&[]), None);
        assert_eq!(parse_key(&[TILE_TAG; 9]), None);
        let mut k = tree_key(5, 3).as_ref().to_vec();
        k[10] = 2; // offset beyond a level-5 tile's two nodes
        assert_eq!(parse_key(&k), None);
        k[9] = 6;
        assert_eq!(parse_key(&k), None);
    }

    /// A store written with the old layout (every level as `level ‖ index`) opens with its
    /// lower levels moved to tile keys: nothing left in the old range, every proof and root as
    /// before, and the next open moves nothing.
    #[tokio::test]
    async fn an_old_layout_store_is_moved_to_tiles_on_open() {
        use crate::ledger::{AcceptAll, Ledger, Store, TreeNodes};
        use accord_proto::merkle::{self, MemoryTree, NodeSource};
        const N: u64 = 700;
        let dir = tempfile::tempdir().unwrap();
        let (ledger, writer) =
            Ledger::open(dir.path(), AcceptAll, 4096, crate::clock::Clock::system()).unwrap();
        crate::ledger::grow(&ledger, N).await;
        let store = ledger.store().clone();
        let mut reference = MemoryTree::new();
        for i in 0..N {
            reference
                .push(store.tree_node(0, i).unwrap().unwrap())
                .unwrap();
        }
        ledger.stop().await;
        drop((ledger, store));
        writer.join().unwrap();

        // Rewrite the tree as the old layout stored it.
        let path = dir.path();
        let lower = {
            let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).unwrap();
            let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), path, cfs).unwrap();
            let cf = db.cf_handle("tree").unwrap();
            let mut batch = rocksdb::WriteBatch::default();
            let mut lower = 0u64;
            for kv in db.iterator_cf(cf, rocksdb::IteratorMode::Start) {
                let (k, v) = kv.unwrap();
                let (level, index) = parse_key(&k).unwrap();
                if level < CACHED_LEVEL {
                    let mut old = vec![level as u8];
                    old.extend_from_slice(&index.to_be_bytes());
                    batch.delete_cf(cf, &k);
                    batch.put_cf(cf, old, v);
                    lower += 1;
                }
            }
            db.write(batch).unwrap();
            db.flush_cf(cf).unwrap();
            lower
        };
        // 700 leaves: 700 + 350 + 175 + 87 + 43 + 21 nodes below level 6.
        assert_eq!(lower, 1376);

        // The audit's open writes nothing: it refuses the old layout, and leaves it as it is.
        let e = Store::open_unmoved(path, &[]).unwrap_err();
        assert!(
            matches!(&e, crate::error::Error::FailedPrecondition(m) if m.contains("earlier accord-node")),
            "{e}"
        );
        let e = Store::open_unmoved(path, &[]).unwrap_err();
        assert!(
            matches!(e, crate::error::Error::FailedPrecondition(_)),
            "still there"
        );

        let store = Store::open(path, &[]).unwrap();
        {
            let rocks = store.rocks().unwrap();
            let db = &rocks.db;
            let cf = rocks.cf("tree").unwrap();
            let mut it = db.raw_iterator_cf(cf);
            it.seek([0u8]);
            assert!(
                it.key().is_none_or(|k| k[0] >= CACHED_LEVEL as u8),
                "an old-layout key is left"
            );
            assert_eq!(migrate(db, cf).unwrap(), 0, "the next open moves nothing");
            assert!(!old_layout_present(db, cf).unwrap());
        }
        let nodes = TreeNodes(&store);
        for size in [1, 63, 64, 65, 129, 512, N] {
            assert_eq!(
                merkle::root(&nodes, size).unwrap(),
                merkle::root(&reference, size).unwrap()
            );
            for index in (0..size).step_by(7) {
                assert_eq!(
                    merkle::inclusion_proof(&nodes, index, size).unwrap(),
                    merkle::inclusion_proof(&reference, index, size).unwrap()
                );
            }
        }
        assert_eq!(nodes.node(3, 10).unwrap(), reference.node(3, 10).unwrap());
    }

    proptest! {
        #[test]
        fn every_node_key_parses_back(level in 0u32..64, index in 0u64..(1 << 40)) {
            prop_assert_eq!(parse_key(tree_key(level, index).as_ref()), Some((level, index)));
        }

        #[test]
        fn key_order_within_a_level_is_index_order(level in 0u32..64, a in 0u64..(1 << 40), b in 0u64..(1 << 40)) {
            prop_assert_eq!(tree_key(level, a).cmp(&tree_key(level, b)), a.cmp(&b));
        }
    }
}
