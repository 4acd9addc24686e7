//! RFC 6962 / RFC 9162 Merkle tree hashing and proofs (RFC 6962 §2.1; RFC 9162 §2.1).
//!
//! - leaf hash `SHA-256(0x00 || leaf)`, node hash `SHA-256(0x01 || left || right)`, empty tree
//!   `SHA-256("")`;
//! - the tree over `n` leaves splits at the largest power of two below `n` (RFC 6962 §2.1).
//!
//! Roots of in-memory leaf sets go through rs_merkle with [`Rfc6962Hasher`]. Proofs do not need
//! the tree: they read *perfect subtree hashes* from a [`NodeSource`] (the node's storage), and
//! every RFC 6962 subtree is either perfect or the right edge of the tree, so a root or a proof
//! costs O(log n) node reads for any size. [`CompactRange`] maintains the right frontier while
//! leaves are appended and says which perfect subtrees to persist.

mod compact;
mod subtree;

use sha2::{Digest, Sha256};

pub use self::compact::{CompactRange, MemoryTree};
pub use self::subtree::{
    covering_subtrees, is_valid_subtree, subtree_consistency_proof, subtree_hash,
    verify_subtree_consistency,
};
use crate::error::Error;

/// A SHA-256 Merkle hash.
pub type Hash = [u8; 32];

/// The root of the empty tree, `SHA-256("")` (RFC 6962 §2.1: `MTH({}) = SHA-256()`).
pub const EMPTY_ROOT: Hash = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// The hash of a leaf: `SHA-256(0x00 || leaf)` (RFC 6962 §2.1).
pub fn leaf_hash(leaf: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(leaf);
    h.finalize().into()
}

/// The hash of an interior node: `SHA-256(0x01 || left || right)` (RFC 6962 §2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The rs_merkle hasher for RFC 6962 trees. Leaves are hashed outside it (with
/// [`leaf_hash`]); `concat_and_hash` adds the 0x01 interior-node prefix. rs_merkle promotes a
/// lone left node unchanged to the next level, which yields exactly the RFC 6962 shape (split at
/// the largest power of two below n).
#[derive(Clone, Debug)]
pub struct Rfc6962Hasher;

impl rs_merkle::Hasher for Rfc6962Hasher {
    type Hash = Hash;

    /// Plain SHA-256; rs_merkle only calls it through `concat_and_hash`, overridden below.
    fn hash(data: &[u8]) -> Hash {
        Sha256::digest(data).into()
    }

    fn concat_and_hash(left: &Hash, right: Option<&Hash>) -> Hash {
        match right {
            Some(r) => node_hash(left, r),
            None => *left,
        }
    }
}

/// The RFC 6962 root of a list of leaf hashes, computed with rs_merkle (whole list in memory).
pub fn root_from_leaf_hashes(leaf_hashes: &[Hash]) -> Hash {
    rs_merkle::MerkleTree::<Rfc6962Hasher>::from_leaves(leaf_hashes)
        .root()
        .unwrap_or(EMPTY_ROOT)
}

/// Storage of perfect subtree hashes: `node(level, index)` is the Merkle hash of leaves
/// `[index * 2^level, (index + 1) * 2^level)`; level 0 holds the leaf hashes. Only subtrees
/// that are complete at the tree sizes asked about are ever read.
pub trait NodeSource {
    /// The hash of the perfect subtree at (`level`, `index`).
    fn node(&self, level: u32, index: u64) -> Result<Hash, Error>;

    /// The hashes of the perfect subtrees at `addrs` (`(level, index)` pairs), in the order
    /// asked. A root or a proof knows every node it needs from the sizes alone, before reading
    /// any, and asks for them in one call: a source backed by a database overrides this to
    /// fetch them in one batched read (issue 14: one RocksDB multi-get instead of a point
    /// lookup per node). The default reads them one by one with [`NodeSource::node`].
    fn nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<Hash>, Error> {
        addrs.iter().map(|&(l, i)| self.node(l, i)).collect()
    }
}

impl<T: NodeSource + ?Sized> NodeSource for &T {
    fn node(&self, level: u32, index: u64) -> Result<Hash, Error> {
        (**self).node(level, index)
    }

    fn nodes(&self, addrs: &[(u32, u64)]) -> Result<Vec<Hash>, Error> {
        (**self).nodes(addrs)
    }
}

/// The reads of a root or a proof, planned from the sizes alone (no node read yet): each output
/// hash is the fold of a run of perfect subtrees of decreasing size, left to right (a single
/// perfect subtree, or an RFC 6962 subtree on the right edge of the tree). [`Plan::read`] then
/// fetches every node in one [`NodeSource::nodes`] call.
#[derive(Default)]
struct Plan {
    addrs: Vec<(u32, u64)>,
    ends: Vec<usize>,
}

impl Plan {
    /// One output: the perfect subtree (`level`, `index`).
    fn perfect(&mut self, level: u32, index: u64) {
        self.addrs.push((level, index));
        self.ends.push(self.addrs.len());
    }

    /// One output: the Merkle hash of leaves `[lo, hi)`, a range that is an RFC 6962 subtree
    /// (as in [`range_hash`]): its perfect pieces of decreasing size starting at `lo`.
    fn range(&mut self, lo: u64, hi: u64) {
        let mut pos = lo;
        for level in (0..64u32).rev() {
            if (hi - lo) & (1 << level) != 0 {
                self.addrs.push((level, pos >> level));
                pos += 1 << level;
            }
        }
        self.ends.push(self.addrs.len());
    }

    /// Reads every planned node in one call and folds each output's pieces from the right
    /// (an empty range is the empty tree's root).
    fn read(self, src: &impl NodeSource) -> Result<Vec<Hash>, Error> {
        let hashes = src.nodes(&self.addrs)?;
        if hashes.len() != self.addrs.len() {
            return Err(Error::Storage {
                message: format!(
                    "node source answered {} hashes for {} nodes",
                    hashes.len(),
                    self.addrs.len()
                ),
            });
        }
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0;
        for end in self.ends {
            let mut pieces = hashes[start..end].iter().rev();
            let mut acc = pieces.next().copied().unwrap_or(EMPTY_ROOT);
            for left in pieces {
                acc = node_hash(left, &acc);
            }
            out.push(acc);
            start = end;
        }
        Ok(out)
    }
}

/// The largest power of two strictly below `n` (n >= 2), as in RFC 6962 §2.1's split point k.
fn split_point(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

/// The Merkle hash of leaves `[lo, hi)` for a range that is an RFC 6962 subtree (every range
/// the proof recursions visit is): perfect pieces of decreasing size, starting at `lo`, folded
/// from the right. O(log n) nodes, read in one [`NodeSource::nodes`] call.
fn range_hash(src: &impl NodeSource, lo: u64, hi: u64) -> Result<Hash, Error> {
    let mut plan = Plan::default();
    plan.range(lo, hi);
    Ok(plan.read(src)?.pop().unwrap_or(EMPTY_ROOT))
}

/// The root of the tree of the first `size` leaves (RFC 6962 §2.1 MTH) from stored perfect
/// subtrees: one read per set bit of `size`.
pub fn root(src: &impl NodeSource, size: u64) -> Result<Hash, Error> {
    range_hash(src, 0, size)
}

/// The inclusion proof (audit path) of leaf `index` in the tree of size `size`
/// (RFC 6962 §2.1.1 PATH; RFC 9162 §2.1.3.1), leaf sibling first. O(log n) reads.
pub fn inclusion_proof(src: &impl NodeSource, index: u64, size: u64) -> Result<Vec<Hash>, Error> {
    if index >= size {
        return Err(Error::InvalidRange {
            reason: "leaf index is not below the tree size",
            first: index,
            second: size,
        });
    }
    // Walk down from the root; collect siblings top-down and reverse at the end. Going right
    // the sibling is a perfect left subtree; going left the sibling is the right remainder,
    // which is not perfect only the first time (after that we are inside a perfect subtree).
    // Every node is known from (index, size) before any is read: plan, then one batched read.
    let (mut lo, mut hi) = (0u64, size);
    let mut plan = Plan::default();
    while hi - lo > 1 {
        let k = split_point(hi - lo);
        if index < lo + k {
            plan.range(lo + k, hi);
            hi = lo + k;
        } else {
            plan.perfect(k.trailing_zeros(), lo / k);
            lo += k;
        }
    }
    let mut path = plan.read(src)?;
    path.reverse();
    Ok(path)
}

/// The consistency proof between the trees of sizes `size1` and `size2` (RFC 6962 §2.1.2
/// PROOF/SUBPROOF; RFC 9162 §2.1.4.1). Empty when `size1` is 0 or equals `size2`.
/// O(log n) reads.
pub fn consistency_proof(
    src: &impl NodeSource,
    size1: u64,
    size2: u64,
) -> Result<Vec<Hash>, Error> {
    if size1 > size2 {
        return Err(Error::InvalidRange {
            reason: "size1 is greater than size2",
            first: size1,
            second: size2,
        });
    }
    if size1 == 0 || size1 == size2 {
        return Ok(Vec::new());
    }
    // SUBPROOF(m, D[lo:hi], b), unrolled; `whole` is b (the subtree is the old tree itself).
    let (mut lo, mut hi, mut m) = (0u64, size2, size1);
    let mut whole = true;
    let mut plan = Plan::default();
    loop {
        let n = hi - lo;
        if m == n {
            if !whole {
                plan.range(lo, hi);
            }
            break;
        }
        let k = split_point(n);
        if m <= k {
            plan.range(lo + k, hi);
            hi = lo + k;
        } else {
            plan.perfect(k.trailing_zeros(), lo / k);
            lo += k;
            m -= k;
            whole = false;
        }
    }
    let mut proof = plan.read(src)?;
    proof.reverse();
    Ok(proof)
}

fn invalid(reason: &'static str) -> Error {
    Error::ProofInvalid { reason }
}

/// Right-shifts both values until `a`'s lowest bit is set or `a` is 0.
fn shift_while_even(a: &mut u64, b: &mut u64) {
    while *a != 0 && *a & 1 == 0 {
        *a >>= 1;
        *b >>= 1;
    }
}

/// Verifies an inclusion proof (RFC 9162 §2.1.3.2): that `leaf_hash` is leaf `index` of the
/// tree of size `size` with root `root`.
pub fn verify_inclusion(
    leaf_hash: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), Error> {
    if index >= size {
        return Err(invalid("leaf index is not below the tree size"));
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf_hash;
    for p in proof {
        if snode == 0 {
            return Err(invalid("proof is longer than the path to the root"));
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            shift_while_even(&mut fnode, &mut snode);
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(invalid("proof is shorter than the path to the root"));
    }
    if &r != root {
        return Err(invalid("computed root does not match"));
    }
    Ok(())
}

/// Verifies a consistency proof (RFC 9162 §2.1.4.2): that the tree of size `size2` with root
/// `root2` extends the tree of size `size1` with root `root1`.
///
/// Edge cases: `size1 == size2` needs an empty proof and equal roots; `size1 == 0` needs an
/// empty proof and `root1` the empty-tree root (every tree extends the empty one).
pub fn verify_consistency(
    size1: u64,
    size2: u64,
    proof: &[Hash],
    root1: &Hash,
    root2: &Hash,
) -> Result<(), Error> {
    if size1 > size2 {
        return Err(invalid("size1 is greater than size2"));
    }
    if size1 == size2 {
        if !proof.is_empty() {
            return Err(invalid("sizes are equal but the proof is not empty"));
        }
        if size1 == 0 && root1 != &EMPTY_ROOT {
            return Err(invalid("root of the empty tree is not SHA-256(\"\")"));
        }
        if root1 != root2 {
            return Err(invalid("sizes are equal but the roots differ"));
        }
        return Ok(());
    }
    if size1 == 0 {
        if !proof.is_empty() {
            return Err(invalid("size1 is 0 but the proof is not empty"));
        }
        if root1 != &EMPTY_ROOT {
            return Err(invalid("root of the empty tree is not SHA-256(\"\")"));
        }
        return Ok(());
    }
    let (first, rest) = proof.split_first().ok_or(invalid("proof is empty"))?;
    // Step 2: when size1 is a power of two, the old root is itself the first node of the path.
    let (seed, path) = if size1.is_power_of_two() {
        (root1, proof)
    } else {
        (first, rest)
    };
    let (mut fnode, mut snode) = (size1 - 1, size2 - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*seed, *seed);
    for c in path {
        if snode == 0 {
            return Err(invalid("proof is longer than needed"));
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            shift_while_even(&mut fnode, &mut snode);
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(invalid("proof is shorter than needed"));
    }
    if &fr != root1 {
        return Err(invalid("computed old root does not match root1"));
    }
    if &sr != root2 {
        return Err(invalid("computed new root does not match root2"));
    }
    Ok(())
}
