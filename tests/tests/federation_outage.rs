//! Issue 5: a peer down for a while, then back (DESIGN.md, "Federation": "Delivery is durable
//! and retried per peer with backoff and a circuit breaker"). While globex is down, acme queues
//! its records durably, backs off and opens its breaker; when globex is back, every queued record
//! is delivered exactly once, in order per commitment, and admitted.

use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::work::v1::Durability;
use accord_tests::TestNode;
use federation_common::*;
use std::collections::HashMap;

#[tokio::test(flavor = "multi_thread")]
async fn peer_down_then_back_delivers_every_record_once_in_order() {
    let a = TestNode::builder("acme")
        .party("alice")
        .config(fast)
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
    assert!(b.terminate().unwrap(), "globex stops cleanly");

    // Three records per commitment (request, defer, resume naming the defer), five commitments.
    let alice = signer(&a, "alice");
    let started = std::time::Instant::now();
    let mut order: Vec<[u8; 32]> = Vec::new();
    for i in 0..5 {
        let c = format!("out-{i}");
        let (r, _) = submit(
            &a,
            &alice,
            &request("acme", "alice", &c, party("globex", "bob")),
        )
        .await;
        let (d, _) = submit(&a, &alice, &defer("acme", "alice", &c)).await;
        let (z, _) = submit(&a, &alice, &resume("acme", "alice", &c, d)).await;
        order.extend([r, d, z]);
    }

    // Queued durably; the breaker opens after the configured failures.
    let mut adm = a.admin().await.unwrap();
    let h = accord_tests::eventually(WAIT, || {
        let mut adm = adm.clone();
        let req = a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        });
        async move {
            let h = adm.get_peer_health(req).await?.into_inner();
            Ok::<_, tonic::Status>((h.breaker == "open").then_some(h))
        }
    })
    .await
    .expect("the breaker opens while globex is down");
    assert_eq!(h.queue_depth, 15);
    // The oldest item has waited through several failed attempts, and not longer than this
    // test has been submitting (a signed field: a bogus clock difference would show here).
    let waited = i64::try_from(started.elapsed().as_millis()).unwrap();
    assert!(
        h.oldest_queued_age_ms > 0 && h.oldest_queued_age_ms <= waited,
        "oldest queued age {} ms, {waited} ms since the first submit",
        h.oldest_queued_age_ms
    );
    assert!(!h.last_error.is_empty());
    assert_eq!(h.last_success_unix_ms, 0);
    // Nothing is federated yet.
    assert!(durability(&a, &order[0]).await.peers.is_empty());

    // globex is back (same port, same data): everything is delivered and admitted.
    b.spawn().await.unwrap();
    for id in &order {
        wait_peer_durability(&a, id, "globex", Durability::Admitted).await;
    }
    let h = adm
        .get_peer_health(a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((h.queue_depth, h.breaker.as_str()), (0, "closed"));

    // Exactly once each, and in acme's order within each commitment.
    let entries = ledger(&b).await;
    let mut seen: HashMap<[u8; 32], usize> = HashMap::new();
    let mut per_commitment: HashMap<String, Vec<[u8; 32]>> = HashMap::new();
    for e in &entries {
        let id: [u8; 32] = e.record_id.as_ref().try_into().unwrap();
        if order.contains(&id) {
            *seen.entry(id).or_default() += 1;
            per_commitment
                .entry(decode(e).commitment_id)
                .or_default()
                .push(id);
            assert!(e.outcome.as_ref().unwrap().applied, "applied in order");
        }
    }
    assert_eq!(seen.len(), order.len());
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    for (i, chunk) in order.chunks(3).enumerate() {
        assert_eq!(per_commitment[&format!("out-{i}")], chunk.to_vec());
    }
}
