//! Issue 8, "Bounded resources": FederationService authenticates the caller's TLS certificate
//! before it decodes a body, and refusals are a bounded, rate-limited, paged ring.

use crate::bounds_common;

use accord_proto::pb::federation::v1::{
    DeliverRequest, Envelope, GetReceiptsRequest, Signed,
    federation_service_client::FederationServiceClient,
};
use accord_proto::signing::ENVELOPE_PAYLOAD_TYPE;
use accord_tests::TestNode;
use bounds_common::*;
use prost::Message;

/// A node with a peer (so its listener asks for client certificates) and the given `[limits]`.
async fn receiver(limits: &'static str) -> (TestNode, TestNode) {
    let b = TestNode::builder("globex")
        .party("bob")
        .config(move |t, _| t.push_str(limits))
        .start()
        .await
        .unwrap();
    let a = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    b.add_peer(&a).await.unwrap();
    (b, a)
}

/// Deliver without a peer certificate, a 10 MB `sender`, five times: refused UNAUTHENTICATED
/// before the body is decoded, and the data directory grows by less than 1 MB.
#[tokio::test(flavor = "multi_thread")]
async fn deliver_without_certificate_is_refused_before_decoding() {
    let (b, _a) = receiver("").await;
    let data = b.dir.join("data");
    let before = dir_size(&data);
    let env = Envelope {
        sender: "x".repeat(10 << 20),
        receiver: "globex".into(),
        ..Default::default()
    };
    let signed = Signed {
        payload: env.encode_to_vec().into(),
        payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
        signatures: vec![],
    };
    let mut cl = FederationServiceClient::new(b.channel().await.unwrap())
        .max_encoding_message_size(64 << 20);
    for _ in 0..5 {
        let e = cl
            .deliver(DeliverRequest {
                envelope: Some(signed.clone()),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
        assert_eq!(details(&e).0, "wrong_tls_identity");
        assert!(e.message().len() < 1024, "{} bytes", e.message().len());
    }
    let after = dir_size(&data);
    assert!(
        after < before + (1 << 20),
        "data dir grew by {} bytes",
        after.saturating_sub(before)
    );
    // Kept for the operator, but small.
    let (refusals, _) = all_refusals(&b, 100).await;
    assert!(!refusals.is_empty());
    assert!(
        refusals
            .iter()
            .all(|r| r.peer.len() + r.detail.len() + r.code.len() <= 3 * 256)
    );
}

/// GetReceipts without a peer certificate, 300 times: each refused, and no more refusals stored
/// than the per-source rate allows (burst 10, 1 a minute).
#[tokio::test(flavor = "multi_thread")]
async fn get_receipts_flood_is_refused_and_rate_limited() {
    let (b, _a) = receiver("\n[limits]\nrefusals_burst = 10\nrefusals_per_minute = 1\n").await;
    let mut cl = FederationServiceClient::new(b.channel().await.unwrap());
    let started = std::time::Instant::now();
    for _ in 0..300 {
        let e = cl
            .get_receipts(GetReceiptsRequest {
                record_ids: vec![vec![7u8; 32].into()],
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    }
    let minutes = started.elapsed().as_secs() / 60 + 1;
    let (refusals, _) = all_refusals(&b, 100).await;
    assert!(
        refusals.len() as u64 <= 10 + minutes,
        "{} refusals stored",
        refusals.len()
    );
    assert!(refusals.len() >= 10, "the burst is stored");
}

/// After a flood of refusals, ListRefusals pages: every refusal once, newest first, each page
/// far below the gRPC message limit; `accordctl admin refusals` follows the pages.
#[tokio::test(flavor = "multi_thread")]
async fn list_refusals_pages_after_a_flood() {
    let (b, _a) = receiver("\n[limits]\nrefusals_burst = 1000\nrefusals_max = 250\n").await;
    let mut cl = FederationServiceClient::new(b.channel().await.unwrap())
        .max_encoding_message_size(64 << 20);
    let env = Envelope {
        sender: "y".repeat(1 << 20),
        ..Default::default()
    };
    let signed = Signed {
        payload: env.encode_to_vec().into(),
        payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
        signatures: vec![],
    };
    for i in 0..300 {
        let e = if i % 2 == 0 {
            cl.deliver(DeliverRequest {
                envelope: Some(signed.clone()),
            })
            .await
            .unwrap_err()
        } else {
            cl.get_receipts(GetReceiptsRequest::default())
                .await
                .unwrap_err()
        };
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    }
    let (all, sizes) = all_refusals(&b, 100).await;
    // The ring keeps the newest `refusals_max`.
    assert_eq!(all.len(), 250);
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    assert!(sizes.iter().all(|s| *s < 256 * 1024), "{sizes:?}");
    assert!(all.windows(2).all(|w| w[0].at_unix_ms >= w[1].at_unix_ms));
    let (code, out, err) = accord_tests::run_bin(
        "accordctl",
        &[
            "admin",
            "--node",
            &format!("https://{}", b.addr),
            "--ca",
            &b.dir.join("tls/ca.pem").display().to_string(),
            "--token-file",
            &b.dir.join("admin.token").display().to_string(),
            "--json",
            "refusals",
        ],
        None,
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 250);
}
