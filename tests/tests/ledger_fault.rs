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
