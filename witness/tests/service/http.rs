//! c2sp.org/tlog-witness over HTTP: a good chain, and every failure class with its status code.

use accord_proto::Checkpoint;
use accord_proto::merkle::EMPTY_ROOT;
use accord_witness::{AddCheckpoint, Clock as _};

use accord_witness::init::KeyAlg;

use crate::common::{TestLog, TestWitness, assert_cosigned_all, parse_response};

const ED: &[KeyAlg] = &[KeyAlg::Ed25519];
const PQ: &[KeyAlg] = &[KeyAlg::MlDsa44];
const BOTH: &[KeyAlg] = &[KeyAlg::Ed25519, KeyAlg::MlDsa44];

#[tokio::test]
async fn a_good_chain_is_cosigned_with_fresh_timestamps() {
    good_chain(ED).await;
}

#[tokio::test]
async fn a_good_chain_is_cosigned_with_ml_dsa_44() {
    good_chain(PQ).await;
}

#[tokio::test]
async fn a_good_chain_is_cosigned_with_both_key_types() {
    good_chain(BOTH).await;
}

async fn good_chain(algs: &[KeyAlg]) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/good");
    let w = TestWitness::start_algs(dir.path(), &[&log], &[], algs).await;

    let mut held = 0;
    for size in [1u64, 2, 5, 8, 13, 64, 100] {
        log.grow_to(size);
        w.clock.advance(7);
        let r = w.post(&log.request(held).to_http_body()).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_cosigned_all(&w.verifiers, &log, &r.body, w.clock.now());
        held = size;
    }
    // The same size and root again: co-signed again, with a fresh timestamp.
    w.clock.advance(60);
    let r = w.post(&log.request(held).to_http_body()).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_cosigned_all(&w.verifiers, &log, &r.body, w.clock.now());
    w.stop().await;
}

#[tokio::test]
async fn every_failure_class_has_its_status() {
    failure_classes(ED).await;
}

#[tokio::test]
async fn every_failure_class_has_its_status_with_both_key_types() {
    failure_classes(BOTH).await;
}

async fn failure_classes(algs: &[KeyAlg]) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/log");
    let mut fresh = TestLog::new("example.com/fresh");
    let mut empty = TestLog::new("example.com/empty");
    let w = TestWitness::start_algs(dir.path(), &[&log, &fresh, &empty], &[], algs).await;

    // 404: unknown origin.
    let mut stranger = TestLog::new("example.com/stranger");
    stranger.grow_to(3);
    let r = w.post(&stranger.request(0).to_http_body()).await;
    assert_eq!(r.status, 404, "{r:?}");

    // 403: signed only by an unknown key with the log's name.
    log.grow_to(5);
    let mut impostor = TestLog::new("example.com/log");
    impostor.grow_to(5);
    let r = w.post(&impostor.request(0).to_http_body()).await;
    assert_eq!(r.status, 403, "{r:?}");
    // 403: the trusted key's signature does not verify (another body under its signature line).
    let genuine = log.signed();
    let (_, sig_lines) = genuine.split_once("\n\n").unwrap();
    let other_body = Checkpoint::new(log.origin(), 5, [9; 32]).to_body().unwrap();
    let forged = format!("{other_body}\n{sig_lines}");
    let tampered = AddCheckpoint {
        old_size: 0,
        proof: vec![],
        checkpoint: forged,
    };
    let r = w.post(&tampered.to_http_body()).await;
    assert_eq!(r.status, 403, "{r:?}");

    // 400: old size larger than the checkpoint's; malformed bodies.
    let mut req = log.request(0);
    req.old_size = 6;
    assert_eq!(w.post(&req.to_http_body()).await.status, 400);
    for bad in ["", "old 0\n", "old x\n\ncp\n", "old 0\n\nnot a note\n"] {
        let r = w.post(bad).await;
        assert_eq!(r.status, 400, "{bad:?}: {r:?}");
    }

    // 409: the old size is not the held one (held: 0); body is the held size.
    let r = w.post(&log.request(3).to_http_body()).await;
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/x.tlog.size"));
    assert_eq!(r.body, "0\n");

    // Hold size 5, then 409 with body "5\n".
    assert_eq!(w.post(&log.request(0).to_http_body()).await.status, 200);
    log.grow_to(9);
    let r = w.post(&log.request(2).to_http_body()).await;
    assert_eq!((r.status, r.body.as_str()), (409, "5\n"), "{r:?}");

    // 422: the consistency proof does not verify.
    let mut req = log.request(5);
    req.proof[0][0] ^= 1;
    assert_eq!(w.post(&req.to_http_body()).await.status, 422);
    let mut req = log.request(5);
    req.proof.pop();
    assert_eq!(w.post(&req.to_http_body()).await.status, 422);

    // 422: a fork that extends a different size-5 tree.
    let mut fork = TestLog::with_signer(log.signer.clone(), "fork");
    fork.grow_to(9);
    assert_eq!(w.post(&fork.request(5).to_http_body()).await.status, 422);

    // 422: the same size with another root.
    assert_eq!(w.post(&log.request(5).to_http_body()).await.status, 200);
    assert_eq!(w.post(&fork.request(9).to_http_body()).await.status, 422);

    // 422: a non-empty proof from size 0.
    fresh.grow_to(4);
    let mut req = fresh.request(0);
    req.proof = vec![[0; 32]];
    assert_eq!(w.post(&req.to_http_body()).await.status, 422);

    // 422: a size-0 checkpoint whose root is not SHA-256(""); 200 with the empty root.
    let bad_empty = Checkpoint::new(empty.origin(), 0, [7; 32])
        .sign(&empty.signer)
        .unwrap();
    let req = AddCheckpoint {
        old_size: 0,
        proof: vec![],
        checkpoint: bad_empty,
    };
    assert_eq!(w.post(&req.to_http_body()).await.status, 422);
    empty.grow_to(0);
    assert_eq!(empty.checkpoint().root, EMPTY_ROOT);
    assert_eq!(w.post(&empty.request(0).to_http_body()).await.status, 200);

    // After all that, the held state is the last good one.
    let r = w.post(&log.request(9).to_http_body()).await;
    assert_eq!(r.status, 200, "{r:?}");
    w.stop().await;
}

#[tokio::test]
async fn oversized_bodies_and_other_methods_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::new("example.com/log");
    let w = TestWitness::start_with(
        dir.path(),
        &[&log],
        &[("max_body_bytes = 65536", "max_body_bytes = 2048")],
    )
    .await;
    let big = format!("old 0\n\n{}", "x".repeat(4096));
    assert_eq!(w.post(&big).await.status, 413);

    let mut s = tokio::net::TcpStream::connect(w.http).await.unwrap();
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    s.write_all(b"GET /add-checkpoint HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    assert_eq!(parse_response(&raw).status, 405);
    w.stop().await;
}

#[tokio::test]
async fn the_http_listener_can_use_tls() {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/tls");
    let w = TestWitness::start_with(
        dir.path(),
        &[&log],
        &[
            (
                "# tls_cert = \"tls/cert.pem\"",
                "tls_cert = \"tls/cert.pem\"",
            ),
            ("# tls_key = \"tls/key.pem\"", "tls_key = \"tls/key.pem\""),
        ],
    )
    .await;
    let mut roots = rustls::RootCertStore::empty();
    for c in accord_witness::tls::load_certs(&dir.path().join("tls/ca.pem")).unwrap() {
        roots.add(c).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(w.http).await.unwrap();
    let mut s = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    log.grow_to(3);
    let body = log.request(0).to_http_body();
    let req = format!(
        "POST /add-checkpoint HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let r = parse_response(&raw);
    assert_eq!(r.status, 200, "{r:?}");
    assert_cosigned_all(&w.verifiers, &log, &r.body, w.clock.now());
    w.stop().await;
}
