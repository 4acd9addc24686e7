//! Issue 15, item 4, backfill: records written before a peer was added reach it. acme writes
//! three commitments that involve globex's parties (and one that involves only its own) while
//! globex is not its peer; nothing is queued for globex then. Once the operator adds globex
//! (`AddPeer`), acme queues those three requests, in ledger order, and globex admits them as
//! any delivery: each reaches `admitted` at globex on acme's node, globex derives each
//! commitment, its ledger holds them in acme's order, and the local-only one never leaves acme.

use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::record::Operation;
use accord_proto::pb::work::v1::Durability;
use accord_tests::eventually;
use federation_common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_peer_added_later_receives_earlier_records_in_ledger_order() {
    let (a, b) = two_orgs(&["alice", "carol"], &["bob"]).await;
    // globex accepts acme's envelopes; acme does not know globex yet.
    b.add_peer(&a).await.unwrap();

    let alice = signer(&a, "alice");
    let mut ids = Vec::new();
    for c in ["early-1", "early-2", "early-3"] {
        ids.push(
            submit(
                &a,
                &alice,
                &request("acme", "alice", c, party("globex", "bob")),
            )
            .await
            .0,
        );
        // Between them, a commitment of acme's own parties only.
        if c == "early-2" {
            submit(
                &a,
                &alice,
                &request("acme", "alice", "local-1", party("acme", "carol")),
            )
            .await;
        }
    }
    // No peer: nothing is routed for globex, and there is no health for it.
    let mut admin_a = a.admin().await.unwrap();
    let health = admin_a
        .get_peer_health(a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        }))
        .await;
    assert_eq!(
        health.unwrap_err().code(),
        tonic::Code::NotFound,
        "globex is not a peer yet"
    );
    for c in ["early-1", "early-2", "early-3"] {
        let r = work(&b)
            .await
            .get_commitment(accord_proto::pb::work::v1::GetCommitmentRequest {
                commitment_id: c.into(),
            })
            .await;
        assert_eq!(
            r.unwrap_err().code(),
            tonic::Code::NotFound,
            "{c} not at globex yet"
        );
    }

    a.add_peer(&b).await.unwrap();
    for (c, id) in ["early-1", "early-2", "early-3"].iter().zip(&ids) {
        wait_state(&b, c, "requested").await;
        wait_peer_durability(&a, id, "globex", Durability::Admitted).await;
    }
    // In acme's ledger order in globex's ledger, and the local commitment stayed at acme.
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
    assert_eq!(at_b, ["early-1", "early-2", "early-3"]);
    let local = work(&b)
        .await
        .get_commitment(accord_proto::pb::work::v1::GetCommitmentRequest {
            commitment_id: "local-1".into(),
        })
        .await;
    assert_eq!(local.unwrap_err().code(), tonic::Code::NotFound);

    // The backfill handed globex back to the router: a new record goes the usual way.
    let h = eventually(WAIT, || {
        let mut admin_a = admin_a.clone();
        let req = a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        });
        async move {
            let h = admin_a.get_peer_health(req).await?.into_inner();
            Ok::<_, tonic::Status>((!h.backfilling && h.queue_depth == 0).then_some(h))
        }
    })
    .await
    .expect("backfill done and the queue drained");
    assert!(!h.queue_full);
    let (late, _) = submit(
        &a,
        &alice,
        &request("acme", "alice", "late-1", party("globex", "bob")),
    )
    .await;
    wait_state(&b, "late-1", "requested").await;
    wait_peer_durability(&a, &late, "globex", Durability::Admitted).await;
}
