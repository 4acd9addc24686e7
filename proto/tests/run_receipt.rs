//! Issue 29, item 2: a run receipt binds every field it shows. The receipt in
//! `vectors/run-receipt/` was built by a real node (`tests/tests/runs.rs`,
//! `receipts_show_missing_link_decisions_and_verify_offline`, with `ACCORD_SAVE_RUN_RECEIPT`):
//! a completed run with actions, an approval-gated action and its approving decision, and an
//! output. Every byte of its encoding is flipped; an encoding that decodes to a receipt showing
//! anything different must be refused.

use accord_proto::note::Verifier;
use accord_proto::pb::run::v1::RunReceipt;
use accord_proto::run_receipt::verify;
use prost::Message;

fn vector() -> (Vec<u8>, Verifier) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/run-receipt");
    let bytes = std::fs::read(dir.join("receipt.bin")).expect("the saved receipt");
    let vkey = std::fs::read_to_string(dir.join("node.vkey")).expect("the node's vkey");
    (bytes, Verifier::from_vkey(vkey.trim()).expect("a vkey"))
}

#[test]
fn the_saved_receipt_verifies_and_not_without_its_signature() {
    let (bytes, key) = vector();
    let r = RunReceipt::decode(bytes.as_slice()).expect("a receipt");
    let ok = verify(&r, std::slice::from_ref(&key), &[], 0).expect("valid");
    assert_eq!(ok.records, r.records.len());
    // Its times and counts are what no record proves: they are there to be bound.
    assert!(r.created_at_unix_ms > 0 && r.ended_at_unix_ms > 0);
    // Without its signature it is refused: the fields no record proves would be unbound.
    let mut unsigned = r.clone();
    unsigned.node_signature = None;
    assert!(verify(&unsigned, &[key], &[], 0).is_err());
}

#[test]
fn every_altered_byte_that_changes_the_receipt_is_refused() {
    let (bytes, key) = vector();
    let keys = [key];
    let original = RunReceipt::decode(bytes.as_slice()).expect("a receipt");
    let (mut changed, mut tried) = (0usize, 0usize);
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= mask;
            tried += 1;
            let Ok(altered) = RunReceipt::decode(b.as_slice()) else {
                continue;
            };
            if altered == original {
                continue;
            }
            changed += 1;
            assert!(
                verify(&altered, &keys, &[], 0).is_err(),
                "byte {i} ^ {mask:#04x} changes what the receipt shows and still verifies"
            );
        }
    }
    // Most flips decode to a changed receipt: the loop checked the verifier, not the decoder.
    assert!(
        changed * 2 > tried,
        "{changed} of {tried} flips changed the receipt"
    );
}

/// The fields the issue found unbound, each changed alone.
#[test]
fn the_fields_no_record_proves_are_bound() {
    let (bytes, key) = vector();
    let keys = [key];
    let r = RunReceipt::decode(bytes.as_slice()).expect("a receipt");
    type Change = (&'static str, fn(&mut RunReceipt));
    let changes: [Change; 5] = [
        ("created_at", |r| r.created_at_unix_ms += 1),
        ("started_at", |r| r.started_at_unix_ms += 1),
        ("ended_at", |r| r.ended_at_unix_ms -= 1),
        ("child_runs", |r| r.child_runs += 1),
        ("node", |r| r.node.push('x')),
    ];
    for (field, change) in changes {
        let mut bad = r.clone();
        change(&mut bad);
        assert!(verify(&bad, &keys, &[], 0).is_err(), "{field} altered");
    }
}
