//! The July 2026 C2SP texts: ML-DSA-44 witness keys, sign-subtree (every status over HTTP and
//! every code over gRPC), and the monitoring endpoint with its own prefix (and the cosigned
//! checkpoint in GetLatest).

use accord_proto::checkpoint::{Cosigner, open_checkpoint, verify_subtree_cosignature};
use accord_proto::merkle::{subtree_consistency_proof, subtree_hash};
use accord_proto::note::{KeyKind, Note, NoteSignature};
use accord_proto::pb::witness::v1 as pb;
use accord_witness::init::KeyAlg;
use accord_witness::{Clock as _, SignSubtree};
use pb::witness_service_client::WitnessServiceClient;
use sha2::{Digest as _, Sha256};
use tonic::Code;

use crate::common::{TestLog, TestWitness, assert_cosigned_all};

const BOTH: &[KeyAlg] = &[KeyAlg::Ed25519, KeyAlg::MlDsa44];

/// The log's checkpoint with the witness's lines appended: the reference checkpoint.
fn cosigned(log: &TestLog, lines: &str) -> String {
    format!("{}{lines}", log.signed())
}

fn request(log: &TestLog, start: u64, end: u64, checkpoint: String) -> SignSubtree {
    let n = log.tree.size();
    SignSubtree {
        start,
        end,
        hash: subtree_hash(&log.tree, start, end).unwrap(),
        proof: subtree_consistency_proof(&log.tree, start, end, n).unwrap(),
        checkpoint,
    }
}

#[tokio::test]
async fn sign_subtree_answers_every_status_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/log");
    let mut other = TestLog::new("example.com/other");
    let w = TestWitness::start_algs(dir.path(), &[&log, &other], &[], BOTH).await;
    let pq = w
        .verifiers
        .iter()
        .find(|v| v.kind() == KeyKind::MlDsa44)
        .unwrap()
        .clone();
    log.grow_to(14);
    let r = w.post(&log.request(0).to_http_body()).await;
    assert_eq!(r.status, 200, "{r:?}");
    let reference = cosigned(&log, &r.body);
    let post = |req: SignSubtree| {
        let body = req.to_http_body();
        let w = &w;
        async move { w.post_to("/sign-subtree", &body).await }
    };

    // 200: one ML-DSA-44 subtree/v1 line, timestamp 0, for each valid subtree of the tree.
    for (start, end) in [(8, 13), (4, 8), (0, 14), (13, 14), (0, 1), (8, 14)] {
        let req = request(&log, start, end, reference.clone());
        let hash = req.hash;
        let r = post(req).await;
        assert_eq!(r.status, 200, "[{start}, {end}): {r:?}");
        let lines: Vec<&str> = r.body.lines().collect();
        assert_eq!(lines.len(), 1, "{r:?}");
        let sig = NoteSignature::parse_line(lines[0]).unwrap();
        assert_eq!(
            verify_subtree_cosignature(&pq, log.origin(), start, end, &hash, &sig).unwrap(),
            0
        );
        // The line is for exactly this subtree.
        assert!(
            verify_subtree_cosignature(&pq, log.origin(), start, end + 1, &hash, &sig).is_err()
        );
    }
    // A reference checkpoint carrying only the witness's Ed25519 cosignature is enough.
    let ed_line = r.body.lines().next().unwrap();
    let only_ed = cosigned(&log, &format!("{ed_line}\n"));
    assert_eq!(post(request(&log, 8, 13, only_ed)).await.status, 200);

    // 400: malformed; not a valid subtree; end beyond the checkpoint.
    for bad in ["", "subtree 8 13\n", "subtree x 13\nAA==\n\ncp\n"] {
        assert_eq!(w.post_to("/sign-subtree", bad).await.status, 400, "{bad:?}");
    }
    let mut req = request(&log, 8, 13, reference.clone());
    req.start = 5;
    assert_eq!(post(req).await.status, 400);
    let mut big = log.clone();
    big.grow_to(16);
    let mut req = request(&big, 8, 16, reference.clone());
    req.checkpoint = reference.clone();
    assert_eq!(post(req).await.status, 400);

    // 422: the proof does not verify (a flipped bit, a missing hash, another subtree hash).
    let mut req = request(&log, 8, 13, reference.clone());
    req.proof[1][0] ^= 1;
    assert_eq!(post(req).await.status, 422);
    let mut req = request(&log, 8, 13, reference.clone());
    req.proof.pop();
    assert_eq!(post(req).await.status, 422);
    let mut req = request(&log, 8, 13, reference.clone());
    req.hash[0] ^= 1;
    assert_eq!(post(req).await.status, 422);

    // 404: an origin the witness does not know.
    let mut stranger = TestLog::new("example.com/stranger");
    stranger.grow_to(14);
    let r = post(request(&stranger, 8, 13, stranger.signed())).await;
    assert_eq!(r.status, 404, "{r:?}");

    // 403: no cosignature by this witness; a tampered one; another witness's.
    other.grow_to(14);
    assert_eq!(
        post(request(&other, 8, 13, other.signed())).await.status,
        403
    );
    let mut n = Note::parse(reference.as_bytes()).unwrap();
    let mut sigs: Vec<NoteSignature> = n.signatures().to_vec();
    let last = sigs.len() - 1;
    sigs[last].signature[50] ^= 1;
    n = Note::new(n.text()).unwrap();
    for s in sigs {
        n.add_signature(s).unwrap();
    }
    assert_eq!(post(request(&log, 8, 13, n.to_string())).await.status, 403);
    let stranger_witness =
        Cosigner::generate_ml_dsa_44("witness.test/w1", &mut rand::rngs::OsRng).unwrap();
    let foreign = stranger_witness
        .cosign(&log.checkpoint().to_body().unwrap(), 5)
        .unwrap()
        .to_line();
    let r = post(request(&log, 8, 13, cosigned(&log, &foreign))).await;
    assert_eq!(r.status, 403, "{r:?}");
    w.stop().await;

    // 501: a witness with only an Ed25519 key cannot sign subtrees.
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/log");
    let w = TestWitness::start(dir.path(), &[&log]).await;
    log.grow_to(4);
    let r = w.post(&log.request(0).to_http_body()).await;
    assert_eq!(r.status, 200);
    let req = request(&log, 2, 4, cosigned(&log, &r.body));
    let r = w.post_to("/sign-subtree", &req.to_http_body()).await;
    assert_eq!(r.status, 501, "{r:?}");
    w.stop().await;
}

#[tokio::test]
async fn sign_subtree_over_grpc_has_its_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/log");
    let w = TestWitness::start_algs(dir.path(), &[&log], &[], &[KeyAlg::MlDsa44]).await;
    let mut c = WitnessServiceClient::new(w.channel().await);
    log.grow_to(21);
    let lines = c
        .add_checkpoint(pb::AddCheckpointRequest {
            old_size: 0,
            consistency_proof: vec![],
            checkpoint: log.signed(),
        })
        .await
        .unwrap()
        .into_inner()
        .cosignatures;
    assert_cosigned_all(&w.verifiers, &log, &lines, w.clock.now());
    let reference = cosigned(&log, &lines);
    let to_pb = |r: &SignSubtree| pb::SignSubtreeRequest {
        start: r.start,
        end: r.end,
        subtree_hash: r.hash.to_vec().into(),
        consistency_proof: r.proof.iter().map(|h| h.to_vec().into()).collect(),
        checkpoint: r.checkpoint.clone(),
    };
    let req = request(&log, 16, 21, reference.clone());
    let got = c
        .sign_subtree(to_pb(&req))
        .await
        .unwrap()
        .into_inner()
        .cosignatures;
    let sig = NoteSignature::parse_line(got.trim_end()).unwrap();
    verify_subtree_cosignature(&w.verifier, log.origin(), 16, 21, &req.hash, &sig).unwrap();

    let code = |r: Result<tonic::Response<pb::SignSubtreeResponse>, tonic::Status>| {
        r.err().map_or(Code::Ok, |s| s.code())
    };
    let mut bad = to_pb(&req);
    bad.start = 15;
    assert_eq!(code(c.sign_subtree(bad).await), Code::InvalidArgument);
    let mut bad = to_pb(&req);
    bad.subtree_hash = vec![0u8; 31].into();
    assert_eq!(code(c.sign_subtree(bad).await), Code::InvalidArgument);
    let mut bad = to_pb(&req);
    bad.consistency_proof[0] = vec![0u8; 32].into();
    assert_eq!(code(c.sign_subtree(bad).await), Code::FailedPrecondition);
    let mut stranger = TestLog::new("example.com/stranger");
    stranger.grow_to(21);
    let s = to_pb(&request(&stranger, 16, 21, stranger.signed()));
    assert_eq!(code(c.sign_subtree(s).await), Code::NotFound);
    let s = to_pb(&request(&log, 16, 21, log.signed()));
    assert_eq!(code(c.sign_subtree(s).await), Code::PermissionDenied);
    w.stop().await;
}

#[tokio::test]
async fn the_monitoring_endpoint_serves_the_latest_cosigned_checkpoint_under_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/log");
    let w = TestWitness::start_algs(
        dir.path(),
        &[&log],
        &[(
            "# submission_prefix = \"\"",
            "submission_prefix = \"/submit\"\nmonitoring_prefix = \"/monitor/v1\"",
        )],
        BOTH,
    )
    .await;
    let hash = hex::encode(Sha256::digest(log.origin().as_bytes()));
    let path = format!("/monitor/v1/{hash}/checkpoint");

    // Never co-signed: 404.
    assert_eq!(w.get(&path).await.status, 404);
    // The submission prefix moved add-checkpoint: the root path is gone.
    log.grow_to(7);
    assert_eq!(w.post(&log.request(0).to_http_body()).await.status, 404);
    // Submitted with a stranger's signature line too, which the monitoring view leaves out.
    let stranger =
        accord_proto::note::Signer::generate("example.com/x", &mut rand::rngs::OsRng).unwrap();
    let mut submitted = Note::parse(log.signed().as_bytes()).unwrap();
    submitted.sign(&stranger).unwrap();
    let mut req = log.request(0);
    req.checkpoint = submitted.to_string();
    w.clock.advance(3);
    let r = w
        .post_to("/submit/add-checkpoint", &req.to_http_body())
        .await;
    assert_eq!(r.status, 200, "{r:?}");

    let m = w.get(&path).await;
    assert_eq!(m.status, 200, "{m:?}");
    assert_eq!(m.header("content-type"), Some("text/plain; charset=utf-8"));
    let opened = open_checkpoint(
        m.body.as_bytes(),
        log.origin(),
        &[log.signer.verifier()],
        &w.verifiers,
    )
    .unwrap();
    assert_eq!(opened.checkpoint, log.checkpoint());
    assert_eq!(
        opened.cosignatures().map(|(_, t)| t).collect::<Vec<_>>(),
        vec![w.clock.now(); 2]
    );
    assert!(opened.note.unverified.is_empty(), "{}", m.body);
    assert_eq!(m.body, format!("{}{}", log.signed(), r.body));

    // A later checkpoint replaces it; other hashes, uppercase hex and junk are 404.
    log.grow_to(9);
    w.clock.advance(3);
    let r = w
        .post_to("/submit/add-checkpoint", &log.request(7).to_http_body())
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let m = w.get(&path).await;
    assert_eq!(m.body, format!("{}{}", log.signed(), r.body));
    let other = hex::encode(Sha256::digest(b"example.com/other"));
    for p in [
        format!("/monitor/v1/{other}/checkpoint"),
        format!("/monitor/v1/{}/checkpoint", hash.to_uppercase()),
        "/monitor/v1/zz/checkpoint".to_owned(),
        format!("/{hash}/checkpoint"),
    ] {
        assert_eq!(w.get(&p).await.status, 404, "{p}");
    }

    // gRPC GetLatest carries the same cosigned checkpoint.
    let mut c = WitnessServiceClient::new(w.channel().await);
    let latest = c
        .get_latest(pb::GetLatestRequest {
            origin: log.origin().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(latest.size, 9);
    assert_eq!(latest.cosigned_checkpoint, m.body);
    w.stop().await;
}
