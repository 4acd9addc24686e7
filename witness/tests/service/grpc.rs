//! The gRPC services: add-checkpoint's failure classes and status codes (as fixed in the header of
//! witness.proto), GetLatest, the admin service and its token, health and reflection.

use accord_proto::pb::witness::v1 as pb;
use accord_witness::{AddCheckpoint, Clock as _};
use pb::witness_admin_service_client::WitnessAdminServiceClient;
use pb::witness_service_client::WitnessServiceClient;
use tonic::Code;
use tonic::transport::Channel;

use crate::common::{TestLog, TestWitness, assert_cosigned};

fn to_pb(req: &AddCheckpoint) -> pb::AddCheckpointRequest {
    pb::AddCheckpointRequest {
        old_size: req.old_size,
        consistency_proof: req.proof.iter().map(|h| h.to_vec().into()).collect(),
        checkpoint: req.checkpoint.clone(),
    }
}

async fn add(
    c: &mut WitnessServiceClient<Channel>,
    req: &AddCheckpoint,
) -> Result<String, tonic::Status> {
    c.add_checkpoint(to_pb(req))
        .await
        .map(|r| r.into_inner().cosignatures)
}

fn code(r: Result<String, tonic::Status>) -> Code {
    r.err().map_or(Code::Ok, |s| s.code())
}

#[tokio::test]
async fn every_failure_class_has_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/log");
    let mut fresh = TestLog::new("example.com/fresh");
    let w = TestWitness::start(dir.path(), &[&log, &fresh]).await;
    let mut c = WitnessServiceClient::new(w.channel().await);

    let mut stranger = TestLog::new("example.com/stranger");
    stranger.grow_to(2);
    assert_eq!(
        code(add(&mut c, &stranger.request(0)).await),
        Code::NotFound
    );

    log.grow_to(6);
    let mut impostor = TestLog::new("example.com/log");
    impostor.grow_to(6);
    assert_eq!(
        code(add(&mut c, &impostor.request(0)).await),
        Code::PermissionDenied
    );

    let mut req = log.request(0);
    req.old_size = 7;
    assert_eq!(code(add(&mut c, &req).await), Code::InvalidArgument);
    let mut bad_hash = to_pb(&log.request(0));
    bad_hash.consistency_proof = vec![vec![0u8; 31].into()];
    let s = c.add_checkpoint(bad_hash).await.unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument);
    let mut not_a_note = to_pb(&log.request(0));
    not_a_note.checkpoint = "no signatures\n".into();
    assert_eq!(
        c.add_checkpoint(not_a_note).await.unwrap_err().code(),
        Code::InvalidArgument
    );

    // Messages beyond max_body_bytes (64 KiB) are refused by the transport.
    let mut huge = to_pb(&log.request(0));
    huge.checkpoint = "x".repeat(70 * 1024);
    assert_eq!(
        c.add_checkpoint(huge).await.unwrap_err().code(),
        Code::OutOfRange
    );

    // ABORTED with the held size in the trailing metadata "tlog-size".
    let s = add(&mut c, &log.request(4)).await.unwrap_err();
    assert_eq!(s.code(), Code::Aborted);
    assert_eq!(
        s.metadata().get("tlog-size").unwrap().to_str().unwrap(),
        "0"
    );
    add(&mut c, &log.request(0)).await.unwrap();
    log.grow_to(10);
    let s = add(&mut c, &log.request(0)).await.unwrap_err();
    assert_eq!(s.code(), Code::Aborted);
    assert_eq!(
        s.metadata().get("tlog-size").unwrap().to_str().unwrap(),
        "6"
    );

    let mut req = log.request(6);
    req.proof[0][5] ^= 0x80;
    assert_eq!(code(add(&mut c, &req).await), Code::FailedPrecondition);
    let mut fork = TestLog::with_signer(log.signer.clone(), "other");
    fork.grow_to(6);
    assert_eq!(
        code(add(&mut c, &fork.request(6)).await),
        Code::FailedPrecondition
    );
    fresh.grow_to(3);
    let mut req = fresh.request(0);
    req.proof = vec![[1; 32]];
    assert_eq!(code(add(&mut c, &req).await), Code::FailedPrecondition);

    // The good path, and GetLatest.
    w.clock.advance(1);
    let lines = add(&mut c, &log.request(6)).await.unwrap();
    assert_cosigned(&w.verifier, &log, &lines, w.clock.now());
    let latest = c
        .get_latest(pb::GetLatestRequest {
            origin: log.origin().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(latest.size, 10);
    assert_eq!(latest.checkpoint, log.checkpoint().to_body().unwrap());
    let none = c
        .get_latest(pb::GetLatestRequest {
            origin: fresh.origin().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((none.size, none.checkpoint.as_str()), (0, ""));
    let unknown = c
        .get_latest(pb::GetLatestRequest {
            origin: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    w.stop().await;
}

fn authed<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

#[tokio::test]
async fn admin_adds_lists_and_removes_logs() {
    let dir = tempfile::tempdir().unwrap();
    let seeded = TestLog::new("example.com/seeded");
    let w = TestWitness::start(dir.path(), &[&seeded]).await;
    let ch = w.channel().await;
    let mut admin = WitnessAdminServiceClient::new(ch.clone());
    let mut c = WitnessServiceClient::new(ch);
    let token = w.admin_token.clone();

    // Token checks.
    let s = admin.list_logs(pb::ListLogsRequest {}).await.unwrap_err();
    assert_eq!(s.code(), Code::Unauthenticated);
    let s = admin
        .list_logs(authed("wrong", pb::ListLogsRequest {}))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unauthenticated);

    let mut log = TestLog::new("example.com/added");
    log.grow_to(4);
    assert_eq!(code(add(&mut c, &log.request(0)).await), Code::NotFound);
    let bad = pb::Log {
        origin: log.origin().into(),
        vkeys: vec!["garbage".into()],
    };
    let s = admin
        .add_log(authed(&token, pb::AddLogRequest { log: Some(bad) }))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::InvalidArgument);
    assert!(s.message().contains("log.vkeys[0]"), "{}", s.message());
    let good = pb::Log {
        origin: log.origin().into(),
        vkeys: vec![log.vkey()],
    };
    admin
        .add_log(authed(
            &token,
            pb::AddLogRequest {
                log: Some(good.clone()),
            },
        ))
        .await
        .unwrap();
    add(&mut c, &log.request(0)).await.unwrap();

    let listed = admin
        .list_logs(authed(&token, pb::ListLogsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .logs;
    let summary: Vec<(String, Vec<String>, u64)> = listed
        .into_iter()
        .map(|s| {
            let l = s.log.unwrap();
            (l.origin, l.vkeys, s.size)
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (log.origin().to_owned(), vec![log.vkey()], 4),
            (seeded.origin().to_owned(), vec![seeded.vkey()], 0),
        ]
    );

    // Removal: unknown for add-checkpoint, but its state stays.
    admin
        .remove_log(authed(
            &token,
            pb::RemoveLogRequest {
                origin: log.origin().into(),
            },
        ))
        .await
        .unwrap();
    log.grow_to(6);
    assert_eq!(code(add(&mut c, &log.request(4)).await), Code::NotFound);
    let s = admin
        .remove_log(authed(
            &token,
            pb::RemoveLogRequest {
                origin: log.origin().into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::NotFound);
    let latest = c
        .get_latest(pb::GetLatestRequest {
            origin: log.origin().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(latest.size, 4);

    // Re-adding cannot roll it back: a fresh start from 0 is refused with the held size.
    admin
        .add_log(authed(&token, pb::AddLogRequest { log: Some(good) }))
        .await
        .unwrap();
    let mut rewrite = TestLog::with_signer(log.signer.clone(), "rewritten");
    rewrite.grow_to(2);
    let s = add(&mut c, &rewrite.request(0)).await.unwrap_err();
    assert_eq!(s.code(), Code::Aborted);
    assert_eq!(
        s.metadata().get("tlog-size").unwrap().to_str().unwrap(),
        "4"
    );
    add(&mut c, &log.request(4)).await.unwrap();
    w.stop().await;
}

#[tokio::test]
async fn health_and_reflection_answer() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let dir = tempfile::tempdir().unwrap();
    let w = TestWitness::start(dir.path(), &[]).await;
    let ch = w.channel().await;

    let mut health = HealthClient::new(ch.clone());
    for service in [
        "",
        "accord.witness.v1.WitnessService",
        "accord.witness.v1.WitnessAdminService",
    ] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "{service:?}");
    }

    let mut reflection = ServerReflectionClient::new(ch);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = reflection
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("unexpected reflection response {resp:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "accord.witness.v1.WitnessService",
        "accord.witness.v1.WitnessAdminService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not in {names:?}"
        );
    }
    w.stop().await;
}
