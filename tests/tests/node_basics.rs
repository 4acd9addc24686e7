//! Issue 2 end to end: a real node process over TLS — health, reflection, submit / declare /
//! get / list, bad input, kill -9 durability and graceful shutdown.

use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE};
use accord_tests::TestNode;

fn request(org: &str, party: &str, commitment: &str, n: u8) -> Record {
    Record {
        author: Some(PartyRef {
            organisation: org.into(),
            name: party.into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        nonce: vec![n].into(),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: org.into(),
                name: "bob".into(),
            }),
            terms: Some(rec::Terms {
                title: format!("job {n}"),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_reflection_over_tls() {
    let node = TestNode::builder("acme").start().await.unwrap();
    let ch = node.channel().await.unwrap();
    // Health answered SERVING in start(); check a named service too.
    let mut h = tonic_health::pb::health_client::HealthClient::new(ch.clone());
    let r = h
        .check(tonic_health::pb::HealthCheckRequest {
            service: "accord.work.v1.WorkService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );

    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };
    let mut rc = ServerReflectionClient::new(ch);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = rc
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("unexpected reflection answer")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "accord.work.v1.WorkService",
        "accord.log.v1.LogService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_get_list_declare_and_bad_input() {
    let node = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let mut c = node.work().await.unwrap();

    let signed = signing::sign_record(&alice, &request("acme", "alice", "c-1", 1));
    let r = c
        .submit(work::SubmitRequest {
            record: Some(signed.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.durability(), work::Durability::Recorded);
    assert!(!r.duplicate);
    assert_eq!(
        r.record_id.as_ref(),
        signing::record_id(&signed.payload_type, &signed.payload)
    );

    // The same record again: idempotent, the original sequence comes back.
    let again = c
        .submit(work::SubmitRequest {
            record: Some(signed.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(again.duplicate);
    assert_eq!(again.sequence, r.sequence);

    // Declared through the node on behalf of the token's party.
    let req = accord_tests::with_token(
        work::DeclareRequest {
            record: Some(request("acme", "alice", "c-2", 2)),
        },
        &node.party_token("alice"),
    );
    let d = c.declare(req).await.unwrap().into_inner();
    assert_eq!(d.sequence, r.sequence + 1);

    // Seed 000: "Every operation is a typed Declaration
    // (https://suiss.app/ns/work/declaration/<wire name>)". The declared request is signed under
    // its type, and its id is SHA-256 of DSSE's PAE over that type, computed here by hand.
    let declared = c
        .get_record(work::GetRecordRequest {
            record_id: d.record_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .entry
        .unwrap()
        .record
        .unwrap();
    let typ = "https://suiss.app/ns/work/declaration/request";
    assert_eq!(declared.payload_type, typ);
    let mut pae = format!("DSSEv1 {} {typ} {} ", typ.len(), declared.payload.len()).into_bytes();
    pae.extend_from_slice(&declared.payload);
    assert_eq!(
        d.record_id.as_ref(),
        <sha2::Sha256 as sha2::Digest>::digest(&pae).as_slice()
    );
    assert_eq!(signed.payload_type, typ, "sign_record types a request too");

    // A record signed under the generic type, as before typed Declarations: still read.
    let legacy = accord_tests::records::signed_as(
        &alice,
        RECORD_PAYLOAD_TYPE,
        &request("acme", "alice", "c-4", 4),
    );
    let l = c
        .submit(work::SubmitRequest {
            record: Some(legacy.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(l.sequence, d.sequence + 1);
    assert_eq!(
        l.record_id.as_ref(),
        signing::record_id(RECORD_PAYLOAD_TYPE, &legacy.payload)
    );

    // Declare without a token: Unauthenticated.
    let e = node
        .work_as("")
        .await
        .unwrap()
        .declare(work::DeclareRequest {
            record: Some(request("acme", "alice", "c-3", 3)),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);

    let got = c
        .get_record(work::GetRecordRequest {
            record_id: r.record_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.entry.unwrap().record.unwrap(), signed);

    // Bad input: each names its field, and nothing is written.
    let mut flipped = signed.clone();
    let mut p = flipped.payload.to_vec();
    p[3] ^= 1;
    flipped.payload = p.into();
    let mut wrong_type = signed.clone();
    wrong_type.payload_type = "text/plain".into();
    let mut unsigned = signed.clone();
    unsigned.signatures.clear();
    // Signed, but not a Record: the signature verifies first, then decoding fails.
    let garbage = rec::SignedRecord {
        payload: vec![0xff, 0xff].into(),
        payload_type: RECORD_PAYLOAD_TYPE.into(),
        signatures: vec![signing::sign(&alice, RECORD_PAYLOAD_TYPE, &[0xff, 0xff])],
    };
    let foreign = signing::sign_record(&alice, &request("other-org", "alice", "c-9", 9));
    // Typed as another operation's Declaration, or as a Declaration the seed's list lacks.
    let mistyped = accord_tests::records::signed_as(
        &alice,
        "https://suiss.app/ns/work/declaration/promise",
        &request("acme", "alice", "c-7", 7),
    );
    let not_a_declaration = accord_tests::records::signed_as(
        &alice,
        "https://suiss.app/ns/work/declaration/observation",
        &request("acme", "alice", "c-6", 6),
    );
    let stranger = Signer::generate("acme/alice", &mut rand::rngs::OsRng).unwrap();
    let forged = signing::sign_record(&stranger, &request("acme", "alice", "c-8", 8));
    for (bad, field) in [
        (flipped, "bad_signature"),
        (wrong_type, "record.payload_type"),
        (unsigned, "record.signatures"),
        (garbage, "record.payload"),
        (foreign, "record.payload.author.organisation"),
        (mistyped, "record.payload_type"),
        (not_a_declaration, "record.payload_type"),
        (forged, "bad_signature"),
    ] {
        let e = c
            .submit(work::SubmitRequest { record: Some(bad) })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{field}: {e:?}");
        assert!(
            accord_tests::field(&e) == field || accord_tests::reason(&e) == field,
            "{field}: {e:?}"
        );
    }
    let e = c
        .get_record(work::GetRecordRequest {
            record_id: vec![1, 2, 3].into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);

    let mut s = c
        .list_records(work::ListRecordsRequest {
            from_sequence: 0,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut seqs = Vec::new();
    while let Some(e) = s.message().await.unwrap() {
        seqs.push(e.sequence);
    }
    assert_eq!(
        seqs,
        vec![0, 1, 2],
        "only the three good records were written"
    );
}

/// The reasons a caller gets for a call the node's state or the caller's identity refuses:
/// proofs before the node signed any checkpoint are FAILED_PRECONDITION
/// (`failed_precondition`), and a party declaring a record authored by another party is
/// PERMISSION_DENIED (`permission_denied`); neither writes anything.
#[tokio::test(flavor = "multi_thread")]
async fn reasons_for_no_checkpoint_yet_and_another_partys_record() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();
    let mut log = node.log_as(&node.admin_token()).await.unwrap();
    let e = log
        .get_consistency_proof(accord_proto::pb::log::v1::GetConsistencyProofRequest {
            size1: 0,
            size2: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), accord_tests::reason(&e).as_str()),
        (tonic::Code::FailedPrecondition, "failed_precondition"),
        "{e:?}"
    );
    assert_eq!(e.message(), "failed precondition: no checkpoint yet");

    let mut c = node.work().await.unwrap();
    let e = c
        .declare(accord_tests::with_token(
            work::DeclareRequest {
                record: Some(request("acme", "bob", "c-1", 1)),
            },
            &node.party_token("alice"),
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), accord_tests::reason(&e).as_str()),
        (tonic::Code::PermissionDenied, "permission_denied"),
        "{e:?}"
    );
    assert!(e.message().contains("acme/bob"), "{e:?}");
    let s = node.status().await.unwrap();
    assert_eq!(s.ledger_size, 0, "nothing written");
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_records_survive_kill_9() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let mut c = node.work().await.unwrap();
    let mut acked = Vec::new();
    // Concurrent submits share group commits; every acknowledged one must survive.
    let mut tasks = Vec::new();
    for i in 0..64u8 {
        let mut c = c.clone();
        let s = signing::sign_record(&alice, &request("acme", "alice", &format!("k-{i}"), i));
        tasks.push(tokio::spawn(async move {
            c.submit(work::SubmitRequest { record: Some(s) }).await
        }));
    }
    for t in tasks {
        let a = t.await.unwrap().unwrap().into_inner();
        // Acknowledged means recorded (synced) and decided by the kernel: applied.
        assert!(
            matches!(
                a.durability(),
                work::Durability::Recorded
                    | work::Durability::Included
                    | work::Durability::Witnessed
            ),
            "{a:?}"
        );
        assert!(a.outcome.as_ref().is_some_and(|o| o.applied), "{a:?}");
        acked.push(a);
    }
    node.kill9();
    // A new port: nothing needs the old address, and re-binding it could race another test.
    node.respawn_on_new_port().await.unwrap();
    c = node.work().await.unwrap();
    for (i, a) in acked.iter().enumerate() {
        let e = c
            .get_record(work::GetRecordRequest {
                record_id: a.record_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .entry
            .unwrap();
        assert_eq!(e.sequence, a.sequence);
        assert!(e.outcome.unwrap().applied);
        // The replayed kernel derived the commitment the record opened.
        let cm = c
            .get_commitment(work::GetCommitmentRequest {
                commitment_id: format!("k-{i}"),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(cm.state, "requested", "k-{i}");
    }
    // And the ledger continues after the recovered end.
    let s = signing::sign_record(&alice, &request("acme", "alice", "after", 200));
    let r = c
        .submit(work::SubmitRequest { record: Some(s) })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.sequence, 64);
    // A graceful stop exits 0.
    assert!(node.terminate().unwrap());
}
