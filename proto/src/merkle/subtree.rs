//! Subtrees of a Merkle tree and subtree consistency proofs, per draft-ietf-plants-merkle-tree-
//! certs ("Subtrees"; section 4 of -03), which c2sp.org/tlog-witness "sign-subtree" uses.
//!
//! A subtree `[start, end)` is `MTH(D[start:end])` with `start` a multiple of
//! `BIT_CEIL(end - start)`; a subtree consistency proof shows that it is part of the tree of size
//! `n`. With `start = 0` the proof is the RFC 9162 consistency proof from `end` to `n`; with
//! `end = start + 1` it is the inclusion proof of leaf `start`.

use super::{EMPTY_ROOT, Hash, NodeSource, invalid, node_hash, range_hash, split_point};
use crate::error::Error;

/// Whether `[start, end)` is a valid subtree ("Definition of a Subtree"): `start <= end` and
/// `start` is a multiple of `BIT_CEIL(end - start)`, computed without overflow as the draft's
/// example does.
pub fn is_valid_subtree(start: u64, end: u64) -> bool {
    if start > end {
        return false;
    }
    let size = end - start;
    if size > 1 << 63 {
        return start == 0; // BIT_CEIL would overflow.
    }
    start & (size.next_power_of_two() - 1) == 0
}

fn check_range(start: u64, end: u64, n: u64) -> Result<(), Error> {
    if !is_valid_subtree(start, end) {
        return Err(Error::InvalidRange {
            reason: "[start, end) is not a valid subtree",
            first: start,
            second: end,
        });
    }
    if end > n {
        return Err(Error::InvalidRange {
            reason: "subtree end is beyond the tree size",
            first: end,
            second: n,
        });
    }
    Ok(())
}

/// The hash of the subtree `[start, end)`, `MTH(D[start:end])`, from stored perfect subtrees.
pub fn subtree_hash(src: &impl NodeSource, start: u64, end: u64) -> Result<Hash, Error> {
    check_range(start, end, end)?;
    range_hash(src, start, end)
}

/// `SUBTREE_PROOF(start, end, D_n)` ("Generating a Subtree Consistency Proof"): the proof that
/// the subtree `[start, end)` is consistent with the tree of size `n`. O(log n) reads.
pub fn subtree_consistency_proof(
    src: &impl NodeSource,
    start: u64,
    end: u64,
    n: u64,
) -> Result<Vec<Hash>, Error> {
    check_range(start, end, n)?;
    if start == end {
        return Ok(Vec::new());
    }
    // SUBTREE_SUBPROOF(s, e, D[lo:hi], b), unrolled; (s, e) relative to lo; hashes are appended
    // after the inner proof, so collect top-down and reverse.
    let (mut lo, mut hi, mut s, mut e) = (0u64, n, start, end);
    let mut whole = true;
    let mut proof = Vec::new();
    loop {
        let size = hi - lo;
        if s == 0 && e == size {
            if !whole {
                proof.push(range_hash(src, lo, hi)?);
            }
            break;
        }
        let k = split_point(size);
        if e <= k {
            proof.push(range_hash(src, lo + k, hi)?);
            hi = lo + k;
        } else {
            // k <= s: the subtree is right of k; otherwise s = 0 < k < e and the proof
            // continues with the right part of the subtree, whose first hash is no longer the
            // subtree's own hash.
            proof.push(src.node(k.trailing_zeros(), lo / k)?);
            if s < k {
                whole = false;
                s = k;
            }
            lo += k;
            s -= k;
            e -= k;
        }
    }
    proof.reverse();
    Ok(proof)
}

/// Verifies a subtree consistency proof ("Verifying a Subtree Consistency Proof"): that the
/// subtree `[start, end)` with hash `node` is part of the tree of size `n` with root `root`.
pub fn verify_subtree_consistency(
    start: u64,
    end: u64,
    n: u64,
    proof: &[Hash],
    node: &Hash,
    root: &Hash,
) -> Result<(), Error> {
    if !is_valid_subtree(start, end) || end > n {
        return Err(invalid("not a valid subtree of the tree"));
    }
    if start == end {
        if !proof.is_empty() {
            return Err(invalid("an empty subtree needs an empty proof"));
        }
        if node != &EMPTY_ROOT {
            return Err(invalid("an empty subtree's hash must be SHA-256(\"\")"));
        }
        return Ok(());
    }
    let (mut fnode, mut snode, mut tnode) = (start, end - 1, n - 1);
    let shift = |f: &mut u64, s: &mut u64, t: &mut u64| {
        *f >>= 1;
        *s >>= 1;
        *t >>= 1;
    };
    if snode == tnode {
        while fnode != snode {
            shift(&mut fnode, &mut snode, &mut tnode);
        }
    } else {
        while fnode != snode && snode & 1 == 1 {
            shift(&mut fnode, &mut snode, &mut tnode);
        }
    }
    let mut rest = proof.iter();
    let (mut fr, mut sr) = if fnode == snode {
        (*node, *node)
    } else {
        let first = rest.next().ok_or(invalid("proof is empty"))?;
        (*first, *first)
    };
    for c in rest {
        if tnode == 0 {
            return Err(invalid("proof is longer than needed"));
        }
        if snode & 1 == 1 || snode == tnode {
            if fnode < snode {
                fr = node_hash(c, &fr);
            }
            sr = node_hash(c, &sr);
            while snode & 1 == 0 && snode != 0 {
                shift(&mut fnode, &mut snode, &mut tnode);
            }
        } else {
            sr = node_hash(&sr, c);
        }
        shift(&mut fnode, &mut snode, &mut tnode);
    }
    if tnode != 0 {
        return Err(invalid("proof is shorter than needed"));
    }
    if &fr != node {
        return Err(invalid("computed subtree hash does not match"));
    }
    if &sr != root {
        return Err(invalid("computed root does not match"));
    }
    Ok(())
}

/// A subtree as its half-open leaf range `(start, end)`.
pub type Range = (u64, u64);

/// Two adjacent subtrees that together cover `[start, end)` with few extra entries before
/// `start` ("Selecting Two Subtrees"): `left.end == right.start`, `left.start <= start`,
/// `right.end == end`. Either may be empty.
pub fn covering_subtrees(start: u64, end: u64) -> Result<(Range, Range), Error> {
    if start > end {
        return Err(Error::InvalidRange {
            reason: "start is after end",
            first: start,
            second: end,
        });
    }
    if end - start <= 1 {
        return Ok(((start, end), (end, end)));
    }
    let last = end - 1;
    let split = 63 - (start ^ last).leading_zeros();
    let mask = (1u64 << split) - 1;
    let mid = last & !mask;
    let left_split = 64 - (!start & mask).leading_zeros();
    let left_start = start & !((1u64 << left_split).wrapping_sub(1));
    Ok(((left_start, mid), (mid, end)))
}
