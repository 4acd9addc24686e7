//! Issue 5: `kill -9` of the receiving node mid-stream. Nothing globex acknowledged (a receipt
//! acme holds) is lost, and acme's retries complete the rest, each record admitted once.

use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::work::v1::{self as work, Durability};
use accord_proto::signing;
use accord_tests::TestNode;
use federation_common::*;
use std::collections::HashMap;

#[tokio::test(flavor = "multi_thread")]
async fn receiver_killed_mid_stream_loses_nothing_it_acknowledged() {
    let small_batches = |t: &mut String, _: &std::path::Path| {
        t.push_str("\n[federation]\nbatch_size = 4\nretry_base_ms = 50\nretry_max_ms = 500\nreceipt_poll_ms = 200\n");
    };
    let a = TestNode::builder("acme")
        .party("alice")
        .config(small_batches)
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

    // 200 records submitted at acme as fast as it takes them.
    let alice = signer(&a, "alice");
    let signed: Vec<_> = (0..200)
        .map(|i| {
            signing::sign_record(
                &alice,
                &request("acme", "alice", &format!("k-{i}"), party("globex", "bob")),
            )
        })
        .collect();
    let ids: Vec<[u8; 32]> = signed.iter().map(id_of).collect();
    let mut wc = work(&a).await;
    let submitter = tokio::spawn(async move {
        for s in signed {
            wc.submit(work::SubmitRequest { record: Some(s) })
                .await
                .unwrap();
        }
    });

    // Kill globex while envelopes are arriving.
    let mut badm = b.admin().await.unwrap();
    accord_tests::eventually(WAIT, || {
        let mut badm = badm.clone();
        let req = b.admin_request(admin::GetStatusRequest {});
        async move {
            let size = badm.get_status(req).await?.into_inner().ledger_size;
            Ok::<_, tonic::Status>((size >= 40).then_some(()))
        }
    })
    .await
    .unwrap();
    b.kill9();
    submitter.await.unwrap();

    // What globex acknowledged before it died: every record acme holds a receipt for. Each
    // receipt says `federated` (envelope recorded) or `admitted`, nothing else, for these
    // well-formed records; `admitted` ones are counted apart.
    let mut acknowledged = Vec::new();
    let mut admitted = 0;
    for (i, id) in ids.iter().enumerate() {
        let d = durability(&a, id).await;
        if let Some(p) = d.peers.iter().find(|p| p.peer == "globex") {
            assert!(
                matches!(p.durability(), Durability::Federated | Durability::Admitted),
                "k-{i}: receipt at {:?} ({})",
                p.durability(),
                p.code
            );
            admitted += usize::from(p.durability() == Durability::Admitted);
            acknowledged.push((i, *id));
        }
    }
    assert!(!acknowledged.is_empty());
    assert!(
        admitted > 0,
        "some admissions were acknowledged before the kill"
    );
    assert!(acknowledged.len() < ids.len(), "killed mid-stream");
    // Hold acme's deliveries back while globex restarts, to look at what it kept on its own.
    let mut aadm = a.admin().await.unwrap();
    aadm.set_peer_enabled(a.admin_request(admin::SetPeerEnabledRequest {
        name: "globex".into(),
        enabled: false,
    }))
    .await
    .unwrap();
    b.spawn().await.unwrap();
    let mut bw = work(&b).await;
    for (i, id) in &acknowledged {
        // Recorded, applied by the kernel, and its commitment derived — on globex's own, with
        // acme's deliveries held back.
        let e = bw
            .get_record(work::GetRecordRequest {
                record_id: id.to_vec().into(),
            })
            .await
            .unwrap_or_else(|e| panic!("acknowledged record {} lost: {e}", hex::encode(id)))
            .into_inner()
            .entry
            .expect("entry");
        assert!(
            e.outcome.as_ref().is_some_and(|o| o.applied),
            "k-{i} recorded but not applied: {:?}",
            e.outcome
        );
        let c = bw
            .get_commitment(work::GetCommitmentRequest {
                commitment_id: format!("k-{i}"),
            })
            .await
            .unwrap_or_else(|e| panic!("k-{i} has no derived state after restart: {e}"))
            .into_inner();
        assert_eq!(c.state, "requested", "k-{i}");
    }

    // acme's retries complete the rest.
    aadm.set_peer_enabled(a.admin_request(admin::SetPeerEnabledRequest {
        name: "globex".into(),
        enabled: true,
    }))
    .await
    .unwrap();
    for id in &ids {
        wait_peer_durability(&a, id, "globex", Durability::Admitted).await;
    }
    let entries = ledger(&b).await;
    let mut count: HashMap<Vec<u8>, usize> = HashMap::new();
    for e in &entries {
        *count.entry(e.record_id.to_vec()).or_default() += 1;
    }
    for id in &ids {
        assert_eq!(
            count.get(id.as_slice()),
            Some(&1),
            "{} once in globex's ledger",
            hex::encode(id)
        );
    }
    badm = b.admin().await.unwrap();
    let q = badm
        .list_quarantine(b.admin_request(admin::ListQuarantineRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(q.records.is_empty());
}
