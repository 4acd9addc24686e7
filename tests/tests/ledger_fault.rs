//! Issue 30, item 3: the node's `ledger_stopped` reason, through the API, from a real write
//! fault. The node process runs with a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored:
//! [`TestNode::spawn_with_file_size_limit`]), so once RocksDB's write-ahead log would grow past
//! it the kernel refuses the write (EFBIG). README: "A write the store refuses ... stops the
//! ledger until the node is restarted: that append and every one after it is `UNAVAILABLE`
//! (`accord-reason: ledger_stopped`), and nothing acknowledged before is lost."

use accord_proto::note::Signer;
use accord_proto::pb::work::v1::{self as work, submit_result::Result as R};
use accord_proto::signing;
use accord_tests::TestNode;

/// The file-size limit: above what a fresh node writes to any one file at start-up (its
/// RocksDB info log and manifest), far below what the records below fill.
const LIMIT_KIB: u64 = 1024;
/// Records per `SubmitBatch`.
const BATCH: usize = 100;
/// At most this many batches: about 4 KiB of write-ahead log per record would still pass
/// 1 MiB well before it (a record and its derived state take about 1 KiB).
const MAX_BATCHES: usize = 40;

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_write_stops_the_ledger_and_loses_nothing_acknowledged() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .init()
        .unwrap();
    node.spawn_with_file_size_limit(LIMIT_KIB).await.unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let mut c = node.work().await.unwrap();

    let mut acked: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut refused = None;
    'batches: for b in 0..MAX_BATCHES {
        let records: Vec<_> = (0..BATCH)
            .map(|i| {
                let id = format!("f-{b}-{i}");
                signing::sign_record(
                    &alice,
                    &accord_tests::records::alice_asks_bob(
                        &id,
                        &format!("job {id} {}", "x".repeat(200)),
                    ),
                )
            })
            .collect();
        let res = c.submit_batch(work::SubmitBatchRequest { records }).await;
        let res = match res {
            Ok(r) => r.into_inner(),
            Err(e) => {
                refused = Some((e.code() as i32, accord_tests::reason(&e)));
                break;
            }
        };
        for r in res.results {
            match r.result {
                Some(R::Ok(ok)) => acked.push((ok.sequence, ok.record_id.to_vec())),
                Some(R::Error(e)) => {
                    refused = Some((e.code, e.reason));
                    break 'batches;
                }
                None => panic!("an empty result"),
            }
        }
    }
    let (code, reason) = refused.expect("no write refused: the file-size limit never bit");
    assert_eq!(
        (code, reason.as_str()),
        (tonic::Code::Unavailable as i32, "ledger_stopped"),
        "the first refused append"
    );
    assert!(!acked.is_empty(), "the node refused before any record");

    // Stopped until a restart: a later append is refused the same way, at once.
    let later = signing::sign_record(
        &alice,
        &accord_tests::records::alice_asks_bob("f-later", "later"),
    );
    let e = c
        .submit(work::SubmitRequest {
            record: Some(later.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), accord_tests::reason(&e).as_str()),
        (tonic::Code::Unavailable, "ledger_stopped"),
        "{e:?}"
    );

    // Restarted without the limit: every acknowledged record is there, at its sequence, and
    // the ledger takes records again.
    node.kill9();
    node.spawn().await.unwrap();
    let mut c = node.work().await.unwrap();
    for (seq, id) in &acked {
        let got = c
            .get_record(work::GetRecordRequest {
                record_id: id.clone().into(),
            })
            .await
            .unwrap_or_else(|e| panic!("acknowledged record {seq} lost: {e:?}"))
            .into_inner();
        assert_eq!(got.entry.unwrap().sequence, *seq);
    }
    let ok = c
        .submit(work::SubmitRequest {
            record: Some(later),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.sequence as usize >= acked.len());
}

/// Issue 30, item 2: `internal` through the API, from a real read fault. The stored values of a
/// stopped node are damaged on disk, as a failing disk or a stray writer would leave them: one
/// record's index entry (its sequence, eight bytes big-endian) cut to three bytes, and another
/// record's ledger entry replaced by bytes that are no protobuf. README: errors carry
/// `accord-reason`; `Storage` and `Internal` are INTERNAL, `accord-reason: internal`, and "never
/// leak detail to the client" (`node/src/error.rs`): the message is "internal error", the detail
/// only in the node's log. The node keeps serving what it can read.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_value_the_node_cannot_read_is_internal_and_leaks_no_detail() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let mut c = node.work().await.unwrap();
    let mut acked = Vec::new();
    for i in 0..4 {
        let ok = accord_tests::records::submit(
            &mut c,
            &alice,
            &accord_tests::records::alice_asks_bob(&format!("r-{i}"), "read fault"),
        )
        .await;
        acked.push((ok.sequence, ok.record_id.to_vec()));
    }
    drop(c);
    assert!(node.terminate().unwrap(), "graceful stop");

    {
        let data = node.dir.join("data");
        let opts = rocksdb::Options::default();
        let cfs = rocksdb::DB::list_cf(&opts, &data).unwrap();
        let db = rocksdb::DB::open_cf(&opts, &data, cfs).unwrap();
        let ids = db.cf_handle("ids").unwrap();
        let (seq1, id1) = &acked[1];
        assert_eq!(
            db.get_cf(ids, id1).unwrap().as_deref(),
            Some(&seq1.to_be_bytes()[..]),
            "the index maps a record id to its sequence"
        );
        db.put_cf(ids, id1, [0xde, 0xad, 0x01]).unwrap();
        let records = db.cf_handle("records").unwrap();
        let seq2 = acked[2].0.to_be_bytes();
        assert!(db.get_cf(records, seq2).unwrap().is_some());
        // A varint that never ends: no protobuf message decodes from it.
        db.put_cf(records, seq2, [0xff; 16]).unwrap();
        db.flush_cf(ids).unwrap();
        db.flush_cf(records).unwrap();
    }

    node.spawn().await.unwrap();
    let mut c = node.work().await.unwrap();
    for (what, (_, id)) in [("index entry", &acked[1]), ("ledger entry", &acked[2])] {
        let e = c
            .get_record(work::GetRecordRequest {
                record_id: id.clone().into(),
            })
            .await
            .unwrap_err();
        assert_eq!(
            (e.code(), accord_tests::reason(&e).as_str(), e.message()),
            (tonic::Code::Internal, "internal", "internal error"),
            "damaged {what}: {e:?}"
        );
    }
    // What is intact is still served, and the ledger still takes records: a read fault is not a
    // write fault (`ledger_stopped` above).
    let got = c
        .get_record(work::GetRecordRequest {
            record_id: acked[3].1.clone().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.entry.unwrap().sequence, acked[3].0);
    let ok = accord_tests::records::submit(
        &mut c,
        &alice,
        &accord_tests::records::alice_asks_bob("r-after", "read fault"),
    )
    .await;
    assert_eq!(ok.sequence, acked[3].0 + 1);
}
