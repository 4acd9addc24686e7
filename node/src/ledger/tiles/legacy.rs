//! The tree's two earlier layouts, and their move to one value per tile at open.
//!
//! - **Levels** (before issue 14's tiles): every level as `level ‖ index`, the lower levels too.
//! - **Node tiles** (issue 14 to issue 32): the lower levels keyed by node within their tile,
//!   [`OLD_TILE_TAG`] ‖ tile (u64 BE) ‖ level (u8) ‖ offset in the tile (u8), so a tile's nodes
//!   were contiguous but still 126 keys: a proof cost a filter probe and an index seek per level.
//!
//! A store in either layout opens with its lower levels moved to tile values
//! ([`super::Tile`]): first levels → node tiles (RocksDB only: PostgreSQL stores were never
//! written in it), then node tiles → tile values, each in atomic synced batches, so a crash in
//! the middle leaves every node under one of its keys and the next open finishes the move. A
//! key in an old layout's range that is not a node's is refused (a corrupt store), not deleted.

use super::super::store::{CACHED_LEVEL, Store, storage};
use super::{TILE_LEAVES, level_start, tile_key};
use crate::error::Error;

/// The first byte of a node-tile key (the layout before one value per tile).
pub const OLD_TILE_TAG: u8 = 0x80;

/// The node-tile key of node (`level`, `index`), `level < CACHED_LEVEL`.
pub fn node_tile_key(level: u32, index: u64) -> [u8; 11] {
    let (tile, offset) = super::tile_of(level, index);
    let mut bytes = [0u8; 11];
    bytes[0] = OLD_TILE_TAG;
    bytes[1..9].copy_from_slice(&tile.to_be_bytes());
    bytes[9] = level as u8;
    // < 2^(CACHED_LEVEL − level) ≤ 64: fits a byte.
    bytes[10] = offset as u8;
    bytes
}

/// The node (`level`, `index`) a node-tile key names, `None` for any other key.
pub fn parse_node_tile_key(key: &[u8]) -> Option<(u32, u64)> {
    if key.len() != 11 || key[0] != OLD_TILE_TAG || u32::from(key[9]) >= CACHED_LEVEL {
        return None;
    }
    let level = u32::from(key[9]);
    let shift = CACHED_LEVEL - level;
    let tile = u64::from_be_bytes(key[1..9].try_into().ok()?);
    let offset = u64::from(key[10]);
    (offset < 1 << shift).then_some((level, (tile << shift) | offset))
}

/// Whether the store still holds a node under either earlier layout (two seeks).
pub(in crate::ledger) fn old_layout_present(store: &Store) -> Result<bool, Error> {
    let mut found = false;
    for (from, to) in [
        ([0u8], [CACHED_LEVEL as u8]),
        ([OLD_TILE_TAG], [super::TILE_TAG]),
    ] {
        store.kv().scan("tree", &from, Some(&to), &mut |_, _| {
            found = true;
            false
        })?;
    }
    Ok(found)
}

/// Nodes moved per atomic batch.
const MIGRATE_BATCH: usize = 65_536;

/// Moves a store's tree from either earlier layout to tile values; returns how many nodes moved
/// (0, after two seeks, on a store that has none).
pub(in crate::ledger) fn migrate(store: &Store) -> Result<u64, Error> {
    let mut moved = 0;
    if let Some(rocks) = store.rocks_engine() {
        moved += levels_to_node_tiles(&rocks.db, rocks.cf("tree")?)?;
    }
    Ok(moved + node_tiles_to_tiles(store)?)
}

/// Levels → node tiles, RocksDB's own iterator: one pass (its view is fixed when it is made, so
/// the batches written behind it do not disturb it).
fn levels_to_node_tiles(db: &rocksdb::DB, cf: &rocksdb::ColumnFamily) -> Result<u64, Error> {
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
            let Some((level, index)) = (k.len() == 9)
                .then(|| super::upper_index(k).ok())
                .flatten()
                .map(|i| (u32::from(k[0]), i))
            else {
                return Err(Error::Storage(format!(
                    "tree: unexpected key {} in the old layout's range",
                    hex::encode(k)
                )));
            };
            batch.put_cf(cf, node_tile_key(level, index), v);
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

/// One tile read in the node-tile layout: its index, and its nodes' hashes and addresses in key
/// order (level by level, by offset).
type OldTile = (u64, Vec<[u8; 32]>, Vec<(u32, u64)>);

/// Node tiles → tile values, through the engine-neutral interface (PostgreSQL stores were
/// written with node tiles): whole tiles per round, each round one scan and one synced batch
/// that puts the tiles' values and deletes their node keys.
fn node_tiles_to_tiles(store: &Store) -> Result<u64, Error> {
    let kv = store.kv();
    let mut moved = 0u64;
    let mut from = vec![OLD_TILE_TAG];
    loop {
        let mut tiles: Vec<OldTile> = Vec::new();
        let mut nodes = 0usize;
        let mut bad = None;
        let mut next_from = None;
        kv.scan("tree", &from, Some(&[super::TILE_TAG]), &mut |k, v| {
            let Some((level, index)) = parse_node_tile_key(k) else {
                bad = Some(format!(
                    "unexpected key {} in the old layout's range",
                    hex::encode(k)
                ));
                return false;
            };
            let Ok(h) = <[u8; 32]>::try_from(v) else {
                bad = Some(format!("node ({level}, {index}) is not 32 bytes"));
                return false;
            };
            let tile = super::tile_of(level, index).0;
            if tiles.last().is_none_or(|t| t.0 != tile) {
                if nodes >= MIGRATE_BATCH {
                    next_from = Some(k.to_vec());
                    return false;
                }
                tiles.push((tile, Vec::new(), Vec::new()));
            }
            if let Some(t) = tiles.last_mut() {
                t.1.push(h);
                t.2.push((level, index));
            }
            nodes += 1;
            true
        })?;
        if let Some(why) = bad {
            return Err(Error::Storage(format!("tree: {why}")));
        }
        if tiles.is_empty() {
            return Ok(moved);
        }
        let mut batch = store.batch_for(nodes * 40);
        for (tile, hashes, addrs) in &tiles {
            let value = tile_value(*tile, hashes, addrs)?;
            kv.put(&mut batch, "tree", &tile_key(*tile), &value)?;
            let first = tile * TILE_LEAVES;
            let (lo, hi) = (
                node_tile_key(0, first),
                node_tile_key(0, first + TILE_LEAVES),
            );
            kv.delete_range(&mut batch, "tree", &lo, &hi)?;
        }
        kv.write(batch, true)?;
        moved += nodes as u64;
        match next_from {
            Some(k) => from = k,
            None => return Ok(moved),
        }
    }
}

/// A tile's value from its node-tile nodes, which must be exactly the perfect subtrees its
/// first k leaves complete, level by level in offset order.
fn tile_value(tile: u64, hashes: &[[u8; 32]], addrs: &[(u32, u64)]) -> Result<Vec<u8>, Error> {
    let k = addrs.iter().filter(|(l, _)| *l == 0).count();
    let expected = (0..CACHED_LEVEL).flat_map(|l| {
        let base = (tile * TILE_LEAVES) >> l;
        (0..(k >> l) as u64).map(move |o| (l, base + o))
    });
    if k == 0 || k as u64 > TILE_LEAVES || !expected.eq(addrs.iter().copied()) {
        return Err(Error::Storage(format!(
            "tree: tile {tile} in the old layout is not a complete prefix of {k} leaves"
        )));
    }
    let mut v = Vec::with_capacity(1 + 32 * level_start(k, CACHED_LEVEL));
    v.push(k as u8);
    hashes.iter().for_each(|h| v.extend_from_slice(h));
    Ok(v)
}
