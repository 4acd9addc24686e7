//! Issue 14, item 2: `SubmitBatch` over a real node — each record answered with its own result
//! (one bad record never fails the others), each good one recorded and applied by the kernel, a
//! bad one not written, and a batch over `limits.max_batch_records` refused whole.

use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::pb::work::v1::{self as work, submit_result::Result as R};
use accord_proto::signing;
use accord_tests::TestNode;

fn request(commitment: &str) -> Record {
    accord_tests::records::alice_asks_bob(commitment, &format!("job {commitment}"))
}

fn ok(r: &work::SubmitResult) -> &work::SubmitResponse {
    match &r.result {
        Some(R::Ok(ok)) => ok,
        other => panic!("expected a recorded record, got {other:?}"),
    }
}

fn err(r: &work::SubmitResult) -> &work::RecordError {
    match &r.result {
        Some(R::Error(e)) => e,
        other => panic!("expected a per-record error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_record_answered_alone() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .config(|t, _| t.push_str("\n[limits]\nmax_batch_records = 8\n"))
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let bob = Signer::from_skey(node.party_skey("bob").trim()).unwrap();
    let mut c = node.work().await.unwrap();

    let good: Vec<SignedRecord> = (0..4)
        .map(|i| signing::sign_record(&alice, &request(&format!("b-{i}"))))
        .collect();
    // Signed by bob's key but authored by alice: a bad signature for this author.
    let wrong_author = signing::sign_record(&bob, &request("b-wrong"));
    // A flipped signature byte.
    let mut tampered = signing::sign_record(&alice, &request("b-tampered"));
    let mut sig = tampered.signatures[0].signature.to_vec();
    sig[0] ^= 1;
    tampered.signatures[0].signature = sig.into();
    // Not a record at all.
    let mut garbage = signing::sign_record(&alice, &request("b-garbage"));
    garbage.payload_type = "text/plain".into();

    let batch = vec![
        good[0].clone(),
        wrong_author,
        good[1].clone(),
        tampered,
        good[2].clone(),
        garbage,
        good[3].clone(),
        good[0].clone(),
    ];
    let res = c
        .submit_batch(work::SubmitBatchRequest { records: batch })
        .await
        .unwrap()
        .into_inner()
        .results;
    assert_eq!(res.len(), 8);
    let seqs: Vec<u64> = [0, 2, 4, 6].iter().map(|&i| ok(&res[i]).sequence).collect();
    for (i, r) in [0, 2, 4, 6].iter().map(|&i| ok(&res[i])).enumerate() {
        assert_eq!(r.durability(), work::Durability::Recorded);
        assert!(r.outcome.as_ref().is_some_and(|o| o.applied), "{r:?}");
        assert!(!r.duplicate);
        assert_eq!(
            r.record_id,
            signing::record_id(&good[i].payload_type, &good[i].payload).to_vec()
        );
    }
    // Dense, in the order of the batch.
    assert_eq!(seqs, vec![seqs[0], seqs[0] + 1, seqs[0] + 2, seqs[0] + 3]);
    // The same record twice in one batch: recorded once.
    assert!(ok(&res[7]).duplicate);
    assert_eq!(ok(&res[7]).sequence, seqs[0]);
    for (i, reason) in [
        (1, "bad_signature"),
        (3, "bad_signature"),
        (5, "invalid_argument"),
    ] {
        let e = err(&res[i]);
        assert_eq!(e.reason, reason, "{e:?}");
        assert_eq!(e.code, tonic::Code::InvalidArgument as i32);
    }
    assert_eq!(err(&res[5]).field, "record.payload_type");

    // The good records were applied by the kernel; the bad ones were never written.
    for i in 0..4 {
        let v = c
            .get_commitment(work::GetCommitmentRequest {
                commitment_id: format!("b-{i}"),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(v.state, "requested", "{v:?}");
    }
    for id in ["b-wrong", "b-tampered", "b-garbage"] {
        let e = c
            .get_commitment(work::GetCommitmentRequest {
                commitment_id: id.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{id}");
    }

    // Over the limit: refused whole, nothing written.
    let big: Vec<SignedRecord> = (0..9)
        .map(|i| signing::sign_record(&alice, &request(&format!("big-{i}"))))
        .collect();
    let e = c
        .submit_batch(work::SubmitBatchRequest { records: big })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(e.metadata().get("accord-field").unwrap(), "records");
    let e = c
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: "big-0".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
}
