//! Issue 3 through the node's gRPC API: request → counter → accept_counter → state → reject →
//! state → accept, with a rejected invalid operation recorded and visible in the history.

use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing;
use accord_tests::{TestNode, WorkClient};

fn p(name: &str) -> Option<PartyRef> {
    Some(PartyRef {
        organisation: "acme".into(),
        name: name.into(),
    })
}

async fn submit(
    c: &mut WorkClient,
    who: &Signer,
    author: &str,
    op: Operation,
    n: u8,
) -> work::SubmitResponse {
    let r = Record {
        author: p(author),
        declared_at_unix_ms: 1,
        commitment_id: "c-1".into(),
        nonce: vec![n].into(),
        operation: Some(op),
        ..Default::default()
    };
    c.submit(work::SubmitRequest {
        record: Some(signing::sign_record(who, &r)),
    })
    .await
    .unwrap()
    .into_inner()
}

async fn state(c: &mut WorkClient) -> work::GetCommitmentResponse {
    c.get_commitment(work::GetCommitmentRequest {
        commitment_id: "c-1".into(),
    })
    .await
    .unwrap()
    .into_inner()
}

#[tokio::test(flavor = "multi_thread")]
async fn full_lifecycle_over_grpc() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let bob = Signer::from_skey(node.party_skey("bob").trim()).unwrap();
    let mut c = node.work().await.unwrap();

    let terms = |t: &str| {
        Some(rec::Terms {
            title: t.into(),
            ..Default::default()
        })
    };
    let r = submit(
        &mut c,
        &alice,
        "alice",
        Operation::Request(rec::Request {
            candidate: p("bob"),
            terms: terms("v1"),
            ..Default::default()
        }),
        0,
    )
    .await;
    assert!(r.outcome.unwrap().applied);
    assert_eq!(state(&mut c).await.state, "requested");

    let counter = submit(
        &mut c,
        &bob,
        "bob",
        Operation::Counter(rec::Counter { terms: terms("v2") }),
        1,
    )
    .await;
    assert!(counter.outcome.unwrap().applied);
    let s = state(&mut c).await;
    assert_eq!(s.state, "countered");
    assert_eq!(
        s.next_move,
        vec![p("alice").unwrap()],
        "countered: the obligee's move"
    );

    // A stale digest is rejected, recorded, and changes nothing.
    let stale = submit(
        &mut c,
        &alice,
        "alice",
        Operation::AcceptCounter(rec::AcceptCounter {
            counter_digest: vec![9; 32].into(),
        }),
        2,
    )
    .await;
    let o = stale.outcome.unwrap();
    assert!(!o.applied);
    assert_eq!(o.rejection_code, "stale_counter_digest");
    assert_eq!(state(&mut c).await.state, "countered");

    let ok = submit(
        &mut c,
        &alice,
        "alice",
        Operation::AcceptCounter(rec::AcceptCounter {
            counter_digest: counter.record_id.clone(),
        }),
        3,
    )
    .await;
    assert!(ok.outcome.unwrap().applied);
    assert_eq!(state(&mut c).await.state, "promised");

    // An invalid operation: alice (the obligee) cannot state fulfilment.
    let bad = submit(
        &mut c,
        &alice,
        "alice",
        Operation::State(rec::State {
            fulfillment_refs: vec!["x".into()],
        }),
        4,
    )
    .await;
    assert_eq!(
        bad.durability(),
        work::Durability::Recorded,
        "a rejected operation is still recorded"
    );
    assert_eq!(bad.outcome.clone().unwrap().rejection_code, "wrong_role");

    let stated = submit(
        &mut c,
        &bob,
        "bob",
        Operation::State(rec::State {
            fulfillment_refs: vec!["doc://1".into()],
        }),
        5,
    )
    .await;
    assert!(stated.outcome.unwrap().applied);
    assert_eq!(state(&mut c).await.state, "stated");
    let rej = submit(
        &mut c,
        &alice,
        "alice",
        Operation::Reject(rec::Reject {
            reason: "incomplete".into(),
        }),
        6,
    )
    .await;
    assert!(rej.outcome.unwrap().applied);
    assert_eq!(state(&mut c).await.state, "promised");
    submit(
        &mut c,
        &bob,
        "bob",
        Operation::State(rec::State {
            fulfillment_refs: vec!["doc://2".into()],
        }),
        7,
    )
    .await;
    let acc = submit(
        &mut c,
        &alice,
        "alice",
        Operation::Accept(rec::Accept::default()),
        8,
    )
    .await;
    assert!(acc.outcome.unwrap().applied);

    let s = state(&mut c).await;
    assert_eq!(s.state, "accepted");
    assert!(s.terminal);
    assert_eq!(s.category, "closed");
    let ops: Vec<(String, bool)> = s
        .history
        .iter()
        .map(|h| (h.operation.clone(), h.outcome.clone().unwrap().applied))
        .collect();
    assert_eq!(
        ops,
        [
            ("request", true),
            ("counter", true),
            ("accept_counter", false),
            ("accept_counter", true),
            ("state", false),
            ("state", true),
            ("reject", true),
            ("state", true),
            ("accept", true)
        ]
        .map(|(o, a)| (o.to_string(), a))
    );
    let bad_entry = s
        .history
        .iter()
        .find(|h| h.record_id == bad.record_id)
        .unwrap();
    assert_eq!(
        bad_entry.outcome.clone().unwrap().rejection_code,
        "wrong_role"
    );

    // A terminal state never changes.
    let late = submit(
        &mut c,
        &bob,
        "bob",
        Operation::Cancel(rec::Cancel {
            reason: 1,
            text: String::new(),
        }),
        9,
    )
    .await;
    assert_eq!(late.outcome.unwrap().rejection_code, "terminal_state");
    let before = state(&mut c).await;
    assert_eq!(before.state, "accepted");

    // Records are the truth: after kill -9 the replay derives the same state and history.
    node.kill9();
    node.respawn_on_new_port().await.unwrap();
    let mut c = node.work().await.unwrap();
    assert_eq!(state(&mut c).await, before);
}
