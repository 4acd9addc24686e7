//! The right frontier of an append-only RFC 6962 tree, and an in-memory [`NodeSource`].

use super::{EMPTY_ROOT, Hash, NodeSource, node_hash};
use crate::error::Error;

/// The compact range `[0, size)`: the roots of the perfect subtrees that make up the tree, one
/// per set bit of `size`, largest (leftmost) first. It is all the state an appender needs: the
/// root, and the perfect subtrees that each new leaf completes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    frontier: Vec<Hash>,
}

impl CompactRange {
    /// The empty tree.
    pub fn new() -> CompactRange {
        CompactRange::default()
    }

    /// Restores a range from its size and frontier hashes (as returned by
    /// [`frontier`](Self::frontier)); there must be one hash per set bit of `size`.
    pub fn from_frontier(size: u64, frontier: Vec<Hash>) -> Result<CompactRange, Error> {
        if frontier.len() != size.count_ones() as usize {
            return Err(Error::InvalidRange {
                reason: "frontier length is not the number of set bits of the size",
                first: frontier.len() as u64,
                second: size,
            });
        }
        Ok(CompactRange { size, frontier })
    }

    /// Restores the range of the first `size` leaves from stored subtrees (one read per set bit).
    pub fn from_source(src: &impl NodeSource, size: u64) -> Result<CompactRange, Error> {
        let mut frontier = Vec::with_capacity(size.count_ones() as usize);
        let mut pos = 0u64;
        for level in (0..64u32).rev() {
            if size & (1 << level) != 0 {
                frontier.push(src.node(level, pos >> level)?);
                pos += 1 << level;
            }
        }
        Ok(CompactRange { size, frontier })
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The perfect subtree roots, leftmost (largest) first.
    pub fn frontier(&self) -> &[Hash] {
        &self.frontier
    }

    /// Appends a leaf hash. Returns every perfect subtree this completes, as
    /// `(level, index, hash)` from the leaf itself (level 0) upwards: exactly the nodes a
    /// [`NodeSource`] must store so that proofs can be served for every later size.
    pub fn push(&mut self, leaf_hash: Hash) -> Result<Vec<(u32, u64, Hash)>, Error> {
        let index = self.size;
        let new_size = index.checked_add(1).ok_or(Error::InvalidRange {
            reason: "tree is full",
            first: index,
            second: index,
        })?;
        let mut done = vec![(0, index, leaf_hash)];
        let mut h = leaf_hash;
        let mut level = 0u32;
        // Each set low bit of the old size is a left sibling waiting on the frontier.
        while index & (1 << level) != 0 {
            let Some(left) = self.frontier.pop() else {
                break; // impossible: one frontier hash per set bit
            };
            h = node_hash(&left, &h);
            level += 1;
            done.push((level, index >> level, h));
        }
        self.frontier.push(h);
        self.size = new_size;
        Ok(done)
    }

    /// The tree's root: the frontier folded from the right; `SHA-256("")` when empty.
    pub fn root(&self) -> Hash {
        let mut it = self.frontier.iter().rev();
        let Some(last) = it.next() else {
            return EMPTY_ROOT;
        };
        it.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

/// A whole tree in memory, storing every perfect subtree hash; a [`NodeSource`] for tests and
/// tools. Memory is about two hashes per leaf.
#[derive(Debug, Clone, Default)]
pub struct MemoryTree {
    /// `levels[l][i]` is the perfect subtree (l, i).
    levels: Vec<Vec<Hash>>,
    range: CompactRange,
}

impl MemoryTree {
    /// The empty tree.
    pub fn new() -> MemoryTree {
        MemoryTree::default()
    }

    /// A tree over these leaf hashes.
    pub fn from_leaf_hashes(leaf_hashes: &[Hash]) -> Result<MemoryTree, Error> {
        let mut t = MemoryTree::new();
        for h in leaf_hashes {
            t.push(*h)?;
        }
        Ok(t)
    }

    /// Appends a leaf hash.
    pub fn push(&mut self, leaf_hash: Hash) -> Result<(), Error> {
        for (level, _index, hash) in self.range.push(leaf_hash)? {
            let level = level as usize;
            if self.levels.len() <= level {
                self.levels.resize_with(level + 1, Vec::new);
            }
            // Subtrees complete in index order, so the index is the vector's length.
            self.levels[level].push(hash);
        }
        Ok(())
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.range.size()
    }

    /// The root at the current size.
    pub fn root(&self) -> Hash {
        self.range.root()
    }
}

impl NodeSource for MemoryTree {
    fn node(&self, level: u32, index: u64) -> Result<Hash, Error> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.levels.get(level as usize)?.get(i).copied())
            .ok_or(Error::NodeUnavailable { level, index })
    }
}
