//! Issue 5: bad input from a peer is refused or rejected with its code, and recorded (seed 000,
//! "Federation admission"; DESIGN.md, "Errors"): a forged envelope signature, an unknown peer,
//! a wrong TLS identity refuse the whole envelope (PERMISSION_DENIED, the code in
//! `accord-reason`, kept in AdminService.ListRefusals); a forged record signature, a key the
//! peer does not hold, an author of another organisation and a malformed record are each
//! rejected with their code, recorded as admission declarations in the receiver's ledger.

use crate::federation_common;

use accord_proto::note::Signer;
use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::{Record, SignedRecord, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE};
use accord_tests::TestNode;
use federation_common::*;
use prost::Message;

#[tokio::test(flavor = "multi_thread")]
async fn forged_unknown_wrong_identity_and_unauthorized_are_refused_or_rejected() {
    let b = TestNode::builder("globex")
        .party("bob")
        .config(fast)
        .start()
        .await
        .unwrap();
    let a = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    let c = TestNode::builder("initech")
        .party("eve")
        .start()
        .await
        .unwrap();
    let d = TestNode::builder("umbrella").start().await.unwrap();
    b.add_peer(&a).await.unwrap();
    b.add_peer(&c).await.unwrap();
    let mut as_a = AsPeer::new(&a, &b).await;
    let mut as_c = AsPeer::new(&c, &b).await;
    let alice = signer(&a, "alice");
    let good = signing::sign_record(
        &alice,
        &request("acme", "alice", "r-1", party("globex", "bob")),
    );

    // A forged envelope signature: a key with acme's key name that acme does not hold …
    let forger = Signer::generate(&a.origin(), &mut rand::rngs::OsRng).unwrap();
    let env = as_a.envelope_by(&forger, "acme", "globex", vec![good.clone()], 1);
    let e = as_a.deliver(env).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (tonic::Code::PermissionDenied, "unknown_key"),
        "{e}"
    );
    // … and acme's key with a tampered signature.
    let mut env = as_a.envelope("globex", vec![good.clone()], 2);
    let mut sig = env.signatures[0].signature.to_vec();
    sig[0] ^= 1;
    env.signatures[0].signature = sig.into();
    let e = as_a.deliver(env).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (tonic::Code::PermissionDenied, "bad_signature"),
        "{e}"
    );

    // An unknown peer.
    let env = as_a.envelope_by(
        &as_a.key.clone(),
        "mallory",
        "globex",
        vec![good.clone()],
        3,
    );
    let e = as_a.deliver(env).await.unwrap_err();
    assert_eq!(reason(&e), "unknown_peer", "{e}");

    // acme's envelope over initech's TLS identity (a valid peer certificate, the wrong peer).
    let env = as_a.envelope("globex", vec![good.clone()], 4);
    let e = as_c.deliver(env).await.unwrap_err();
    assert_eq!(reason(&e), "wrong_tls_identity", "{e}");

    // A certificate no peer's CA issued does not get past the TLS handshake. umbrella's TLS
    // identity is real (a certificate and its key on disk), so what refuses it below is globex's
    // handshake, not a missing file.
    let cert = std::fs::read_to_string(d.dir.join("tls/node.pem")).expect("umbrella's certificate");
    let key = std::fs::read_to_string(d.dir.join("tls/node.key")).expect("umbrella's key");
    assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
    assert!(key.contains("PRIVATE KEY"));
    let stranger = async {
        let ch = d.peer_channel(&b).await?;
        let mut cl = accord_proto::pb::federation::v1::federation_service_client::FederationServiceClient::new(ch);
        let env = as_a.envelope("globex", vec![good.clone()], 5);
        cl.deliver(accord_proto::pb::federation::v1::DeliverRequest {
            envelope: Some(env),
        })
        .await?;
        anyhow::Ok(())
    };
    let e = stranger
        .await
        .expect_err("a stranger's certificate must be refused");
    // Refused by the connection (globex's handshake rejects the certificate and closes it),
    // never by the service: a transport failure, no reason code, not the gate's refusal.
    // (The connect itself may fail instead, depending on when the alert arrives.)
    match e.downcast_ref::<tonic::Status>() {
        Some(s) => {
            assert!(s.metadata().get("accord-reason").is_none(), "{s:?}");
            assert!(
                matches!(
                    s.code(),
                    tonic::Code::Cancelled | tonic::Code::Unavailable | tonic::Code::Unknown
                ),
                "{s:?}"
            );
        }
        None => assert!(
            e.downcast_ref::<tonic::transport::Error>().is_some(),
            "not a connection failure: {e:?}"
        ),
    }
    assert!(format!("{e:?}").contains("transport"), "{e:?}");

    // None of it reached the ledger.
    let before = ledger(&b).await.len();
    assert_eq!(before, 0);

    // Record by record: each rejected with its code, and recorded.
    let forged_key = Signer::generate("acme/alice", &mut rand::rngs::OsRng).unwrap();
    let unknown_key = signing::sign_record(
        &forged_key,
        &request("acme", "alice", "r-2", party("globex", "bob")),
    );
    let mut bad_sig = signing::sign_record(
        &alice,
        &request("acme", "alice", "r-3", party("globex", "bob")),
    );
    let mut s = bad_sig.signatures[0].signature.to_vec();
    s[5] ^= 0x40;
    bad_sig.signatures[0].signature = s.into();
    let unauthorized = signing::sign_record(
        &alice,
        &request("initech", "eve", "r-4", party("globex", "bob")),
    );
    let own_org = signing::sign_record(
        &alice,
        &request("globex", "bob", "r-5", party("globex", "bob")),
    );
    let malformed = SignedRecord {
        payload: vec![0xff, 0xff, 0x01].into(),
        payload_type: RECORD_PAYLOAD_TYPE.into(),
        signatures: alice_sig(&alice),
    };
    // A request signed under the Declaration type of another operation (seed 000: "Every
    // operation is a typed Declaration (https://suiss.app/ns/work/declaration/<wire name>)").
    let mistyped = accord_tests::records::signed_as(
        &alice,
        "https://suiss.app/ns/work/declaration/promise",
        &request("acme", "alice", "r-6", party("globex", "bob")),
    );
    // A request signed under the generic record type, as every record was before typed
    // Declarations: still read, and admitted.
    let legacy = accord_tests::records::signed_as(
        &alice,
        RECORD_PAYLOAD_TYPE,
        &request("acme", "alice", "r-7", party("globex", "bob")),
    );
    assert_eq!(
        good.payload_type, "https://suiss.app/ns/work/declaration/request",
        "a node signs a request under its Declaration type"
    );
    let records = vec![
        unknown_key.clone(),
        bad_sig.clone(),
        unauthorized.clone(),
        own_org.clone(),
        malformed.clone(),
        mistyped.clone(),
        good.clone(),
        legacy.clone(),
    ];
    let receipts = as_a
        .deliver(as_a.envelope("globex", records.clone(), 6))
        .await
        .unwrap();
    let got: Vec<String> = receipts[1..].iter().map(outcome).collect();
    assert_eq!(
        got,
        [
            r#"["rejected", "unknown_key"]"#,
            r#"["rejected", "bad_signature"]"#,
            r#"["rejected", "unauthorized_author"]"#,
            r#"["rejected", "unauthorized_author"]"#,
            r#"["rejected", "malformed"]"#,
            r#"["rejected", "malformed"]"#,
            "admitted",
            "admitted",
        ]
    );
    let mut wc = work(&b).await;
    for (r, s) in records.iter().zip(&receipts[1..]) {
        let rc = receipt(s);
        assert_eq!(rc.record_id.as_ref(), id_of(r));
        // The decision is recorded: a node-signed admission declaration in globex's ledger.
        let e = wc
            .get_record(work::GetRecordRequest {
                record_id: rc.admission_record_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .entry
            .unwrap();
        let rec = Record::decode(e.record.unwrap().payload.as_ref()).unwrap();
        let Some(Operation::Admission(adm)) = rec.operation else {
            panic!("not an admission declaration")
        };
        assert_eq!(
            (adm.record_id.as_ref(), adm.code.as_str(), adm.peer.as_str()),
            (id_of(r).as_slice(), rc.code.as_str(), "acme")
        );
        assert_eq!(rec.author.unwrap().name, "work-service");
    }
    // Rejected records have no local effect: they are not in the ledger; the good one is.
    for r in &records[..6] {
        let e = wc
            .get_record(work::GetRecordRequest {
                record_id: id_of(r).to_vec().into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
    }
    for r in [&good, &legacy] {
        let got = wc
            .get_record(work::GetRecordRequest {
                record_id: id_of(r).to_vec().into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            got.entry.unwrap().record.as_ref(),
            Some(r),
            "kept as signed"
        );
    }

    // The refusals are kept, with their codes, for the operator.
    let refusals = refusals(&b).await;
    let codes: Vec<&str> = refusals.iter().map(|r| r.code.as_str()).collect();
    for want in [
        "unknown_key",
        "bad_signature",
        "unknown_peer",
        "wrong_tls_identity",
    ] {
        assert!(codes.contains(&want), "{want} not in {codes:?}");
    }
    let (code, out, err) =
        accordctl(&[admin_args(&b), vec!["--json".into(), "refusals".into()]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrong_tls_identity"), "{out}");
}

fn alice_sig(alice: &Signer) -> Vec<accord_proto::pb::record::v1::Signature> {
    vec![signing::sign(
        alice,
        RECORD_PAYLOAD_TYPE,
        &[0xff, 0xff, 0x01],
    )]
}

/// Peers managed at run time: a key rotated with an overlap stays valid until the overlap ends;
/// a disabled peer is refused (`peer_disabled`); a removed one is no peer at all: with no peer
/// left the listener no longer asks for client certificates, so its call is refused at the gate
/// (UNAUTHENTICATED `wrong_tls_identity`). `unknown_peer` — an envelope naming an organisation
/// that is no peer — is asserted in
/// `forged_unknown_wrong_identity_and_unauthorized_are_refused_or_rejected` above. The receiver
/// runs on a driven clock: the overlap ends when the test moves the clock past it, not after a
/// wait.
#[tokio::test(flavor = "multi_thread")]
async fn rotated_disabled_and_removed_peers() {
    let (clock, manual) = accord_node::clock::Clock::manual(wall_now_ms());
    let (b, a) = receiver_on_clock_with_sender(clock).await;
    let mut adm = b.admin().await.unwrap();
    let mut as_a = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");
    let rec = |n: &str| {
        signing::sign_record(&alice, &request("acme", "alice", n, party("globex", "bob")))
    };

    // Rotate acme's node key: the new key is added, the old ones stay valid for the overlap.
    let new_key = Signer::generate(&a.origin(), &mut rand::rngs::OsRng).unwrap();
    // The receiver's clock; the overlap lasts an hour of it.
    let now = accord_node::clock::TimeSource::now_ms(&*manual);
    const OVERLAP: i64 = 3_600_000;
    let rotate = admin::RotatePeerKeyRequest {
        name: "acme".into(),
        new_vkey: new_key.verifier().to_vkey(),
        old_valid_until_unix_ms: now + OVERLAP,
    };
    adm.rotate_peer_key(b.admin_request(rotate)).await.unwrap();
    let old_env = as_a.envelope("globex", vec![rec("k-1")], 1);
    assert_eq!(
        outcome(&as_a.deliver(old_env).await.unwrap()[1]),
        "admitted",
        "old key valid during the overlap"
    );
    let new_env = as_a.envelope_by(&new_key, "acme", "globex", vec![rec("k-2")], 2);
    assert_eq!(
        outcome(&as_a.deliver(new_env).await.unwrap()[1]),
        "admitted",
        "new key valid at once"
    );
    let peers = adm
        .list_peers(b.admin_request(admin::ListPeersRequest {}))
        .await
        .unwrap()
        .into_inner()
        .peers;
    let keys = &peers[0].keys;
    assert!(
        keys.iter()
            .any(|k| k.vkey == new_key.verifier().to_vkey() && k.valid_until_unix_ms == 0)
    );
    assert!(
        keys.iter()
            .filter(|k| k.vkey != new_key.verifier().to_vkey())
            .all(|k| k.valid_until_unix_ms == now + OVERLAP)
    );
    // Still valid at the overlap's last millisecond; after it the old key is no longer acme's.
    manual.set(now + OVERLAP - 1);
    let env = as_a.envelope("globex", vec![rec("k-3a")], 3);
    assert_eq!(
        outcome(&as_a.deliver(env).await.unwrap()[1]),
        "admitted",
        "old key valid until the overlap ends"
    );
    manual.set(now + OVERLAP);
    let e = as_a
        .deliver(as_a.envelope("globex", vec![rec("k-3")], 4))
        .await
        .expect_err("the old key expires after the overlap");
    assert_eq!(reason(&e), "unknown_key");

    // Disabled: refused.
    adm.set_peer_enabled(b.admin_request(admin::SetPeerEnabledRequest {
        name: "acme".into(),
        enabled: false,
    }))
    .await
    .unwrap();
    let e = as_a
        .deliver(as_a.envelope_by(&new_key, "acme", "globex", vec![rec("k-4")], 4))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "peer_disabled");
    // Removed: unknown.
    adm.remove_peer(b.admin_request(admin::RemovePeerRequest {
        name: "acme".into(),
    }))
    .await
    .unwrap();
    let fresh = async {
        let mut p = AsPeer::new(&a, &b).await;
        p.deliver(p.envelope_by(&new_key, "acme", "globex", vec![rec("k-5")], 5))
            .await
    };
    // With no peer left, the listener no longer asks for a client certificate: the removed
    // peer's call reaches the gate without one and is refused there, before its body is read.
    let e = fresh.await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (tonic::Code::Unauthenticated, "wrong_tls_identity"),
        "{e}"
    );
    let e = adm
        .get_peer_health(b.admin_request(admin::GetPeerHealthRequest {
            name: "acme".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
}

/// Envelope-level `malformed` (a payload type that is not an envelope's, a payload that does
/// not decode) refuses the whole envelope and is kept among the refusals; a pipelined envelope
/// whose predecessor is never decided is answered UNAVAILABLE (`accord-reason: unavailable`,
/// the message naming `out_of_order`) once the receiver's order wait (5 s) is over, and nothing
/// of it is written.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_envelopes_are_refused_and_an_unordered_one_is_unavailable() {
    let (b, a) = receiver_with_sender().await;
    let mut as_a = AsPeer::new(&a, &b).await;
    let good = signing::sign_record(
        &signer(&a, "alice"),
        &request("acme", "alice", "m-1", party("globex", "bob")),
    );
    let ledger_before = ledger(&b).await.len();

    let mut wrong_type = as_a.envelope("globex", vec![good.clone()], 1);
    wrong_type.payload_type = RECORD_PAYLOAD_TYPE.into();
    let mut garbage = as_a.envelope("globex", vec![good.clone()], 2);
    garbage.payload = vec![0xff; 16].into();
    for (what, env) in [("payload type", wrong_type), ("payload", garbage)] {
        let e = as_a.deliver(env).await.unwrap_err();
        assert_eq!(
            (e.code(), reason(&e).as_str()),
            (tonic::Code::PermissionDenied, "malformed"),
            "{what}: {e:?}"
        );
    }
    let refusals = refusals(&b).await;
    let malformed = refusals.iter().filter(|r| r.code == "malformed").count();
    assert_eq!(malformed, 2, "{refusals:?}");

    // After an envelope that never came: refused after the wait, nothing written.
    let log_proof = FixtureLog::prove(&as_a.key, &as_a.key, std::slice::from_ref(&good));
    let env = accord_proto::pb::federation::v1::Envelope {
        sender: "acme".into(),
        receiver: "globex".into(),
        first_sequence: 7,
        sent_at_unix_ms: 3,
        records: vec![good.clone()],
        log_proof: Some(log_proof),
        previous_first_sequence: Some(6),
        applied_at_unix_ms: Vec::new(),
        checkpointed_declarations: false,
    };
    let started = std::time::Instant::now();
    let e = as_a
        .deliver(sign_envelope(&as_a.key, &env))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (tonic::Code::Unavailable, "unavailable"),
        "{e:?}"
    );
    assert!(
        e.message().starts_with("unavailable: out_of_order:"),
        "{e:?}"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(5),
        "answered after {:?}, before the order wait",
        started.elapsed()
    );
    assert_eq!(ledger(&b).await.len(), ledger_before, "nothing written");
}
