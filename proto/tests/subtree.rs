//! Subtrees and subtree consistency proofs (draft-ietf-plants-merkle-tree-certs, "Subtrees"):
//! the generator against a literal transcription of the draft's recursive definition, the
//! verifier against every proof of small trees and their mutations, and the draft's and
//! c2sp.org/tlog-witness's examples.

use accord_proto::merkle::{
    self, EMPTY_ROOT, Hash, MemoryTree, covering_subtrees, is_valid_subtree,
    subtree_consistency_proof, subtree_hash, verify_subtree_consistency,
};

fn leaves(n: u64) -> Vec<Hash> {
    (0..n)
        .map(|i| merkle::leaf_hash(format!("leaf {i}").as_bytes()))
        .collect()
}

/// The largest power of two strictly below `n` (n >= 2).
fn split(n: usize) -> usize {
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

fn mth(d: &[Hash]) -> Hash {
    match d.len() {
        0 => EMPTY_ROOT,
        1 => d[0],
        n => {
            let k = split(n);
            merkle::node_hash(&mth(&d[..k]), &mth(&d[k..]))
        }
    }
}

/// `SUBTREE_SUBPROOF(start, end, D_n, b)`, transcribed from the draft.
fn subproof(start: usize, end: usize, d: &[Hash], b: bool) -> Vec<Hash> {
    let n = d.len();
    if start == 0 && end == n {
        return if b { vec![] } else { vec![mth(d)] };
    }
    let k = split(n);
    let mut p = if end <= k {
        let mut p = subproof(start, end, &d[..k], b);
        p.push(mth(&d[k..]));
        return p;
    } else if k <= start {
        subproof(start - k, end - k, &d[k..], b)
    } else {
        subproof(0, end - k, &d[k..], false)
    };
    p.push(mth(&d[..k]));
    p
}

#[test]
fn validity_follows_the_definition() {
    assert!(is_valid_subtree(0, 13));
    assert!(is_valid_subtree(4, 8));
    assert!(is_valid_subtree(8, 13));
    assert!(is_valid_subtree(7, 7));
    assert!(is_valid_subtree(12, 13));
    assert!(!is_valid_subtree(5, 13));
    assert!(!is_valid_subtree(4, 9));
    assert!(!is_valid_subtree(9, 8));
    assert!(is_valid_subtree(0, (1 << 63) + 1));
    assert!(!is_valid_subtree(1, (1 << 63) + 2));
    assert!(is_valid_subtree(1 << 63, u64::MAX));
}

#[test]
fn every_subtree_proof_of_small_trees_matches_the_draft_and_verifies() {
    for n in 1..=33u64 {
        let d = leaves(n);
        let tree = MemoryTree::from_leaf_hashes(&d).unwrap();
        let root = tree.root();
        for start in 0..=n {
            for end in start..=n {
                if !is_valid_subtree(start, end) {
                    assert!(subtree_consistency_proof(&tree, start, end, n).is_err());
                    continue;
                }
                let node = mth(&d[start as usize..end as usize]);
                if end > start {
                    assert_eq!(subtree_hash(&tree, start, end).unwrap(), node);
                }
                let proof = subtree_consistency_proof(&tree, start, end, n).unwrap();
                let want = if start == end {
                    vec![]
                } else {
                    subproof(start as usize, end as usize, &d, true)
                };
                assert_eq!(proof, want, "[{start}, {end}) of {n}");
                verify_subtree_consistency(start, end, n, &proof, &node, &root)
                    .unwrap_or_else(|e| panic!("[{start}, {end}) of {n}: {e}"));
                if start == 0 && end > 0 {
                    assert_eq!(proof, merkle::consistency_proof(&tree, end, n).unwrap());
                }
                if end == start + 1 {
                    assert_eq!(proof, merkle::inclusion_proof(&tree, start, n).unwrap());
                }
                // Every mutation fails: a flipped bit in any hash, a dropped or added hash, a
                // wrong subtree hash, a wrong root.
                for i in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[i][0] ^= 1;
                    assert!(verify_subtree_consistency(start, end, n, &bad, &node, &root).is_err());
                    let mut short = proof.clone();
                    short.remove(i);
                    assert!(
                        verify_subtree_consistency(start, end, n, &short, &node, &root).is_err()
                    );
                }
                let mut long = proof.clone();
                long.push([7; 32]);
                assert!(verify_subtree_consistency(start, end, n, &long, &node, &root).is_err());
                let mut other = node;
                other[31] ^= 1;
                assert!(verify_subtree_consistency(start, end, n, &proof, &other, &root).is_err());
                let mut other_root = root;
                other_root[0] ^= 1;
                if start < end {
                    assert!(
                        verify_subtree_consistency(start, end, n, &proof, &node, &other_root)
                            .is_err()
                    );
                }
            }
        }
    }
}

#[test]
fn the_drafts_examples() {
    // [4, 8) in a tree of 14: MTH(D[0:4]) and MTH(D[8:14]).
    let d = leaves(14);
    let tree = MemoryTree::from_leaf_hashes(&d).unwrap();
    assert_eq!(
        subtree_consistency_proof(&tree, 4, 8, 14).unwrap(),
        vec![mth(&d[0..4]), mth(&d[8..14])]
    );
    // [8, 13) in a tree of 14: d[12], d[13], MTH(D[8:12]), MTH(D[0:8]).
    assert_eq!(
        subtree_consistency_proof(&tree, 8, 13, 14).unwrap(),
        vec![d[12], d[13], mth(&d[8..12]), mth(&d[0..8])]
    );
    // "Selecting Two Subtrees": [5, 13) is covered by [4, 8) and [8, 13); [7, 9) by [7, 8) and
    // [8, 9).
    assert_eq!(covering_subtrees(5, 13).unwrap(), ((4, 8), (8, 13)));
    assert_eq!(covering_subtrees(7, 9).unwrap(), ((7, 8), (8, 9)));
    assert_eq!(covering_subtrees(3, 4).unwrap(), ((3, 4), (4, 4)));
    for start in 0..40u64 {
        for end in start..40 {
            let ((ls, mid), (m2, e)) = covering_subtrees(start, end).unwrap();
            assert!(is_valid_subtree(ls, mid) && is_valid_subtree(m2, e));
            assert!(mid == m2 && e == end && ls <= start);
            if end > start {
                assert!(start - ls < mid - start || mid == start, "[{start},{end})");
            }
        }
    }
}
