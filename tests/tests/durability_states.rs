//! Issue 26, item 5: durability as seed 000 defines it ("Durability states"; "Federation
//! admission"), read through `GetDurability` on the author's node over two real federated nodes.
//! The expected values are the seed's: `included` — "The record is in a checkpoint's Merkle
//! tree"; `federated` — "The other side's signed receipt arrived"; `admitted`,
//! `["quarantined", code]`, `["rejected", code]` — each peer's own outcome, written as the seed
//! writes it; and the summary follows the rule in work.proto (a peer's rejection or quarantine is
//! never hidden behind another state, as the numeric maximum hid it behind `acted upon`).

use crate::federation_common;

use accord_proto::note::Verifier;
use accord_proto::pb::record::v1::{self as rec, AdmissionOutcome, record::Operation};
use accord_proto::pb::work::v1::{self as work, Durability};
use accord_proto::signing;
use accord_tests::TestNode;
use federation_common::*;
use prost::Message;

/// `id`'s durability on `node` once `done` holds for it (bounded).
async fn durability_when(
    node: &TestNode,
    id: &[u8; 32],
    what: &str,
    done: impl Fn(&work::GetDurabilityResponse) -> bool,
) -> work::GetDurabilityResponse {
    accord_tests::eventually(WAIT, || async {
        let d = durability(node, id).await;
        done(&d).then_some(d)
    })
    .await
    .unwrap_or_else(|e| panic!("{}: never {what}: {e}", hex::encode(id)))
}

/// The one peer entry of a response, for `peer`.
fn at<'a>(d: &'a work::GetDurabilityResponse, peer: &str) -> &'a work::PeerDurability {
    let found: Vec<_> = d.peers.iter().filter(|p| p.peer == peer).collect();
    assert_eq!(found.len(), 1, "one entry for {peer}: {:?}", d.peers);
    found[0]
}

/// The peer's signed receipt in a peer entry, verified with the peer's node key.
fn peer_receipt(p: &work::PeerDurability, peer: &TestNode) -> accord_proto::receipt::Verified {
    let signed = accord_proto::pb::federation::v1::Signed::decode(p.receipt.as_ref())
        .expect("the peer entry carries an encoded Signed receipt");
    let key = Verifier::from_vkey(&peer.vkey()).unwrap();
    accord_proto::receipt::verify(&signed, &[key], &[]).expect("signed by the peer's node key")
}

/// acme (alice, and the parties given) and globex (bob), peered both ways; acme's `[authorities]`
/// let alice `administrative_close` any commitment, globex's do not.
async fn pair() -> (TestNode, TestNode) {
    let a = TestNode::builder("acme")
        .party("alice")
        .party("carol")
        .config(|text, dir| {
            fast(text, dir);
            *text = text.replace(
                "administrative_close = []",
                "administrative_close = [\"acme/alice\"]",
            );
        })
        .start()
        .await
        .unwrap();
    let b = TestNode::builder("globex")
        .party("bob")
        .config(fast)
        .start()
        .await
        .unwrap();
    accord_tests::federate(&a, &b).await.unwrap();
    (a, b)
}

/// `included`, then `federated` and `admitted` at the peer: a request from alice (acme) to bob
/// (globex).
#[tokio::test(flavor = "multi_thread")]
async fn included_federated_admitted() {
    let (a, b) = pair().await;
    let alice = signer(&a, "alice");
    let signed = signing::sign_record(
        &alice,
        &request("acme", "alice", "dur-1", party("globex", "bob")),
    );
    let id = id_of(&signed);
    let resp = work(&a)
        .await
        .submit(work::SubmitRequest {
            record: Some(signed.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.durability(), Durability::Recorded);

    // Included: in a checkpoint's Merkle tree — the inclusion proof puts the record's leaf under
    // the checkpoint's root.
    let d = durability_when(&a, &id, "included", |d| {
        d.local == Durability::Included as i32
    })
    .await;
    assert_included(&d, &signed);

    // Federated: globex's signed receipt for the record arrived at acme; admitted: globex wrote
    // its admission record (the receipt names it). Every peer admitted: the summary is admitted.
    let d = durability_when(&a, &id, "admitted at globex", |d| {
        d.peers
            .iter()
            .any(|p| p.peer == "globex" && p.durability == Durability::Admitted as i32)
    })
    .await;
    let g = at(&d, "globex");
    let v = peer_receipt(g, &b);
    assert_eq!(
        (
            v.receipt.receiver.as_str(),
            v.receipt.sender.as_str(),
            v.receipt.record_id.as_ref()
        ),
        ("globex", "acme", &id[..])
    );
    assert!(!v.receipt.admission_record_id.is_empty());
    assert_eq!(
        (g.outcome(), g.decision.as_str(), g.code.as_str()),
        (AdmissionOutcome::Admitted, "admitted", "")
    );
    assert_eq!(d.durability(), Durability::Admitted);
    assert!(d.awaiting.is_empty(), "{:?}", d.awaiting);
    assert!(matches!(
        d.local(),
        Durability::Included | Durability::Witnessed
    ));
}

/// `["quarantined", "missing_basis"]` at the peer: alice's record names as its basis a record
/// of a commitment globex has no part in (alice and carol, both of acme), which never reaches
/// globex. A rejection elsewhere is absent, so the summary is quarantined.
#[tokio::test(flavor = "multi_thread")]
async fn quarantined_at_the_peer() {
    let (a, _b) = pair().await;
    let alice = signer(&a, "alice");
    let (local, _) = submit(
        &a,
        &alice,
        &request("acme", "alice", "dur-local", party("acme", "carol")),
    )
    .await;
    let (req, _) = submit(
        &a,
        &alice,
        &request("acme", "alice", "dur-2", party("globex", "bob")),
    )
    .await;
    let mut d = defer("acme", "alice", "dur-2");
    d.basis = vec![local.to_vec().into()];
    let (deferred, _) = submit(&a, &alice, &d).await;

    wait_peer_durability(&a, &req, "globex", Durability::Admitted).await;
    let d = durability_when(&a, &deferred, "quarantined at globex", |d| {
        d.peers.iter().any(|p| p.peer == "globex")
    })
    .await;
    let g = at(&d, "globex");
    assert_eq!(
        (
            g.durability(),
            g.outcome(),
            g.decision.as_str(),
            g.code.as_str()
        ),
        (
            Durability::Quarantined,
            AdmissionOutcome::Quarantined,
            r#"["quarantined", "missing_basis"]"#,
            "missing_basis"
        )
    );
    assert_eq!(d.durability(), Durability::Quarantined);
    // The record that only acme holds goes to no peer: its own progress is the summary.
    let l = durability(&a, &local).await;
    assert!(l.peers.is_empty() && l.awaiting.is_empty(), "{l:?}");
    assert_eq!(l.durability, l.local);
}

/// `["rejected", code]` at the peer: bob (globex) asks alice for dur-3, so globex is its home
/// and decides its records; acme lets alice `administrative_close`, globex does not (grants are
/// each organisation's own, and the home's word stands): globex rejects her close
/// `wrong_role`, and that rejection, with its code, is the summary at acme.
#[tokio::test(flavor = "multi_thread")]
async fn rejected_at_the_peer() {
    let (a, b) = pair().await;
    let alice = signer(&a, "alice");
    let bob = signer(&b, "bob");
    let (asked, _) = submit(
        &b,
        &bob,
        &request("globex", "bob", "dur-3", party("acme", "alice")),
    )
    .await;
    durability_when(&b, &asked, "admitted at acme", |d| {
        d.peers
            .iter()
            .any(|p| p.peer == "acme" && p.durability == Durability::Admitted as i32)
    })
    .await;
    let close = record(
        "acme",
        "alice",
        "dur-3",
        &[],
        Operation::AdministrativeClose(rec::AdministrativeClose {
            reason: "duplicate of another request".into(),
        }),
    );
    // Not decided at acme: it waits for its home's order (issue 26).
    let (closed, resp) = submit_undecided(&a, &alice, &close).await;
    let o = resp.outcome.unwrap_or_default();
    assert!(
        !o.applied && o.rejection_code == "awaiting_sequence",
        "{o:?}"
    );
    let d = durability_when(&a, &closed, "decided at globex", |d| {
        d.peers.iter().any(|p| {
            p.peer == "globex"
                && p.durability != Durability::Federated as i32
                && p.durability != Durability::Quarantined as i32
        })
    })
    .await;
    let g = at(&d, "globex");
    assert_eq!(
        (
            g.durability(),
            g.outcome(),
            g.decision.as_str(),
            g.code.as_str()
        ),
        (
            Durability::Rejected,
            AdmissionOutcome::Rejected,
            r#"["rejected", "invalid_operation:wrong_role"]"#,
            "invalid_operation:wrong_role"
        )
    );
    assert_eq!(d.durability(), Durability::Rejected);
}

/// A peer that records envelopes but has not decided about their records yet: it answers each
/// `Deliver` with its signed envelope receipt only, and `GetReceipts` with nothing (as a receiver
/// whose admissions are still under way would). Speaks with globex's TLS identity and node key.
struct Undecided {
    key: accord_proto::note::Signer,
}

#[tonic::async_trait]
impl accord_proto::pb::federation::v1::federation_service_server::FederationService for Undecided {
    async fn deliver(
        &self,
        req: tonic::Request<accord_proto::pb::federation::v1::DeliverRequest>,
    ) -> Result<tonic::Response<accord_proto::pb::federation::v1::DeliverResponse>, tonic::Status>
    {
        use accord_proto::pb::federation::v1 as fed;
        let env = req.into_inner().envelope.unwrap_or_default();
        let e = fed::Envelope::decode(env.payload.as_ref())
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let receipt = fed::Receipt {
            kind: fed::ReceiptKind::EnvelopeRecorded as i32,
            receiver: e.receiver,
            sender: e.sender,
            envelope_id: signing::record_id(signing::ENVELOPE_PAYLOAD_TYPE, &env.payload)
                .to_vec()
                .into(),
            issued_at_unix_ms: wall_now_ms(),
            ..Default::default()
        }
        .encode_to_vec();
        let sig = signing::sign(&self.key, signing::RECEIPT_PAYLOAD_TYPE, &receipt);
        Ok(tonic::Response::new(fed::DeliverResponse {
            receipts: vec![fed::Signed {
                payload: receipt.into(),
                payload_type: signing::RECEIPT_PAYLOAD_TYPE.into(),
                signatures: vec![sig],
            }],
            sequenced: false,
        }))
    }

    async fn get_receipts(
        &self,
        _: tonic::Request<accord_proto::pb::federation::v1::GetReceiptsRequest>,
    ) -> Result<tonic::Response<accord_proto::pb::federation::v1::GetReceiptsResponse>, tonic::Status>
    {
        Ok(tonic::Response::new(Default::default()))
    }
}

/// `federated` — "The other side's signed receipt arrived" — and no decision yet: the peer entry
/// says federated with its signed receipt and no outcome, and so does the summary.
#[tokio::test(flavor = "multi_thread")]
async fn federated_before_the_peer_decides() {
    use accord_proto::pb::federation::v1::federation_service_server::FederationServiceServer;
    let a = TestNode::builder("acme")
        .party("alice")
        .config(fast)
        .start()
        .await
        .unwrap();
    let mut g = TestNode::builder("globex").party("bob").init().unwrap();
    let pem = |f: &str| std::fs::read(g.dir.join(f)).unwrap();
    let tls = tonic::transport::ServerTlsConfig::new().identity(
        tonic::transport::Identity::from_pem(pem("tls/node.pem"), pem("tls/node.key")),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    g.addr = listener.local_addr().unwrap();
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(FederationServiceServer::new(Undecided {
            key: node_signer(&g),
        }))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    let server = tokio::spawn(server);
    a.add_peer(&g).await.unwrap();

    let id = declare(
        &a,
        "alice",
        request("acme", "alice", "dur-4", party("globex", "bob")),
    )
    .await;
    let d = durability_when(&a, &id, "federated at globex", |d| {
        d.peers.iter().any(|p| p.peer == "globex")
    })
    .await;
    let p = at(&d, "globex");
    assert_eq!(
        (
            p.durability(),
            p.outcome(),
            p.decision.as_str(),
            p.code.as_str()
        ),
        (Durability::Federated, AdmissionOutcome::Unspecified, "", "")
    );
    let v = peer_receipt(p, &g);
    assert_eq!(
        (
            v.receipt.kind(),
            v.receipt.receiver.as_str(),
            v.receipt.sender.as_str()
        ),
        (
            accord_proto::pb::federation::v1::ReceiptKind::EnvelopeRecorded,
            "globex",
            "acme"
        )
    );
    assert_eq!(d.durability(), Durability::Federated);
    assert!(d.awaiting.is_empty(), "{:?}", d.awaiting);
    server.abort();
}
