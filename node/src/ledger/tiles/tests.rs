use super::legacy::{self, node_tile_key, parse_node_tile_key};
use super::*;
use crate::ledger::{AcceptAll, Ledger, Store, TreeNodes};
use accord_proto::merkle::{self, CompactRange, MemoryTree, NodeSource};
use accord_proto::pb::record::v1::SignedRecord;
use proptest::prelude::*;
use prost::Message;

/// The leaf hash of `crate::ledger::grow`'s i-th record, computed here from its definition
/// (RFC 6962 leaf over the encoded `SignedRecord`), not read back from the store.
/// Nodes stored in a full tile: 64 + 32 + 16 + 8 + 4 + 2.
const TILE_NODES: usize = 126;

fn grown_leaf(i: u64) -> Hash {
    let signed = SignedRecord {
        payload: i.to_be_bytes().to_vec().into(),
        payload_type: "test".into(),
        signatures: vec![],
    };
    merkle::leaf_hash(&signed.encode_to_vec())
}

fn reference(n: u64) -> MemoryTree {
    MemoryTree::from_leaf_hashes(&(0..n).map(grown_leaf).collect::<Vec<_>>()).unwrap()
}

/// Every node of a tree of `n` leaves that a stored tree must hold, and every proof, equal the
/// reference's.
fn assert_same_tree(store: &Store, n: u64) {
    let want = reference(n);
    let nodes = TreeNodes(store);
    for level in 0..8u32 {
        for index in 0..(n >> level) {
            assert_eq!(
                store.tree_node(level, index).unwrap(),
                Some(want.node(level, index).unwrap()),
                "node ({level}, {index}) of {n}"
            );
        }
        // The first node no leaf completes yet is not there.
        assert_eq!(store.tree_node(level, n >> level).unwrap(), None);
    }
    for size in [1, 63, 64, 65, 129, n / 2 + 1, n] {
        assert_eq!(
            merkle::root(&nodes, size).unwrap(),
            merkle::root(&want, size).unwrap()
        );
        for index in (0..size).step_by(7) {
            assert_eq!(
                merkle::inclusion_proof(&nodes, index, size).unwrap(),
                merkle::inclusion_proof(&want, index, size).unwrap()
            );
        }
    }
}

/// Keys in `[from, to)` of the tree family.
fn keys_between(store: &Store, from: &[u8], to: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    store
        .kv()
        .scan("tree", from, Some(to), &mut |k, _| {
            out.push(k.to_vec());
            true
        })
        .unwrap();
    out
}

#[test]
fn a_tiles_value_holds_the_subtrees_its_leaves_complete() {
    let n = 3 * TILE_LEAVES + 17;
    let want = reference(n);
    let mut range = CompactRange::new();
    let mut buf = TileBuf::default();
    let mut values = Vec::new();
    for i in 0..n {
        for (level, index, hash) in range.push(grown_leaf(i)).unwrap() {
            if level < CACHED_LEVEL {
                buf.add(level, index, hash).unwrap();
            }
        }
        if buf.is_full() {
            values.push(buf.take().unwrap());
            assert!(buf.take().is_none(), "taken once");
        }
    }
    values.push(buf.take().unwrap());
    assert_eq!(values.len(), 4);
    for (tile, (key, value)) in values.iter().enumerate() {
        assert_eq!(key, &tile_key(tile as u64));
        let t = Tile::decode(value).unwrap();
        let k = if tile < 3 { 64 } else { 17 };
        assert_eq!(t.leaf_count(), k);
        // Full: 126 nodes; 17 leaves: 17 + 8 + 4 + 2 + 1 + 0 nodes.
        let nodes = if k == 64 { TILE_NODES } else { 32 };
        assert_eq!(value.len(), 1 + 32 * nodes);
        for level in 0..CACHED_LEVEL {
            let per = TILE_LEAVES >> level;
            for offset in 0..per {
                let index = tile as u64 * per + offset;
                let expect =
                    (offset < (k as u64 >> level)).then(|| want.node(level, index).unwrap());
                assert_eq!(t.node(level, offset), expect, "({level}, {index})");
            }
        }
        assert!(
            t.leaves()
                .eq((0..k as u64).map(|i| grown_leaf(tile as u64 * 64 + i)))
        );
    }
}

#[test]
fn malformed_tile_values_and_out_of_order_nodes_are_refused() {
    for bad in [
        vec![],
        vec![0u8],
        vec![65u8; 1 + 32 * 127],
        vec![1u8; 32],
        vec![2u8; 1 + 64],
    ] {
        assert!(
            matches!(Tile::decode(&bad), Err(Error::Storage(_))),
            "{} bytes",
            bad.len()
        );
    }
    let mut buf = TileBuf::default();
    assert!(buf.add(0, 1, [1; 32]).is_err(), "leaf 1 before leaf 0");
    buf.add(0, 0, [1; 32]).unwrap();
    assert!(buf.add(0, 64, [1; 32]).is_err(), "another tile's leaf");
    assert!(buf.add(1, 0, [1; 32]).is_ok());
    assert!(buf.add(6, 0, [1; 32]).is_err(), "an upper level");
}

/// Grown in batches that end inside tiles, across a restart (the last tile read back), the
/// stored tree is the reference tree, with one key per tile.
#[tokio::test]
async fn the_writer_keeps_one_value_per_tile_across_batches_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = crate::clock::Clock::system();
    let (ledger, writer) = Ledger::open(dir.path(), AcceptAll, 4096, clock.clone()).unwrap();
    for to in [1, 5, 63, 64, 65, 200] {
        crate::ledger::grow(&ledger, to).await;
    }
    assert_same_tree(ledger.store(), 200);
    ledger.stop().await;
    drop(ledger);
    writer.join().unwrap();

    let (ledger, writer) = Ledger::open(dir.path(), AcceptAll, 4096, clock).unwrap();
    for to in [201, 700] {
        crate::ledger::grow(&ledger, to).await;
    }
    let store = ledger.store().clone();
    assert_same_tree(&store, 700);
    // 700 leaves: ten full tiles and one of 60; nothing under a per-node key.
    let tiles = keys_between(&store, &[TILE_TAG], &[TILE_TAG + 1]);
    assert_eq!(
        tiles,
        (0..11).map(|t| tile_key(t).to_vec()).collect::<Vec<_>>()
    );
    assert!(keys_between(&store, &[0], &[CACHED_LEVEL as u8]).is_empty());
    ledger.stop().await;
    drop((ledger, store));
    writer.join().unwrap();
}

/// Rewrites a closed store's lower levels in an earlier layout from the reference tree.
fn rewrite_as(path: &std::path::Path, n: u64, node_tiles: bool) -> u64 {
    let want = reference(n);
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).unwrap();
    let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), path, cfs).unwrap();
    let cf = db.cf_handle("tree").unwrap();
    let mut batch = rocksdb::WriteBatch::default();
    batch.delete_range_cf(cf, [TILE_TAG], [TILE_TAG + 1]);
    let mut lower = 0u64;
    for level in 0..CACHED_LEVEL {
        for index in 0..(n >> level) {
            let h = want.node(level, index).unwrap();
            if node_tiles {
                batch.put_cf(cf, node_tile_key(level, index), h);
            } else {
                batch.put_cf(cf, upper_key_unchecked(level, index), h);
            }
            lower += 1;
        }
    }
    db.write(batch).unwrap();
    db.flush_cf(cf).unwrap();
    lower
}

/// `level ‖ index` for any level (the first layout's key).
fn upper_key_unchecked(level: u32, index: u64) -> Vec<u8> {
    let mut k = vec![level as u8];
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// A store in either earlier layout opens with its lower levels moved to one value per tile:
/// nothing left in the old ranges, every node, root and proof the reference's, and the next
/// open moves nothing. The offline audit's open refuses it first and writes nothing.
#[tokio::test]
async fn stores_in_earlier_layouts_are_moved_to_tile_values_on_open() {
    const N: u64 = 700;
    for node_tiles in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, writer) =
            Ledger::open(dir.path(), AcceptAll, 4096, crate::clock::Clock::system()).unwrap();
        crate::ledger::grow(&ledger, N).await;
        ledger.stop().await;
        drop(ledger);
        writer.join().unwrap();

        let path = dir.path();
        // 700 leaves: 700 + 350 + 175 + 87 + 43 + 21 nodes below level 6.
        assert_eq!(rewrite_as(path, N, node_tiles), 1376);

        for _ in 0..2 {
            let e = Store::open_unmoved(path, &[]).unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m) if m.contains("earlier accord-node")),
                "{e}"
            );
        }

        if node_tiles {
            // Before the move (a standby following an older writer), the reads find the nodes
            // under their per-node keys.
            let found = Store::open_as_found(path).unwrap();
            assert!(keys_between(&found, &[TILE_TAG], &[TILE_TAG + 1]).is_empty());
            assert_same_tree(&found, N);
        }

        let store = Store::open(path, &[]).unwrap();
        assert!(keys_between(&store, &[0], &[CACHED_LEVEL as u8]).is_empty());
        assert!(keys_between(&store, &[legacy::OLD_TILE_TAG], &[TILE_TAG]).is_empty());
        assert_eq!(keys_between(&store, &[TILE_TAG], &[TILE_TAG + 1]).len(), 11);
        assert!(!legacy::old_layout_present(&store).unwrap());
        assert_eq!(
            legacy::migrate(&store).unwrap(),
            0,
            "the next open moves nothing"
        );
        assert_same_tree(&store, N);
        drop(store);
        // And the writer goes on from the moved last tile.
        let (ledger, writer) =
            Ledger::open(path, AcceptAll, 4096, crate::clock::Clock::system()).unwrap();
        crate::ledger::grow(&ledger, N + 30).await;
        assert_same_tree(ledger.store(), N + 30);
        ledger.stop().await;
        drop(ledger);
        writer.join().unwrap();
    }
}

/// A node-tile tile that is not a prefix of leaves (a node missing) is refused, not moved.
#[tokio::test]
async fn a_node_tile_with_a_hole_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, writer) =
        Ledger::open(dir.path(), AcceptAll, 4096, crate::clock::Clock::system()).unwrap();
    crate::ledger::grow(&ledger, 100).await;
    ledger.stop().await;
    drop(ledger);
    writer.join().unwrap();
    rewrite_as(dir.path(), 100, true);
    {
        let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir.path()).unwrap();
        let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), dir.path(), cfs).unwrap();
        db.delete_cf(db.cf_handle("tree").unwrap(), node_tile_key(2, 3))
            .unwrap();
    }
    let e = Store::open(dir.path(), &[]).unwrap_err();
    assert!(
        matches!(&e, Error::Storage(m) if m.contains("tile 0")),
        "{e}"
    );
}

proptest! {
    #[test]
    fn every_node_tile_key_parses_back(level in 0u32..CACHED_LEVEL, index in 0u64..(1 << 40)) {
        prop_assert_eq!(parse_node_tile_key(&node_tile_key(level, index)), Some((level, index)));
    }

    #[test]
    fn upper_keys_sort_by_index_within_a_level(level in CACHED_LEVEL..64, a in 0u64..(1 << 40), b in 0u64..(1 << 40)) {
        prop_assert_eq!(upper_key(level, a).cmp(&upper_key(level, b)), a.cmp(&b));
        prop_assert_eq!(upper_index(&upper_key(level, a)).unwrap(), a);
    }

    #[test]
    fn a_node_is_in_the_tile_over_its_leaves(level in 0u32..CACHED_LEVEL, index in 0u64..(1 << 40)) {
        let (tile, offset) = tile_of(level, index);
        prop_assert_eq!(tile, (index << level) / TILE_LEAVES);
        prop_assert!(offset < TILE_LEAVES >> level);
    }
}
