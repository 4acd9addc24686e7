//! Issue 5 end to end: a commitment between two organisations, each on its own node (seed 000,
//! "Federation admission", "Durability states"). A party of acme requests from a party of
//! globex; globex promises, acts, states; acme accepts. Both nodes derive the same state from the
//! same records, each record reaches `admitted` on its author's node, the executor's act makes the
//! request `acted upon`, and the receipts prove admission offline with accordctl alone.

use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::{self as rec, record::Operation};
use accord_proto::pb::work::v1::Durability;
use federation_common::*;

#[tokio::test(flavor = "multi_thread")]
async fn cross_organisation_commitment_end_to_end() {
    let (a, b) = federated(&["alice"], &["bob"]).await;

    // acme/alice requests (signed with her own key) from globex/bob.
    let c = "deal-1";
    let (request, _) = submit(
        &a,
        &signer(&a, "alice"),
        &request("acme", "alice", c, party("globex", "bob")),
    )
    .await;
    wait_state(&b, c, "requested").await;

    // globex/bob promises on his own node (declared through it, node-signed).
    let promise = declare(
        &b,
        "bob",
        record("globex", "bob", c, &[], Operation::Promise(rec::Promise {})),
    )
    .await;
    wait_state(&a, c, "promised").await;

    // The executor reports an act based on the request: acted upon, on both nodes.
    let act = rec::ActedUpon {
        record_id: request.to_vec().into(),
        act: "started the work".into(),
    };
    let acted = declare(
        &b,
        "bob",
        record("globex", "bob", c, &[], Operation::ActedUpon(act)),
    )
    .await;
    accord_tests::eventually(WAIT, || async {
        let d = durability(&a, &request).await;
        (d.durability == Durability::ActedUpon as i32
            && d.acted_upon_by.iter().any(|x| x.as_ref() == acted))
        .then_some(())
    })
    .await
    .expect("the request is acted upon at acme");
    assert!(
        durability(&b, &request)
            .await
            .acted_upon_by
            .iter()
            .any(|x| x.as_ref() == acted)
    );

    let state = rec::State {
        fulfillment_refs: vec!["delivery-1".into()],
    };
    let stated = declare(
        &b,
        "bob",
        record("globex", "bob", c, &[], Operation::State(state)),
    )
    .await;
    wait_state(&a, c, "stated").await;

    let accept = rec::Accept {
        evidence_ref: "delivery-1".into(),
        ..Default::default()
    };
    let accepted = declare(
        &a,
        "alice",
        record("acme", "alice", c, &[], Operation::Accept(accept)),
    )
    .await;
    let on_b = wait_state(&b, c, "accepted").await;
    let on_a = wait_state(&a, c, "accepted").await;

    // Same state, same parties, same records in the same order (admission declarations are each
    // node's own links).
    assert_eq!(
        (&on_a.obligee, &on_a.obligor, &on_a.acceptor, on_a.terminal),
        (&on_b.obligee, &on_b.obligor, &on_b.acceptor, on_b.terminal)
    );
    let work_records =
        |v: &accord_proto::pb::work::v1::GetCommitmentResponse| -> Vec<(Vec<u8>, String, bool)> {
            v.history
                .iter()
                .filter(|h| h.operation != "admission")
                .map(|h| {
                    (
                        h.record_id.to_vec(),
                        h.operation.clone(),
                        h.outcome.as_ref().is_some_and(|o| o.applied),
                    )
                })
                .collect()
        };
    let (ha, hb) = (work_records(&on_a), work_records(&on_b));
    assert_eq!(ha, hb);
    let ops: Vec<&str> = ha.iter().map(|h| h.1.as_str()).collect();
    assert_eq!(ops, ["request", "promise", "acted_upon", "state", "accept"]);
    assert!(ha.iter().all(|h| h.2), "every record applied: {ha:?}");
    // Durability on each author's node reaches admitted at the peer; overall it is the highest.
    for id in [&request, &accepted] {
        wait_peer_durability(&a, id, "globex", Durability::Admitted).await;
    }
    for id in [&promise, &acted, &stated] {
        wait_peer_durability(&b, id, "acme", Durability::Admitted).await;
    }
    // Each admitted peer record is linked by an admission declaration on the receiving node
    // (written before its receipt went out, and the waits above saw the receipts).
    assert_eq!(
        wait_state(&a, c, "accepted")
            .await
            .history
            .iter()
            .filter(|h| h.operation == "admission")
            .count(),
        3
    );
    assert_eq!(
        wait_state(&b, c, "accepted")
            .await
            .history
            .iter()
            .filter(|h| h.operation == "admission")
            .count(),
        // acme's two records, and acme's three decisions ordering bob's records: acme is the
        // commitment's home (issue 26), so they reach globex as peer records too.
        5
    );

    // Issue 32, item 2: a declaration is signed only when it may leave its node. globex's
    // decisions about acme's records (deal-1 is homed at acme) stay at globex, bound by its
    // signed checkpoint: no signature. acme's decisions as the home are federated, so signed by
    // acme's node key, at acme and as received at globex.
    let admissions = |entries: Vec<accord_proto::pb::work::v1::LedgerEntry>, by: &str| {
        entries
            .into_iter()
            .filter(|e| {
                let r = decode(e);
                r.commitment_id == c
                    && matches!(r.operation, Some(Operation::Admission(_)))
                    && r.author.is_some_and(|p| p.organisation == by)
            })
            .map(|e| e.record.expect("record"))
            .collect::<Vec<_>>()
    };
    let at_b = admissions(ledger(&b).await, "globex");
    // acme's two work records and its three decisions, each admitted at globex.
    assert_eq!(at_b.len(), 5);
    assert!(at_b.iter().all(|s| s.signatures.is_empty()), "{at_b:?}");
    let acme_node = node_signer(&a).verifier();
    for (at, n) in [(&a, 3), (&b, 3)] {
        let home = admissions(ledger(at).await, "acme");
        assert_eq!(home.len(), n);
        for s in home {
            assert_eq!(s.signatures.len(), 1);
            accord_proto::signing::verify(
                &acme_node,
                &s.payload_type,
                &s.payload,
                &s.signatures[0],
            )
            .expect("acme's node key signed its decision");
        }
    }

    assert_eq!(
        durability(&a, &request).await.durability,
        Durability::ActedUpon as i32
    );
    assert_eq!(
        durability(&a, &accepted).await.durability,
        Durability::Admitted as i32
    );

    // The receipt proves admission offline: fetch it from acme's node, verify with globex's vkey.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("request.receipt");
    let rid = hex::encode(request);
    let mut fetch = vec![
        "receipt".to_string(),
        "fetch".into(),
        "--node".into(),
        format!("https://{}", a.addr),
        "--ca".into(),
        a.dir.join("tls/ca.pem").display().to_string(),
        "--record".into(),
        rid.clone(),
        "--peer".into(),
        "globex".into(),
        "--out".into(),
        file.display().to_string(),
        "--token-file".into(),
        a.dir.join("admin.token").display().to_string(),
    ];
    let verify = |vkey: String| {
        vec![
            "receipt".to_string(),
            "verify".into(),
            "--receipt".into(),
            file.display().to_string(),
            "--peer-vkey".into(),
            vkey,
            "--record".into(),
            rid.clone(),
            "--json".into(),
        ]
    };
    let out = accord_tests::eventually(WAIT, || {
        let (fetch, verify) = (fetch.clone(), verify(b.vkey()));
        async move {
            let (code, _, _) = accordctl(&fetch);
            if code != 0 {
                return None;
            }
            let (code, out, _) = accordctl(&verify);
            (code == 0).then_some(out)
        }
    })
    .await
    .expect("a receipt with proof arrives at acme");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["outcome"], serde_json::json!("admitted"));
    assert_eq!(j["receiver"], "globex");
    assert_eq!(j["record_id"], rid);
    // The wrong receiver key: invalid (exit 1).
    let (code, _, err) = accordctl(&verify(a.vkey()));
    assert_eq!(code, 1, "{err}");
    // A receipt for another record does not pass as this one's.
    fetch[7] = hex::encode(accepted);
    accord_tests::eventually(WAIT, || {
        let fetch = fetch.clone();
        async move { (accordctl(&fetch).0 == 0).then_some(()) }
    })
    .await
    .unwrap();
    let (code, _, _) = accordctl(&verify(b.vkey()));
    assert_eq!(code, 1);

    // Admin: the peer is listed, healthy, with nothing queued.
    let mut adm = a.admin().await.unwrap();
    let peers = adm
        .list_peers(a.admin_request(admin::ListPeersRequest {}))
        .await
        .unwrap()
        .into_inner()
        .peers;
    assert_eq!(
        peers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["globex"]
    );
    let h = adm
        .get_peer_health(a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((h.queue_depth, h.breaker.as_str()), (0, "closed"));
    assert!(h.last_success_unix_ms > 0);
    let (code, out, err) = accordctl(
        &[
            admin_args(&b),
            vec![
                "--json".into(),
                "peer".into(),
                "health".into(),
                "acme".into(),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["queue_depth"], 0);
    assert_eq!(j["breaker"], "closed");
}
