//! Reading the stored Merkle tree (the `tree` family): point and batched reads, the in-memory
//! cache of the upper levels, and the [`accord_proto::merkle::NodeSource`]s over them. Engine
//! neutral: every read goes through [`super::Kv`].

use super::{Store, u64_key};
use crate::error::Error;
use std::sync::{RwLock, RwLockReadGuard};

pub use super::super::tiles::tree_key;
use super::super::tiles::{TreeKey, parse_key};

/// The lowest tree level kept in [`Store`]'s in-memory node cache.
pub const CACHED_LEVEL: u32 = 6;

/// Upper-level nodes loaded per range scan when the cache misses ([`Store::tree_node`]).
const UPPER_FILL: u64 = 256;

impl Store {
    /// A stored tree node.
    pub fn tree_node(&self, level: u32, index: u64) -> Result<Option<[u8; 32]>, Error> {
        if level < CACHED_LEVEL {
            return self.tree_node_stored(level, index);
        }
        match self.upper.get(level, index) {
            Some(h) => Ok(Some(h)),
            None => self.fill_upper(level, index),
        }
    }

    fn tree_node_stored(&self, level: u32, index: u64) -> Result<Option<[u8; 32]>, Error> {
        match self.kv().get("tree", tree_key(level, index).as_ref())? {
            Some(v) => tree_hash(&v).map(Some),
            None => Ok(None),
        }
    }

    /// Several stored tree nodes, in the order asked (issue 14: a proof's nodes in one call).
    /// Upper levels come from the in-memory cache; the rest, at most [`CACHED_LEVEL`] per
    /// proof path plus the right edge's pieces, in one batched read over sorted keys (RocksDB's
    /// `MultiGet`: one pass through the memtables and each file's filter and index for the whole
    /// batch, instead of a full point lookup per node).
    pub fn tree_nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<Option<[u8; 32]>>, Error> {
        let mut out = vec![None; addrs.len()];
        let mut upper_missed = Vec::new();
        let mut lower: Vec<(TreeKey, usize)> = Vec::new();
        {
            let levels = self.upper.read();
            for (i, &(level, index)) in addrs.iter().enumerate() {
                if level < CACHED_LEVEL {
                    lower.push((tree_key(level, index), i));
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
        match lower.len() {
            0 => {}
            1 => {
                out[lower[0].1] = self.tree_node_stored(addrs[lower[0].1].0, addrs[lower[0].1].1)?
            }
            _ => {
                lower.sort_unstable();
                let keys: Vec<&[u8]> = lower.iter().map(|(k, _)| k.as_ref()).collect();
                let got = self.kv().multi_get("tree", &keys, true)?;
                for ((_, i), v) in lower.iter().zip(got) {
                    out[*i] = match v {
                        Some(v) => Some(tree_hash(&v)?),
                        None => None,
                    };
                }
            }
        }
        Ok(out)
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
            tree_key(level, index).as_ref(),
            Some(tree_key(level, end).as_ref()),
            &mut |k, v| match (u64_key(k.get(1..).unwrap_or_default()), tree_hash(v)) {
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
    /// fall in one aligned run of 2^CACHED_LEVEL leaves come from one range scan of those
    /// leaves (contiguous keys, one or two blocks) and at most 2^CACHED_LEVEL − 1 hashes, rather
    /// than a lookup each in a different block of each level (issue 14: on a tree larger than
    /// the block cache holds warm, each such lookup is a block read).
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
        let mut out = Vec::with_capacity((hi - lo) as usize);
        let mut bad = None;
        self.kv().scan(
            "tree",
            tree_key(0, lo).as_ref(),
            Some(tree_key(0, hi).as_ref()),
            &mut |k, v| {
                // A tile's leaves come first, then its inner nodes (the layout of `tiles`).
                if parse_key(k) != Some((0, lo + out.len() as u64)) {
                    return false;
                }
                match tree_hash(v) {
                    Ok(h) => {
                        out.push(h);
                        true
                    }
                    Err(e) => {
                        bad = Some(e);
                        false
                    }
                }
            },
        )?;
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
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

/// The stored tree with the levels below the cache rebuilt from one range scan of their leaves
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
