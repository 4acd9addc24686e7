//! Keys and values of the `tree` column family: the Merkle tree's lower levels stored one value
//! per 64-leaf tile (issue 14, item 4; issue 32, item 4).
//!
//! A proof over n leaves needs one node per level. The levels ≥ [`CACHED_LEVEL`] are shared by
//! every proof and kept in memory (`super::store`'s upper-level cache); the levels below it are
//! read from the store. Those lower levels are grouped by *tile*: the perfect subtree over 64
//! aligned leaves (the tiles of c2sp.org/tlog-tiles, with height 6). All 126 nodes of one tile —
//! its 64 leaves and the 62 inner nodes below the tile's root — are **one value under one key**,
//! so the lower half of any inclusion proof is one point lookup (one filter probe, one index
//! seek, one block) wherever the tree is, in the memtable or deep in the LSM:
//!
//! | level | key | value |
//! |---|---|---|
//! | `< CACHED_LEVEL` | [`TILE_TAG`] ‖ tile (u64 BE) | [`Tile`]: leaf count k ‖ the tile's nodes, level by level |
//! | `≥ CACHED_LEVEL` | level (u8) ‖ index (u64 BE) — one level's nodes contiguous, so the cache fills by range scans | the node's hash |
//!
//! The tile root itself is level [`CACHED_LEVEL`] and lives in the upper layout. A tile's value
//! holds, after its leaf count k (1..=64), the `k >> l` nodes of each level l = 0..6 in index
//! order: exactly the perfect subtrees its first k leaves complete. The writer rewrites the last,
//! partial tile in every group commit that adds to it ([`TileBuf`]) and writes a full tile once,
//! in the batch of the leaf that completes it; a reader of a tree of size n asks only for nodes
//! of perfect subtrees within n, which the tile written with the n-th leaf holds.
//!
//! Two earlier layouts are moved at open ([`legacy`]): every level as `level ‖ index` (before
//! issue 14's tiles), and one key per node of a tile (`0x80 ‖ tile ‖ level ‖ offset`, issue 14
//! to issue 32).

pub(super) mod legacy;

use super::store::{CACHED_LEVEL, Kv};
use crate::error::Error;
use accord_proto::merkle::Hash;

/// Leaves in one tile.
pub const TILE_LEAVES: u64 = 1 << CACHED_LEVEL;

/// The first byte of a tile's key: above every level (levels are < 64) and apart from the
/// per-node tile keys of the previous layout (`legacy::OLD_TILE_TAG`).
pub const TILE_TAG: u8 = 0x81;

/// The key of the upper-level node (`level`, `index`), `level ≥ CACHED_LEVEL`.
pub fn upper_key(level: u32, index: u64) -> [u8; 9] {
    debug_assert!((CACHED_LEVEL..64).contains(&level));
    let mut k = [0u8; 9];
    k[0] = level as u8;
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The key of tile `tile` (leaves `[64·tile, 64·(tile + 1))`).
pub fn tile_key(tile: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = TILE_TAG;
    k[1..].copy_from_slice(&tile.to_be_bytes());
    k
}

/// The tile holding node (`level`, `index`), `level < CACHED_LEVEL`, and the node's index
/// within its level of that tile.
pub fn tile_of(level: u32, index: u64) -> (u64, u64) {
    let shift = CACHED_LEVEL - level;
    (index >> shift, index & ((1 << shift) - 1))
}

/// Where level `level`'s first node sits in the value of a tile of `k` leaves, in nodes.
fn level_start(k: usize, level: u32) -> usize {
    (0..level).map(|l| k >> l).sum()
}

/// A stored tile, decoded (borrowing the value).
#[derive(Debug, Clone, Copy)]
pub struct Tile<'a> {
    k: usize,
    nodes: &'a [u8],
}

impl<'a> Tile<'a> {
    /// Reads a tile's value, checking its leaf count against its length.
    pub fn decode(v: &'a [u8]) -> Result<Tile<'a>, Error> {
        let bad = |why: &str| Error::Storage(format!("tree: tile value {why}"));
        let (&k, nodes) = v.split_first().ok_or_else(|| bad("is empty"))?;
        let k = usize::from(k);
        if k == 0 || k as u64 > TILE_LEAVES {
            return Err(bad(&format!("has leaf count {k}")));
        }
        if nodes.len() != 32 * level_start(k, CACHED_LEVEL) {
            return Err(bad(&format!(
                "of {} bytes does not hold a {k}-leaf tile",
                v.len()
            )));
        }
        Ok(Tile { k, nodes })
    }

    /// The leaves stored (1..=64).
    pub fn leaf_count(&self) -> usize {
        self.k
    }

    /// The node at `offset` within level `level` of this tile, if the tile's leaves complete it.
    pub fn node(&self, level: u32, offset: u64) -> Option<Hash> {
        if level >= CACHED_LEVEL || offset >= (self.k >> level) as u64 {
            return None;
        }
        let at = 32 * (level_start(self.k, level) + offset as usize);
        self.nodes.get(at..at + 32)?.try_into().ok()
    }

    /// The leaf hashes stored, in order.
    pub fn leaves(&self) -> impl Iterator<Item = Hash> + 'a {
        self.nodes[..32 * self.k]
            .chunks_exact(32)
            .map(|c| c.try_into().unwrap_or([0u8; 32]))
    }
}

/// The writer's copy of the last tile, filled node by node as leaves complete them and written
/// whole ([`TileBuf::value`]) at the end of each group commit that changed it.
#[derive(Debug, Clone, Default)]
pub struct TileBuf {
    tile: u64,
    levels: [Vec<Hash>; CACHED_LEVEL as usize],
    dirty: bool,
}

impl TileBuf {
    /// The last tile of a tree of `size` leaves, read from the store (one lookup; none when the
    /// tree ends on a tile boundary).
    pub fn load(kv: &dyn Kv, size: u64) -> Result<TileBuf, Error> {
        let mut buf = TileBuf {
            tile: size / TILE_LEAVES,
            ..TileBuf::default()
        };
        let k = (size % TILE_LEAVES) as usize;
        if k == 0 {
            return Ok(buf);
        }
        let v = kv.get("tree", &tile_key(buf.tile))?.ok_or_else(|| {
            Error::Storage(format!(
                "tree: tile {} of a {size}-leaf tree is missing",
                buf.tile
            ))
        })?;
        let t = Tile::decode(&v)?;
        if t.leaf_count() != k {
            return Err(Error::Storage(format!(
                "tree: tile {} holds {} leaves, the {size}-leaf tree needs {k}",
                buf.tile,
                t.leaf_count()
            )));
        }
        for (l, level) in buf.levels.iter_mut().enumerate() {
            level.extend((0..(k >> l) as u64).filter_map(|o| t.node(l as u32, o)));
        }
        Ok(buf)
    }

    /// Adds a node below [`CACHED_LEVEL`] that a new leaf completed (`CompactRange::push`'s
    /// output, in order). Nodes come level by level in index order, so each goes at its level's
    /// end; one out of place means the tree and this copy disagree.
    pub fn add(&mut self, level: u32, index: u64, hash: Hash) -> Result<(), Error> {
        let (tile, offset) = tile_of(level, index);
        let at = self.levels.get_mut(level as usize);
        match at {
            Some(l) if tile == self.tile && offset == l.len() as u64 => {
                l.push(hash);
                self.dirty = true;
                Ok(())
            }
            _ => Err(Error::Internal(format!(
                "tree: node ({level}, {index}) out of order for tile {}",
                self.tile
            ))),
        }
    }

    /// Whether all 64 leaves are in.
    pub fn is_full(&self) -> bool {
        self.levels[0].len() as u64 == TILE_LEAVES
    }

    /// The tile's key and value if it changed since last taken, then (when full) moves on to the
    /// next tile.
    pub fn take(&mut self) -> Option<([u8; 9], Vec<u8>)> {
        if !self.dirty {
            return None;
        }
        let k = self.levels[0].len();
        let mut v = Vec::with_capacity(1 + 32 * level_start(k, CACHED_LEVEL));
        v.push(k as u8);
        for l in &self.levels {
            for h in l {
                v.extend_from_slice(h);
            }
        }
        let key = tile_key(self.tile);
        self.dirty = false;
        if self.is_full() {
            self.tile += 1;
            self.levels.iter_mut().for_each(Vec::clear);
        }
        Some((key, v))
    }
}

/// A stored upper-level node's index (`u64` after the level byte).
pub fn upper_index(key: &[u8]) -> Result<u64, Error> {
    key.get(1..9)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| Error::Storage(format!("tree: bad key {}", hex::encode(key))))
}

#[cfg(test)]
mod tests;
