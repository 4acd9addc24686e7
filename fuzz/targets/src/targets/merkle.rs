//! RFC 6962 / 9162 proof verification. Two parts: arbitrary (index, sizes, proof, roots) must
//! give an answer without panicking; and an oracle — a correct proof for a small tree verifies,
//! and any change the fuzzer makes to it (a hash bit, a size, an index, a dropped or added hash)
//! is refused.

use crate::{Leaves, leaves};
use accord_proto::merkle::{
    Hash, consistency_proof, inclusion_proof, leaf_hash, root_from_leaf_hashes, verify_consistency,
    verify_inclusion,
};

fn u64_at(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    for (i, x) in d.iter().skip(at).take(8).enumerate() {
        b[i] = *x;
    }
    u64::from_be_bytes(b)
}

fn hashes(d: &[u8]) -> Vec<Hash> {
    d.chunks_exact(32)
        .map(|c| <Hash>::try_from(c).expect("32 bytes"))
        .collect()
}

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    if data.len() < 20 {
        return;
    }
    let (head, rest) = data.split_at(20);
    let (a, b) = (u64_at(head, 0), u64_at(head, 8));
    let mode = head[16];
    // Part 1: anything.
    let hs = hashes(rest);
    if hs.len() >= 2 {
        let _ = verify_inclusion(&hs[0], a, b, &hs[2..], &hs[1]);
        let _ = verify_consistency(a, b, &hs[2..], &hs[0], &hs[1]);
    }
    // Part 2: oracle over a tree of up to 70 leaves.
    let n = 1 + u64::from(head[17]) % 70;
    let all = leaves(n);
    let src = Leaves(&all);
    let root = root_from_leaf_hashes(&all);
    let flip = |proof: &mut Vec<Hash>| {
        // The mutation the fuzzer chose: flip bit `head[19]` of hash `head[18]`, or drop/add.
        match mode % 4 {
            0 if !proof.is_empty() => {
                let i = usize::from(head[18]) % proof.len();
                proof[i][usize::from(head[19]) % 32] ^= 1 << (head[19] % 8);
            }
            1 if !proof.is_empty() => {
                proof.pop();
            }
            2 => proof.push(hashes(rest).first().copied().unwrap_or([0; 32])),
            _ => {}
        }
    };
    let index = a % n;
    let mut proof = inclusion_proof(&src, index, n).expect("in range");
    let leaf = leaf_hash(&index.to_be_bytes());
    verify_inclusion(&leaf, index, n, &proof, &root).expect("a correct inclusion proof verifies");
    let original = proof.clone();
    flip(&mut proof);
    let (i2, n2) = if mode & 0x10 != 0 {
        (b % 80, n)
    } else {
        (index, n)
    };
    let result = verify_inclusion(&leaf, i2, n2, &proof, &root);
    if proof != original || i2 != index {
        // A different index can only verify with the same proof when the hash coincides,
        // which needs a SHA-256 collision.
        assert!(result.is_err(), "mutated inclusion proof verified");
    }
    let m = b % (n + 1);
    let mut cproof = consistency_proof(&src, m, n).expect("m <= n");
    let old_root = root_from_leaf_hashes(&all[..m as usize]);
    verify_consistency(m, n, &cproof, &old_root, &root)
        .expect("a correct consistency proof verifies");
    let original = cproof.clone();
    flip(&mut cproof);
    let result = verify_consistency(m, n, &cproof, &old_root, &root);
    if cproof != original {
        assert!(result.is_err(), "mutated consistency proof verified");
    }
    if mode & 0x20 != 0 && m > 0 && m < n {
        // A wrong old size with the right proof is refused.
        let other = 1 + (a % n);
        if other != m {
            let r = verify_consistency(other, n, &original, &old_root, &root);
            assert!(
                r.is_err(),
                "consistency proof verified for the wrong old size"
            );
        }
    }
}
