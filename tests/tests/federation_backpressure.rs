//! Issue 15, item 4, bounded outboxes: with `federation.outbox_max = 2` and globex down, acme
//! queues two records for globex and no more: `peer health` (gRPC and `accordctl ... --output
//! json`) shows the queue full and routing paused (backfilling from the first record not
//! queued). Nothing is dropped: once globex is back, all five
//! records reach it in ledger order, each `admitted` at globex on acme's node, and the queue
//! is live again.

use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::record::Operation;
use accord_proto::pb::work::v1::Durability;
use accord_tests::{TestNode, eventually};
use federation_common::*;

async fn health(a: &TestNode) -> admin::GetPeerHealthResponse {
    a.admin()
        .await
        .unwrap()
        .get_peer_health(a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        }))
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_outbox_pauses_routing_and_loses_nothing() {
    let a = TestNode::builder("acme")
        .party("alice")
        .config(move |t, d| {
            fast(t, d);
            // `fast` ends with the [federation] table.
            t.push_str("outbox_max = 2\nbackfill_per_second = 100\n");
        })
        .start()
        .await
        .unwrap();
    let mut b = TestNode::builder("globex")
        .party("bob")
        .config(fast)
        .start()
        .await
        .unwrap();
    accord_tests::federate(&a, &b).await.unwrap();
    assert!(b.terminate().unwrap(), "globex stops");

    let alice = signer(&a, "alice");
    let mut ids = Vec::new();
    for n in 0..5 {
        let c = format!("bp-{n}");
        ids.push(
            submit(
                &a,
                &alice,
                &request("acme", "alice", &c, party("globex", "bob")),
            )
            .await
            .0,
        );
    }
    // Two queued, routing paused at the third (ledger sequence 2).
    let h = eventually(WAIT, || async {
        let h = health(&a).await;
        (h.queue_full && h.backfilling).then_some(h)
    })
    .await
    .expect("the queue fills and routing pauses");
    assert_eq!(h.queue_depth, 2, "{h:?}");
    assert_eq!(h.queue_max, 2, "{h:?}");
    assert_eq!(h.backfill_from_sequence, 2, "{h:?}");
    let args = [
        admin_args(&a),
        vec![
            "--output".into(),
            "json".into(),
            "peer".into(),
            "health".into(),
            "globex".into(),
        ],
    ]
    .concat();
    let (code, out, err) = accordctl(&args);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["queue_full"], true, "{j}");
    assert_eq!(j["queue_max"], 2, "{j}");
    assert_eq!(j["queue_depth"], 2, "{j}");
    assert_eq!(j["backfilling"], true, "{j}");
    // Still paused: more records do not grow the queue.
    ids.push(
        submit(
            &a,
            &alice,
            &request("acme", "alice", "bp-5", party("globex", "bob")),
        )
        .await
        .0,
    );
    assert_eq!(health(&a).await.queue_depth, 2);

    // globex comes back: everything arrives, in order, and is admitted.
    b.spawn().await.unwrap();
    for (n, id) in ids.iter().enumerate() {
        wait_peer_durability(&a, id, "globex", Durability::Admitted).await;
        wait_state(&b, &format!("bp-{n}"), "requested").await;
    }
    let at_b: Vec<String> = ledger(&b)
        .await
        .iter()
        .map(decode)
        .filter(|r| {
            r.author.as_ref().is_some_and(|p| p.organisation == "acme")
                && matches!(r.operation, Some(Operation::Request(_)))
        })
        .map(|r| r.commitment_id)
        .collect();
    assert_eq!(at_b, ["bp-0", "bp-1", "bp-2", "bp-3", "bp-4", "bp-5"]);
    let h = eventually(WAIT, || async {
        let h = health(&a).await;
        (!h.backfilling && !h.queue_full && h.queue_depth == 0).then_some(h)
    })
    .await
    .expect("routing is live again and the queue drained");
    assert_eq!(h.queue_max, 2);
}
