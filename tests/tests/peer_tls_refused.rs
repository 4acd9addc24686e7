//! Issue 9, clearer failures: when a peer refuses our TLS handshake (its CA set does not trust
//! our certificate), the sender's `peer health` says so — "TLS handshake refused by peer: ..." —
//! rather than the transport's "operation was canceled"; `accordctl admin peer health` shows it.

use accord_proto::note::Signer;
use accord_proto::pb::admin::v1::GetPeerHealthRequest;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::{self as work, work_service_client::WorkServiceClient};
use accord_proto::signing;
use accord_tests::{FAST_FEDERATION, TestNode, eventually, run_bin};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn peer_health_says_the_peer_refused_our_tls_handshake() {
    // globex asks for client certificates chained to its own CA only: acme is not its peer.
    let globex = TestNode::builder("globex")
        .party("bob")
        .config(|t, _| *t = t.replace("client_ca = []", "client_ca = [\"tls/ca.pem\"]"))
        .start()
        .await
        .unwrap();
    let acme = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| t.push_str(FAST_FEDERATION))
        .start()
        .await
        .unwrap();
    // acme trusts globex (its CA and keys); globex does not trust acme.
    acme.add_peer(&globex).await.unwrap();

    let alice = Signer::from_skey(acme.party_skey("alice").trim()).unwrap();
    let r = Record {
        author: Some(PartyRef {
            organisation: "acme".into(),
            name: "alice".into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: "tls-1".into(),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: "globex".into(),
                name: "bob".into(),
            }),
            terms: Some(rec::Terms {
                title: "needs globex".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    WorkServiceClient::new(acme.channel().await.unwrap())
        .submit(work::SubmitRequest {
            record: Some(signing::sign_record(&alice, &r)),
        })
        .await
        .unwrap();

    let mut admin = acme.admin().await.unwrap();
    let err = eventually(Duration::from_secs(60), || {
        let req = acme.admin_request(GetPeerHealthRequest {
            name: "globex".into(),
        });
        let mut admin = admin.clone();
        async move {
            let h = admin.get_peer_health(req).await?.into_inner();
            Ok::<_, tonic::Status>((!h.last_error.is_empty()).then_some(h.last_error))
        }
    })
    .await
    .unwrap();
    assert!(
        err.starts_with("TLS handshake refused by peer:"),
        "peer health says the peer refused the handshake: {err:?}"
    );
    assert!(!err.contains("operation was canceled"), "{err:?}");
    let h = admin
        .get_peer_health(acme.admin_request(GetPeerHealthRequest {
            name: "globex".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(h.queue_depth, 1, "the record waits in the queue");

    // The same in accordctl's JSON.
    let dir = acme.dir.display().to_string();
    let (code, out, errout) = run_bin(
        "accordctl",
        &[
            "admin",
            "--node",
            &format!("https://{}", acme.addr),
            "--ca",
            &format!("{dir}/tls/ca.pem"),
            "--token-file",
            &format!("{dir}/admin.token"),
            "--domain",
            "localhost",
            "--output",
            "json",
            "peer",
            "health",
            "globex",
        ],
        None,
    )
    .unwrap();
    assert_eq!(code, 0, "{errout}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v["last_error"]
            .as_str()
            .unwrap()
            .starts_with("TLS handshake refused by peer:"),
        "{v}"
    );
}
