//! Issue 8, deliverable 2: peers bound to their parties and their log. With the peer's node key
//! and TLS identity an attacker crafts envelopes directly against the receiver's
//! FederationService; every forgery is refused or quarantined with its code and nothing is
//! applied at the receiver, while the honest path keeps admitting.

use crate::federation_common;

use accord_proto::note::Signer;
use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::federation::v1::{self as fed, Envelope};
use accord_proto::pb::log::v1::{GetCheckpointRequest, log_service_client::LogServiceClient};
use accord_proto::pb::record::v1::{self as rec, SignedRecord, record::Operation};
use accord_proto::signing;
use accord_tests::TestNode;
use federation_common::*;
use sha2::{Digest, Sha256};

fn release(c: &str, author: &str) -> rec::Record {
    record(
        "acme",
        author,
        c,
        &[],
        Operation::Release(rec::Release {
            reason: "forged".into(),
        }),
    )
}

fn envelope(records: Vec<SignedRecord>, log_proof: Option<fed::LogProof>) -> Envelope {
    Envelope {
        sender: "acme".into(),
        receiver: "globex".into(),
        first_sequence: 0,
        sent_at_unix_ms: rand::random::<u32>() as i64,
        records,
        log_proof,
        previous_first_sequence: None,
        applied_at_unix_ms: Vec::new(),
        checkpointed_declarations: false,
    }
}

async fn state(node: &TestNode, c: &str) -> String {
    work(node)
        .await
        .get_commitment(accord_proto::pb::work::v1::GetCommitmentRequest {
            commitment_id: c.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .state
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_records_and_envelopes_are_refused_or_quarantined() {
    let c = "forge-1";
    let (a, b) = promised_between(&["alice", "carol"], c).await;
    let mut peer = AsPeer::new(&a, &b).await;
    let node_key = node_signer(&a);
    let alice = signer(&a, "alice");
    let carol = signer(&a, "carol");
    let ledger_before = ledger(&b).await.len();

    // The forged release, node-signed as a declaration of acme's, sent without any log proof:
    // quarantined `unproven`, no effect.
    let forged = signing::sign_record(&node_key, &release(c, "alice"));
    let got = peer
        .deliver(sign_envelope(
            &node_key,
            &envelope(vec![forged.clone()], None),
        ))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), r#"["quarantined", "unproven"]"#);
    assert_eq!(state(&b, c).await, "promised");
    // Shown to the operator.
    let q = b
        .admin()
        .await
        .unwrap()
        .list_quarantine(b.admin_request(admin::ListQuarantineRequest {}))
        .await
        .unwrap()
        .into_inner()
        .records;
    assert!(
        q.iter()
            .any(|r| r.record_id.as_ref() == id_of(&forged) && r.code == "unproven"),
        "{q:?}"
    );

    // Records whose signatures do not bind to their author: rejected at the door.
    let by_carol = signing::sign_record(&carol, &release(c, "alice"));
    let mallory_by_alice = signing::sign_record(&alice, &release(c, "mallory"));
    // acme/mallory is no party of acme: with no key of its own it could only be node-signed,
    // and then it still needs to be in acme's log.
    let mallory_by_node = signing::sign_record(&node_key, &release(c, "mallory"));
    let got = peer
        .deliver(sign_envelope(
            &node_key,
            &envelope(
                vec![by_carol, mallory_by_alice, mallory_by_node.clone()],
                None,
            ),
        ))
        .await
        .unwrap();
    let outcomes: Vec<String> = got[1..].iter().map(outcome).collect();
    assert_eq!(
        outcomes,
        [
            r#"["rejected", "key_not_for_author"]"#,
            r#"["rejected", "key_not_for_author"]"#,
            r#"["quarantined", "unproven"]"#,
        ]
    );
    assert_eq!(state(&b, c).await, "promised");

    // An envelope signed by a party key: refused.
    let e = peer
        .deliver(sign_envelope(
            &alice,
            &envelope(
                vec![signing::sign_record(&alice, &release(c, "alice"))],
                None,
            ),
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (tonic::Code::PermissionDenied, "not_node_key"),
        "{e}"
    );

    // A proof against acme's real checkpoint that does not include the record: refused.
    let latest = LogServiceClient::new(a.channel().await.unwrap())
        .get_checkpoint(GetCheckpointRequest {})
        .await
        .unwrap()
        .into_inner()
        .latest
        .unwrap();
    let forged2 = signing::sign_record(&node_key, &release(c, "alice"));
    let lying = fed::LogProof {
        checkpoint: latest.note.clone(),
        inclusions: vec![fed::RecordInclusion {
            leaf_index: latest.size - 1,
            inclusion_proof: (0..64 - (latest.size - 1).leading_zeros())
                .map(|_| vec![7u8; 32].into())
                .collect(),
        }],
        consistency_from_size: 0,
        consistency_proof: vec![],
    };
    let e = peer
        .deliver(sign_envelope(
            &node_key,
            &envelope(vec![forged2.clone()], Some(lying)),
        ))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "bad_log_proof", "{e}");

    // A checkpoint signed by a key acme does not hold under its log's name, and one signed by a
    // party key (its name is no log origin of acme's): refused.
    let stranger = Signer::generate(&a.origin(), &mut rand::rngs::OsRng).unwrap();
    for key in [&stranger, &alice] {
        let proof = FixtureLog::prove(key, key, std::slice::from_ref(&forged2));
        let e = peer
            .deliver(sign_envelope(
                &node_key,
                &envelope(vec![forged2.clone()], Some(proof)),
            ))
            .await
            .unwrap_err();
        assert_eq!(reason(&e), "bad_log_proof", "{e}");
    }

    // A log of the attacker's own, signed with acme's node key (a fork of acme's log, longer
    // than acme's): globex holds acme's real checkpoint, so the fork is refused — whether it is
    // older than that checkpoint or claims to extend it.
    let older = FixtureLog::prove(&node_key, &node_key, std::slice::from_ref(&forged2));
    let e = peer
        .deliver(sign_envelope(
            &node_key,
            &envelope(vec![forged2.clone()], Some(older)),
        ))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "log_inconsistent", "{e}");
    let mut padded: Vec<SignedRecord> = (0..latest.size + 3)
        .map(|i| signing::sign_record(&node_key, &release(&format!("pad-{i}"), "alice")))
        .collect();
    padded.push(forged2.clone());
    let mut fork = FixtureLog::prove(&node_key, &node_key, &padded);
    fork.inclusions = fork.inclusions.split_off(padded.len() - 1);
    assert!(checkpoint_size(&fork.checkpoint).unwrap() > latest.size);
    let e = peer
        .deliver(sign_envelope(
            &node_key,
            &envelope(vec![forged2.clone()], Some(fork)),
        ))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "log_inconsistent", "{e}");

    // Nothing applied: globex still shows promised, like acme; refusals wrote no ledger record,
    // each door decision exactly one declaration.
    assert_eq!(state(&b, c).await, "promised");
    assert_eq!(state(&a, c).await, "promised");
    let entries = ledger(&b).await;
    assert_eq!(
        entries.len(),
        ledger_before + 4,
        "four decisions, four declarations"
    );
    for e in &entries[ledger_before..] {
        let r = decode(e);
        assert!(
            matches!(r.operation, Some(Operation::Admission(_))),
            "{r:?}"
        );
    }

    // The honest path still admits, with proofs consistent with the checkpoint globex holds.
    declare(
        &a,
        "alice",
        request("acme", "alice", "forge-2", party("globex", "bob")),
    )
    .await;
    wait_state(&b, "forge-2", "requested").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rejected_records_are_bounded_per_peer_and_name_no_sender_data() {
    let (b, a) = receiver_with_sender().await;
    let mut peer = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");
    let long_id = "x".repeat(60);
    // Malformed at the door (an author of another organisation) with a sender-chosen id.
    let bad = |n: usize| -> SignedRecord {
        signing::sign_record(
            &alice,
            &request(
                "initech",
                "eve",
                &format!("{long_id}{n}"),
                party("globex", "bob"),
            ),
        )
    };
    // More door rejections than a peer may cause at once: RESOURCE_EXHAUSTED, nothing written.
    let e = peer
        .deliver(peer.envelope("globex", (0..257).map(&bad).collect(), 1))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (tonic::Code::ResourceExhausted, "resource_exhausted"),
        "{e:?}"
    );
    assert!(
        e.message()
            .contains("too_many_rejections: 257 records of this envelope would be rejected"),
        "{e}"
    );
    assert!(ledger(&b).await.is_empty());

    // Within the budget: rejected and declared — under `federation:acme`, not the sender's id.
    let got = peer
        .deliver(peer.envelope("globex", vec![bad(1)], 2))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), r#"["rejected", "unauthorized_author"]"#);
    let entries = ledger(&b).await;
    assert_eq!(entries.len(), 1);
    assert_eq!(decode(&entries[0]).commitment_id, "federation:acme");

    // The budget is spent by what was admitted as rejections: the rest of the burst passes,
    // the next envelope over it does not.
    let got = peer
        .deliver(peer.envelope("globex", (2..256).map(&bad).collect(), 3))
        .await
        .unwrap();
    assert_eq!(got.len(), 255);
    let e = peer
        .deliver(peer.envelope("globex", (300..500).map(&bad).collect(), 4))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    assert_eq!(ledger(&b).await.len(), 255);
    // An honest record is not a door rejection: still admitted.
    let good = signing::sign_record(
        &alice,
        &request("acme", "alice", "bounded-ok", party("globex", "bob")),
    );
    let got = peer
        .deliver(peer.envelope("globex", vec![good], 5))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), "admitted");
}

/// Hex SHA-256 of a node's DER leaf certificate (what `pin_sha256` holds).
fn leaf_sha256(node: &TestNode) -> String {
    let certs = accord_daemon::pem::load_certs(&node.dir.join("tls/node.pem")).unwrap();
    hex::encode(Sha256::digest(certs[0].as_ref()))
}

#[tokio::test(flavor = "multi_thread")]
async fn pinned_peer_and_no_ca_key_after_init() {
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
    // init keeps no CA key next to the node's keys.
    for n in [&a, &b] {
        assert!(!n.dir.join("tls/ca.key").exists(), "{}", n.name);
        assert!(n.dir.join("tls/ca.pem").exists());
    }
    // globex pins acme to a leaf acme does not present (any other certificate of acme's CA is
    // the same case): acme's own certificate, from that CA, is refused.
    let mut p = a.as_peer();
    p.pin_sha256 = hex::encode(Sha256::digest(b"another leaf"));
    let mut adm = b.admin().await.unwrap();
    adm.add_peer(b.admin_request(admin::AddPeerRequest { peer: Some(p) }))
        .await
        .unwrap();
    let alice = signer(&a, "alice");
    let r = signing::sign_record(
        &alice,
        &request("acme", "alice", "pin-1", party("globex", "bob")),
    );
    let mut peer = AsPeer::new(&a, &b).await;
    let e = peer
        .deliver(peer.envelope("globex", vec![r.clone()], 1))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "wrong_tls_identity", "{e}");
    assert!(ledger(&b).await.is_empty());

    // A malformed pin is refused naming the field.
    adm.remove_peer(b.admin_request(admin::RemovePeerRequest {
        name: "acme".into(),
    }))
    .await
    .unwrap();
    let mut p = a.as_peer();
    p.pin_sha256 = "not-hex".into();
    let e = adm
        .add_peer(b.admin_request(admin::AddPeerRequest { peer: Some(p) }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        e.metadata().get("accord-field").unwrap().to_str().unwrap(),
        "peer.pin_sha256"
    );

    // Pinned to acme's real leaf (with accordctl's flag): admitted.
    let pem = a.dir.join("tls/ca.pem").display().to_string();
    let mut args = admin_args(&b);
    args.extend(
        [
            "peer",
            "add",
            "--name",
            "acme",
            "--endpoint",
            &format!("https://{}", a.addr),
            "--tls-pem",
            &pem,
            "--pin-sha256",
            &leaf_sha256(&a),
        ]
        .map(String::from),
    );
    for v in a.org_vkeys() {
        args.push("--vkey".into());
        args.push(v);
    }
    let (code, out, err) = accordctl(&args);
    assert_eq!(code, 0, "{out}{err}");
    let mut peer = AsPeer::new(&a, &b).await;
    let got = peer
        .deliver(peer.envelope("globex", vec![r], 2))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), "admitted");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_peer_must_present_its_pinned_server_certificate() {
    let b = TestNode::builder("globex")
        .party("bob")
        .config(fast)
        .start()
        .await
        .unwrap();
    let a = TestNode::builder("acme")
        .party("alice")
        .config(fast)
        .start()
        .await
        .unwrap();
    b.add_peer(&a).await.unwrap();
    // acme pins globex to a leaf globex does not present: acme's sender cannot connect.
    let mut adm = a.admin().await.unwrap();
    let mut p = b.as_peer();
    p.pin_sha256 = hex::encode(Sha256::digest(b"not globex's leaf"));
    adm.add_peer(a.admin_request(admin::AddPeerRequest { peer: Some(p) }))
        .await
        .unwrap();
    let c = "pin-out-1";
    declare(
        &a,
        "alice",
        request("acme", "alice", c, party("globex", "bob")),
    )
    .await;
    let health = accord_tests::eventually(WAIT, || {
        let mut adm = adm.clone();
        let req = a.admin_request(admin::GetPeerHealthRequest {
            name: "globex".into(),
        });
        async move {
            let h = adm.get_peer_health(req).await?.into_inner();
            Ok::<_, tonic::Status>((!h.last_error.is_empty()).then_some(h))
        }
    })
    .await
    .expect("the delivery fails");
    assert_eq!(health.last_success_unix_ms, 0, "{health:?}");
    assert_eq!(health.queue_depth, 1, "{health:?}");
    assert!(ledger(&b).await.is_empty());

    // Pinned to globex's real leaf: delivered.
    adm.remove_peer(a.admin_request(admin::RemovePeerRequest {
        name: "globex".into(),
    }))
    .await
    .unwrap();
    let mut p = b.as_peer();
    p.pin_sha256 = leaf_sha256(&b);
    adm.add_peer(a.admin_request(admin::AddPeerRequest { peer: Some(p) }))
        .await
        .unwrap();
    declare(
        &a,
        "alice",
        request("acme", "alice", "pin-out-2", party("globex", "bob")),
    )
    .await;
    wait_state(&b, "pin-out-2", "requested").await;
}
