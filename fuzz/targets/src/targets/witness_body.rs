//! The witness's HTTP add-checkpoint body (c2sp.org/tlog-witness): parse, re-serialise, then
//! the checks the witness makes before co-signing — the checkpoint opens under the log key and
//! the consistency proof leads from the size it holds (4 leaves) to the new size.

use crate::{ORIGIN, leaves, log_verifier};
use accord_proto::checkpoint::open_checkpoint;
use accord_proto::merkle::{root_from_leaf_hashes, verify_consistency};
use accord_witness::AddCheckpoint;

const HELD: u64 = 4;

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(req) = AddCheckpoint::parse_http_body(data) else {
        return;
    };
    assert!(req.proof.len() <= accord_witness::request::MAX_PROOF_HASHES);
    let body = req.to_http_body();
    assert_eq!(
        AddCheckpoint::parse_http_body(body.as_bytes()).expect("re-parses"),
        req
    );
    let Ok(cp) = open_checkpoint(req.checkpoint.as_bytes(), ORIGIN, &[log_verifier()], &[]) else {
        return;
    };
    let held_root = root_from_leaf_hashes(&leaves(HELD));
    if req.old_size == HELD {
        let c = &cp.checkpoint;
        let ok = verify_consistency(HELD, c.size, &req.proof, &held_root, &c.root).is_ok();
        if ok && c.size == HELD {
            assert_eq!(c.root, held_root, "same size, another root, accepted");
        }
    }
}
