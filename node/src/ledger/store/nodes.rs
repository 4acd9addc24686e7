//! Reading the stored Merkle tree (the `tree` family): point and batched reads, the in-memory
//! cache of the upper levels, and the [`accord_proto::merkle::NodeSource`]s over them. Engine
//! neutral: every read goes through [`super::Kv`].

use super::Store;
use crate::error::Error;
use std::sync::{RwLock, RwLockReadGuard};

use super::super::tiles::legacy::node_tile_key;
use super::super::tiles::{Tile, tile_key, tile_of, upper_index, upper_key};

/// The lowest tree level kept in [`Store`]'s in-memory node cache: the levels below it are stored
/// one 64-leaf tile per value (`super::super::tiles`).
pub const CACHED_LEVEL: u32 = 6;

/// Upper-level nodes loaded per range scan when the cache misses ([`Store::tree_node`]).
const UPPER_FILL: u64 = 256;

impl Store {
    /// A stored tree node.
    pub fn tree_node(&self, level: u32, index: u64) -> Result<Option<[u8; 32]>, Error> {
        if level < CACHED_LEVEL {
            let (tile, offset) = tile_of(level, index);
            return match self.kv().get("tree", &tile_key(tile))? {
                Some(v) => Ok(Tile::decode(&v)?.node(level, offset)),
                None => Ok(self.old_nodes(&[(level, index)])?.remove(0)),
            };
        }
        match self.upper.get(level, index) {
            Some(h) => Ok(Some(h)),
            None => self.fill_upper(level, index),
        }
    }

    /// Several stored tree nodes, in the order asked (issue 14: a proof's nodes in one call).
    /// Upper levels come from the in-memory cache; the rest, at most [`CACHED_LEVEL`] per proof
    /// path plus the right edge's pieces, from the tiles that hold them — one or two per proof
    /// (issue 32, item 4) — read by one point lookup, or one batched read over sorted keys
    /// (RocksDB's `MultiGet`) when there are several.
    pub fn tree_nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<Option<[u8; 32]>>, Error> {
        let mut out = vec![None; addrs.len()];
        let mut upper_missed = Vec::new();
        // (tile, level, offset in the tile, position asked)
        let mut lower: Vec<(u64, u32, u64, usize)> = Vec::new();
        {
            let levels = self.upper.read();
            for (i, &(level, index)) in addrs.iter().enumerate() {
                if level < CACHED_LEVEL {
                    let (tile, offset) = tile_of(level, index);
                    lower.push((tile, level, offset, i));
                } else {
                    match UpperNodes::lookup(&levels, level, index) {
                        Some(h) => out[i] = Some(h),
                        None => upper_missed.push(i),
                    }
                }
            }
        }
        for i in upper_missed {
            let (level, index) = addrs[i];
            out[i] = self.fill_upper(level, index)?;
        }
        if lower.is_empty() {
            return Ok(out);
        }
        lower.sort_unstable();
        let mut tiles: Vec<u64> = lower.iter().map(|l| l.0).collect();
        tiles.dedup();
        let keys: Vec<[u8; 9]> = tiles.iter().map(|&t| tile_key(t)).collect();
        let values = match keys.as_slice() {
            [one] => vec![self.kv().get("tree", one)?],
            _ => {
                let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                self.kv().multi_get("tree", &refs, true)?
            }
        };
        let mut values = tiles.iter().zip(values);
        let mut current: Option<(u64, Option<Vec<u8>>)> = None;
        let mut absent = Vec::new();
        for (tile, level, offset, i) in lower {
            if current.as_ref().is_none_or(|c| c.0 != tile) {
                current = values.next().map(|(t, v)| (*t, v));
            }
            match &current {
                Some((_, Some(v))) => out[i] = Tile::decode(v)?.node(level, offset),
                _ => absent.push(i),
            }
        }
        if !absent.is_empty() {
            let old = self.old_nodes(&absent.iter().map(|&i| addrs[i]).collect::<Vec<_>>())?;
            for (i, h) in absent.into_iter().zip(old) {
                out[i] = h;
            }
        }
        Ok(out)
    }

    /// Nodes of tiles that have no value, read under the previous layout's per-node keys
    /// (`super::super::tiles::legacy`). The writer moves a store out of that layout when it
    /// opens it, but a standby of this release may follow a writer of the previous one on
    /// PostgreSQL during an upgrade. On a moved store this is only reached for nodes beyond the
    /// tree: one more lookup for an answer that is `None` anyway.
    fn old_nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<Option<[u8; 32]>>, Error> {
        let keys: Vec<[u8; 11]> = addrs.iter().map(|&(l, i)| node_tile_key(l, i)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        self.kv()
            .multi_get("tree", &refs, false)?
            .into_iter()
            .map(|v| v.as_deref().map(tree_hash).transpose())
            .collect()
    }

    /// Loads the upper-level node (`level`, `index`) into the cache, with the stored nodes after
    /// it up to the end of its aligned run of [`UPPER_FILL`] (their keys are contiguous: one
    /// range scan), so a cold cache costs one scan per run rather than one lookup per node.
    /// Returns the node, `None` if it is not stored (yet).
    fn fill_upper(&self, level: u32, index: u64) -> Result<Option<[u8; 32]>, Error> {
        let end = (index | (UPPER_FILL - 1)).saturating_add(1);
        let mut found = Vec::new();
        let mut bad = None;
        self.kv().scan(
            "tree",
            &upper_key(level, index),
            Some(&upper_key(level, end)),
            &mut |k, v| match (upper_index(k), tree_hash(v)) {
                (Ok(i), Ok(h)) => {
                    found.push((i, h));
                    true
                }
                (Err(e), _) | (_, Err(e)) => {
                    bad = Some(e);
                    false
                }
            },
        )?;
        if let Some(e) = bad {
            return Err(e);
        }
        let first = found.first().filter(|(i, _)| *i == index).map(|(_, h)| *h);
        self.upper.insert(level, &found);
        Ok(first)
    }

    /// Several stored tree nodes, in the order asked, like [`Store::tree_nodes`], but the
    /// nodes below [`CACHED_LEVEL`] are computed from the leaves instead of read: the ones that
    /// fall in one tile come from that tile's leaves and at most 2^CACHED_LEVEL − 1 hashes. Issue
    /// 14 measured this against a lookup per node; with one value per tile (issue 32) both read
    /// one value, and this one hashes besides.
    pub fn tree_nodes_from_leaves(
        &self,
        addrs: &[(u32, u64)],
    ) -> Result<Vec<Option<[u8; 32]>>, Error> {
        let upper: Vec<(usize, (u32, u64))> = addrs
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, (l, _))| *l >= CACHED_LEVEL)
            .collect();
        let mut out = vec![None; addrs.len()];
        let got = self.tree_nodes(&upper.iter().map(|(_, a)| *a).collect::<Vec<_>>())?;
        for ((i, _), h) in upper.iter().zip(got) {
            out[*i] = h;
        }
        // The lower nodes' leaf ranges, grouped by run of 2^CACHED_LEVEL leaves.
        let mut lower: Vec<(u64, u64, usize)> = addrs
            .iter()
            .enumerate()
            .filter(|(_, (l, _))| *l < CACHED_LEVEL)
            .map(|(i, &(l, x))| (x << l, (x + 1) << l, i))
            .collect();
        lower.sort_unstable();
        let mut g = 0;
        while g < lower.len() {
            let run = lower[g].0 >> CACHED_LEVEL;
            let mut e = g;
            while e < lower.len() && lower[e].0 >> CACHED_LEVEL == run {
                e += 1;
            }
            let (lo, hi) = (
                lower[g].0,
                lower[g..e].iter().map(|r| r.1).max().unwrap_or(lower[g].1),
            );
            let leaves = self.scan_leaves(lo, hi)?;
            for &(a, b, i) in &lower[g..e] {
                let span = leaves.get((a - lo) as usize..(b - lo) as usize);
                out[i] = span
                    .filter(|s| s.len() as u64 == b - a)
                    .map(|s| perfect_hash(s.to_vec()));
            }
            g = e;
        }
        Ok(out)
    }

    /// The stored leaf hashes `[lo, hi)` (within one tile), in order, stopping at the first one
    /// missing.
    fn scan_leaves(&self, lo: u64, hi: u64) -> Result<Vec<[u8; 32]>, Error> {
        let (tile, first) = tile_of(0, lo);
        let Some(v) = self.kv().get("tree", &tile_key(tile))? else {
            return Ok(Vec::new());
        };
        Ok(Tile::decode(&v)?
            .leaves()
            .skip(first as usize)
            .take((hi - lo) as usize)
            .collect())
    }

    /// Bytes held by the in-memory cache of the tree's upper levels (`accordctl bench log`).
    pub fn tree_cache_bytes(&self) -> usize {
        self.upper.bytes()
    }
}

/// The Merkle tree as stored: a [`accord_proto::merkle::NodeSource`] over the `tree` column family.
#[derive(Debug, Clone, Copy)]
pub struct TreeNodes<'a>(pub &'a Store);

impl accord_proto::merkle::NodeSource for TreeNodes<'_> {
    fn node(&self, level: u32, index: u64) -> Result<[u8; 32], accord_proto::Error> {
        match self.0.tree_node(level, index) {
            Ok(Some(h)) => Ok(h),
            Ok(None) => Err(accord_proto::Error::NodeUnavailable { level, index }),
            Err(e) => Err(accord_proto::Error::Storage {
                message: e.to_string(),
            }),
        }
    }

    fn nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<[u8; 32]>, accord_proto::Error> {
        every_node(addrs, self.0.tree_nodes(addrs))
    }
}

/// The stored tree with the levels below the cache rebuilt from their tile's leaves
/// ([`Store::tree_nodes_from_leaves`]): the alternative read path `accordctl bench log` measures
/// beside [`TreeNodes`] (issue 14). Not what the node serves proofs from.
#[derive(Debug, Clone, Copy)]
pub struct LeafScanNodes<'a>(pub &'a Store);

impl accord_proto::merkle::NodeSource for LeafScanNodes<'_> {
    fn node(&self, level: u32, index: u64) -> Result<[u8; 32], accord_proto::Error> {
        TreeNodes(self.0).node(level, index)
    }

    fn nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<[u8; 32]>, accord_proto::Error> {
        every_node(addrs, self.0.tree_nodes_from_leaves(addrs))
    }
}

/// The stored tree read one node at a time (the trait's default `nodes`), as proofs were read
/// before issue 14's batched reads: the baseline `bench log` and the tree tests compare with.
#[derive(Debug, Clone, Copy)]
pub struct OneByOneNodes<'a>(pub &'a Store);

impl accord_proto::merkle::NodeSource for OneByOneNodes<'_> {
    fn node(&self, level: u32, index: u64) -> Result<[u8; 32], accord_proto::Error> {
        TreeNodes(self.0).node(level, index)
    }
}

/// A batched read's answer as `NodeSource::nodes` gives it: every node present, or the first
/// missing one named; a storage error as the protocol crate's.
fn every_node(
    addrs: &[(u32, u64)],
    got: Result<Vec<Option<[u8; 32]>>, Error>,
) -> Result<Vec<[u8; 32]>, accord_proto::Error> {
    let got = got.map_err(|e| accord_proto::Error::Storage {
        message: e.to_string(),
    })?;
    addrs
        .iter()
        .zip(got)
        .map(|(&(level, index), h)| h.ok_or(accord_proto::Error::NodeUnavailable { level, index }))
        .collect()
}

/// The Merkle hash of a power-of-two run of leaf hashes (RFC 6962 §2.1), folded in place.
fn perfect_hash(mut level: Vec<[u8; 32]>) -> [u8; 32] {
    while level.len() > 1 {
        let half = level.len() / 2;
        for i in 0..half {
            level[i] = accord_proto::merkle::node_hash(&level[2 * i], &level[2 * i + 1]);
        }
        level.truncate(half);
    }
    level
        .first()
        .copied()
        .unwrap_or(accord_proto::merkle::EMPTY_ROOT)
}

/// The in-memory cache of tree levels ≥ [`CACHED_LEVEL`] (issue 14): dense, one vector per
/// level indexed by node index, all-zero for a node not loaded (no SHA-256 output is all
/// zeros in practice; a zero would only be read again from the store). 32 bytes a node and no
/// per-entry overhead: at most n / 2^CACHED_LEVEL · 2 nodes for n leaves, n bytes in all with
/// `CACHED_LEVEL` 6 (1 MiB at 10^6 leaves, 10 MiB at 10^7), grown only as far as nodes are read.
#[derive(Default)]
pub(super) struct UpperNodes(RwLock<Vec<Vec<[u8; 32]>>>);

impl UpperNodes {
    fn read(&self) -> RwLockReadGuard<'_, Vec<Vec<[u8; 32]>>> {
        // A panic elsewhere cannot leave a half-written hash: the cache stays usable.
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn lookup(levels: &[Vec<[u8; 32]>], level: u32, index: u64) -> Option<[u8; 32]> {
        let h = levels
            .get(level.checked_sub(CACHED_LEVEL)? as usize)?
            .get(usize::try_from(index).ok()?)?;
        (h != &[0u8; 32]).then_some(*h)
    }

    fn get(&self, level: u32, index: u64) -> Option<[u8; 32]> {
        Self::lookup(&self.read(), level, index)
    }

    /// Caches stored nodes of one level (only nodes read from the store: indexes are bounded
    /// by the tree).
    fn insert(&self, level: u32, nodes: &[(u64, [u8; 32])]) {
        let (Some(l), Some(last)) = (level.checked_sub(CACHED_LEVEL), nodes.last()) else {
            return;
        };
        let (Ok(l), Ok(top)) = (usize::try_from(l), usize::try_from(last.0)) else {
            return;
        };
        let mut levels = self.0.write().unwrap_or_else(|e| e.into_inner());
        if levels.len() <= l {
            levels.resize_with(l + 1, Vec::new);
        }
        let v = &mut levels[l];
        if v.len() <= top {
            v.resize(top + 1, [0u8; 32]);
        }
        for &(i, h) in nodes {
            if let Some(slot) = usize::try_from(i).ok().and_then(|i| v.get_mut(i)) {
                *slot = h;
            }
        }
    }

    /// Bytes held (the vectors' lengths; capacity may be up to twice that).
    fn bytes(&self) -> usize {
        self.read().iter().map(|v| v.len() * 32).sum()
    }
}

/// A stored tree node's value as a hash.
fn tree_hash(v: &[u8]) -> Result<[u8; 32], Error> {
    v.try_into()
        .map_err(|_| Error::Storage("tree node is not 32 bytes".into()))
}
