//! Issue 15, item 2: `accordctl ledger verify` over a real node's data directory. It refuses a
//! directory a running node holds (exit 2); on the stopped node's data it replays every record
//! and passes (exit 0, JSON with the checked checkpoint); and after one stored tree node, the
//! latest checkpoint, one record's stored outcome or the stored projection (derived state) is
//! altered on disk, it fails with exit 1, naming the first sequence where the difference
//! appears.

use crate::federation_common;

use accord_proto::pb::work::v1::LedgerEntry;
use accord_tests::{TestNode, eventually, run_bin};
use federation_common::*;
use prost::Message;
use std::path::Path;

/// Runs `accordctl ledger verify --data-dir <dir> --json`: exit code and the JSON object.
fn verify(data: &Path) -> (i32, serde_json::Value, String) {
    let d = data.display().to_string();
    let (code, out, err) = run_bin(
        "accordctl",
        &["ledger", "verify", "--data-dir", &d, "--json"],
        None,
    )
    .unwrap();
    let v = serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::Null);
    (code, v, err)
}

/// The node's RocksDB with every column family, for altering it as an attacker with disk
/// access would.
fn open_db(data: &Path) -> rocksdb::DB {
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), data).unwrap();
    rocksdb::DB::open_cf(&rocksdb::Options::default(), data, cfs).unwrap()
}

/// Replaces a value in `cf` and returns the previous one.
fn alter(data: &Path, cf: &str, key: &[u8], f: impl FnOnce(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let db = open_db(data);
    let h = db.cf_handle(cf).unwrap();
    let old = db.get_cf(h, key).unwrap().expect("key present");
    db.put_cf(h, key, f(&old)).unwrap();
    db.flush_cf(h).unwrap();
    old
}

fn put_back(data: &Path, cf: &str, key: &[u8], v: &[u8]) {
    let db = open_db(data);
    let h = db.cf_handle(cf).unwrap();
    db.put_cf(h, key, v).unwrap();
    db.flush_cf(h).unwrap();
}

fn difference(v: &serde_json::Value) -> (u64, String) {
    let d = &v["difference"];
    (
        d["sequence"].as_u64().unwrap_or(u64::MAX),
        d["kind"].as_str().unwrap_or("").to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_passes_on_a_real_ledger_and_names_the_first_altered_sequence() {
    let mut a = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();
    let alice = signer(&a, "alice");
    // Five records: four requests (applied) and, at sequence 3, a second request of c-1 (the
    // kernel rejects it: the id is taken), so both outcomes are replayed.
    let mut ids = Vec::new();
    for c in ["c-1", "c-2", "c-3"] {
        ids.push(
            submit(
                &a,
                &alice,
                &request("acme", "alice", c, party("acme", "bob")),
            )
            .await
            .0,
        );
    }
    let again = accord_proto::signing::sign_record(
        &alice,
        &request("acme", "alice", "c-1", party("acme", "bob")),
    );
    let r = work(&a)
        .await
        .submit(accord_proto::pb::work::v1::SubmitRequest {
            record: Some(again),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !r.outcome.unwrap().applied,
        "the second request of c-1 is rejected"
    );
    submit(
        &a,
        &alice,
        &request("acme", "alice", "c-4", party("acme", "bob")),
    )
    .await;
    // The checkpointer signs once the ledger grew: wait for a checkpoint over all five.
    let log = a.log_as("").await.unwrap();
    eventually(WAIT, || {
        let mut log = log.clone();
        async move {
            let c = log
                .get_checkpoint(accord_proto::pb::log::v1::GetCheckpointRequest::default())
                .await?
                .into_inner();
            Ok::<_, tonic::Status>((c.latest.map(|c| c.size) == Some(5)).then_some(()))
        }
    })
    .await
    .expect("a checkpoint over five records");
    let data = a.dir.join("data");

    // The node holds the store: refused with a clear reason, nothing read.
    let (code, v, err) = verify(&data);
    assert_eq!(code, 2, "{v} {err}");
    assert!(err.contains("running node"), "{err}");

    assert!(a.terminate().unwrap(), "graceful stop");
    let (code, v, err) = verify(&data);
    assert_eq!(code, 0, "{v} {err}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["records"], 5, "{v}");
    assert!(
        v["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["which"] == "latest" && c["size"] == 5),
        "{v}"
    );
    assert!(v["difference"].is_null(), "{v}");

    // A leaf hash (tree level 0, index 3) flipped on disk: reported at sequence 3. The levels
    // below 6 are one value per 64-leaf tile (issue 32): key 0x81 ‖ tile (u64 BE), value the
    // leaf count k, then each level's k >> level nodes in order. Five leaves: 5 + 2 + 1 nodes.
    let mut key = vec![0x81u8];
    key.extend_from_slice(&0u64.to_be_bytes());
    let node_at =
        |level: usize, offset: usize| 1 + 32 * ([5, 2, 1][..level].iter().sum::<usize>() + offset);
    let old = alter(&data, "tree", &key, |v| {
        assert_eq!((v[0], v.len()), (5, 1 + 32 * 8), "the five-leaf tile");
        let mut v = v.to_vec();
        v[node_at(0, 3)] ^= 1;
        v
    });
    let (code, v, err) = verify(&data);
    assert_eq!(code, 1, "{v} {err}");
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(difference(&v), (3, "tree".to_string()), "{v}");
    put_back(&data, "tree", &key, &old);
    // An inner node (level 1, index 0: leaves 0 and 1) altered: reported at sequence 1, whose
    // leaf completed it.
    let old = alter(&data, "tree", &key, |v| {
        let mut v = v.to_vec();
        v[node_at(1, 0) + 31] ^= 0x80;
        v
    });
    let (code, v, _) = verify(&data);
    assert_eq!((code, difference(&v)), (1, (1, "tree".to_string())), "{v}");
    put_back(&data, "tree", &key, &old);
    assert_eq!(verify(&data).0, 0, "restored: passes again");

    // The latest checkpoint's note altered (its root line): the signature no longer verifies;
    // reported at the last sequence it covers.
    let old = alter(&data, "meta", b"checkpoint/latest", |v| {
        let mut c: serde_json::Value = serde_json::from_slice(v).unwrap();
        let note = c["note"].as_str().unwrap().to_string();
        let mut lines: Vec<String> = note.lines().map(str::to_string).collect();
        // origin, size, root: replace the root with another base64 hash.
        lines[2] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into();
        c["note"] = (lines.join("\n") + "\n").into();
        serde_json::to_vec(&c).unwrap()
    });
    let (code, v, _) = verify(&data);
    assert_eq!(
        (code, difference(&v)),
        (1, (4, "checkpoint".to_string())),
        "{v}"
    );
    put_back(&data, "meta", b"checkpoint/latest", &old);

    // Derived state altered: record 2's stored outcome flipped to rejected. The record and the
    // tree are intact; the replay reaches `applied` and reports sequence 2.
    let old = alter(&data, "records", &2u64.to_be_bytes(), |v| {
        let mut e = LedgerEntry::decode(v).unwrap();
        let o = e.outcome.as_mut().unwrap();
        o.applied = false;
        o.rejection_code = "altered".into();
        e.encode_to_vec()
    });
    let (code, v, _) = verify(&data);
    assert_eq!(
        (code, difference(&v)),
        (1, (2, "outcome".to_string())),
        "{v}"
    );
    put_back(&data, "records", &2u64.to_be_bytes(), &old);
    let (code, v, _) = verify(&data);
    assert_eq!(code, 0, "{v}");

    // The stored projection altered (issue 15: projections are persisted and must be what the
    // records give). c-2's commitment state (its only record is at sequence 1): reported at 1.
    let old = alter(&data, "pj_commitments", b"c-2", |v| {
        let mut v = v.to_vec();
        let last = v.len() - 1;
        v[last] ^= 1;
        v
    });
    let (code, v, _) = verify(&data);
    assert_eq!(
        (code, difference(&v)),
        (1, (1, "projection".to_string())),
        "{v}"
    );
    put_back(&data, "pj_commitments", b"c-2", &old);
    // c-1's state: its last record is the rejected second request at sequence 3.
    let old = alter(&data, "pj_commitments", b"c-1", |v| {
        let mut v = v.to_vec();
        v[0] ^= 1;
        v
    });
    let (code, v, _) = verify(&data);
    assert_eq!(
        (code, difference(&v)),
        (1, (3, "projection".to_string())),
        "{v}"
    );
    put_back(&data, "pj_commitments", b"c-1", &old);
    // One history entry of c-3 (sequence 2) removed: reported at 2.
    let mut key = b"c-3\0".to_vec();
    key.extend_from_slice(&2u64.to_be_bytes());
    let old = {
        let db = open_db(&data);
        let h = db.cf_handle("pj_history").unwrap();
        let old = db.get_cf(h, &key).unwrap().expect("history entry stored");
        db.delete_cf(h, &key).unwrap();
        db.flush_cf(h).unwrap();
        old
    };
    let (code, v, _) = verify(&data);
    assert_eq!(
        (code, difference(&v)),
        (1, (2, "projection".to_string())),
        "{v}"
    );
    put_back(&data, "pj_history", &key, &old);
    let (code, v, _) = verify(&data);
    assert_eq!(code, 0, "{v}");

    // Index entries no record gives (issue 27: the audit covers every projection family). A
    // time-index point for c-2 (key: time ‖ id): a watch would be woken for nothing; reported at
    // c-2's last record, 1. A run-children entry naming runs that do not exist: reported at the
    // last record, 4.
    let mut timed = 1_000u64.to_be_bytes().to_vec();
    timed.extend_from_slice(b"c-2");
    for (cf, key, at) in [
        ("pj_timed", timed, 1),
        ("pj_run_children", b"r-x\0r-y".to_vec(), 4),
    ] {
        let db = open_db(&data);
        let h = db.cf_handle(cf).unwrap();
        assert!(
            db.get_cf(h, &key).unwrap().is_none(),
            "{cf}: not there before"
        );
        db.put_cf(h, &key, b"").unwrap();
        db.flush_cf(h).unwrap();
        drop(db);
        let (code, v, _) = verify(&data);
        assert_eq!(
            (code, difference(&v)),
            (1, (at, "projection".to_string())),
            "{cf}: {v}"
        );
        assert!(v["difference"].to_string().contains(cf), "{cf}: {v}");
        let db = open_db(&data);
        let h = db.cf_handle(cf).unwrap();
        db.delete_cf(h, &key).unwrap();
        db.flush_cf(h).unwrap();
    }
    let (code, v, _) = verify(&data);
    assert_eq!(code, 0, "{v}");
}
