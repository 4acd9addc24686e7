//! Issue 9, accordctl for people: every command that reads something answers one JSON document
//! with `--output json` (checked field by field against real nodes), a table by default;
//! `accordctl status` shows one node's health; `receipt fetch --wait` waits for the proof;
//! completions; and errors that say what to do next.

use crate::federation_common;

use accord_proto::pb::log::v1::{
    GetCheckpointRequest, GetInclusionProofRequest, get_inclusion_proof_request::Leaf,
};
use accord_tests::{TestNode, eventually};
use federation_common::*;
use serde_json::Value;
use std::time::Duration;

fn conn(node: &TestNode) -> Vec<String> {
    vec![
        "--node".into(),
        format!("https://{}", node.addr),
        "--ca".into(),
        node.dir.join("tls/ca.pem").display().to_string(),
    ]
}

/// Runs accordctl with `args`; expects exit 0 and one JSON document on stdout.
fn json(args: Vec<String>) -> Value {
    let (code, out, err) = accordctl(&args);
    assert_eq!(code, 0, "accordctl {args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

fn with(mut a: Vec<String>, more: &[&str]) -> Vec<String> {
    a.extend(more.iter().map(|s| s.to_string()));
    a
}

#[tokio::test(flavor = "multi_thread")]
async fn every_read_command_answers_json() {
    let (b, a) = receiver_with_sender().await;
    a.add_peer(&b).await.unwrap();

    // A record for globex's bob, delivered by acme's sender and admitted at globex.
    let alice = signer(&a, "alice");
    let req = request("acme", "alice", "cli-1", party("globex", "bob"));
    let (id, _) = submit(&a, &alice, &req).await;
    let hex_id = hex::encode(id);

    // receipt fetch --wait: returns once the receipt carries globex's checkpoint and proof.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("r.receipt");
    let f = json(with(
        [vec!["receipt".into(), "fetch".into()], conn(&a)].concat(),
        &[
            "--record",
            &hex_id,
            "--peer",
            "globex",
            "--out",
            file.to_str().unwrap(),
            "--token-file",
            a.dir.join("admin.token").to_str().unwrap(),
            "--wait",
            "120",
            "--output",
            "json",
        ],
    ));
    assert_eq!(f["proven"], Value::Bool(true), "{f}");
    assert_eq!(f["durability"], "admitted");
    assert_eq!(f["peer"], "globex");
    assert_eq!(f["record_id"], hex_id.as_str());
    assert!(f["bytes"].as_u64().unwrap() > 0);
    // ... so it verifies offline right away.
    let v = json(vec![
        "receipt".into(),
        "verify".into(),
        "--receipt".into(),
        file.display().to_string(),
        "--peer-vkey".into(),
        b.vkey(),
        "--output".into(),
        "json".into(),
    ]);
    assert_eq!(v["valid"], Value::Bool(true));
    assert_eq!(v["outcome"], "admitted");
    assert_eq!(v["record_id"], hex_id.as_str());

    // A quarantined record at globex (no proof that acme recorded it) and a refused envelope. Sent after the
    // real delivery above, without a log proof of a log of the test's own: the receiver keeps
    // acme's real checkpoint and would refuse a fixture log as inconsistent with it.
    let mut peer = AsPeer::new(&a, &b).await;
    let r2 = accord_proto::signing::sign_record(&alice, &defer("acme", "alice", "cli-2"));
    let r3 =
        accord_proto::signing::sign_record(&alice, &resume("acme", "alice", "cli-2", id_of(&r2)));
    let got = peer
        .deliver(peer.envelope_unproven("globex", vec![r3], 1))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), r#"["quarantined", "unproven"]"#);
    // Addressed to initech: refused whole (seed 000, "Federation admission"), the code listed
    // by `refusals` below.
    let refused = peer
        .deliver(peer.envelope("initech", vec![], 2))
        .await
        .unwrap_err();
    assert_eq!(
        (refused.code(), accord_tests::reason(&refused).as_str()),
        (tonic::Code::PermissionDenied, "wrong_receiver"),
        "{refused:?}"
    );

    // status (top level and under admin), with the quarantine and the peer.
    let token = |n: &TestNode| {
        vec![
            "--token-file".to_string(),
            n.dir.join("admin.token").display().to_string(),
        ]
    };
    for cmd in [vec!["status".to_string()], vec!["admin".into()]] {
        let mut args = [cmd.clone(), conn(&b), token(&b)].concat();
        if cmd[0] == "admin" {
            args.push("status".into());
        }
        let s = json(with(args, &["--output", "json"]));
        assert_eq!(s["name"], "globex", "{s}");
        assert_eq!(s["origin"], "globex.accord/log");
        assert_eq!(s["quarantine_size"], 1);
        assert!(s["ledger_size"].as_u64().unwrap() >= 2, "{s}");
        assert!(s["checkpoint_size"].is_u64());
        assert!(s["checkpoint_age_ms"].is_i64());
        assert_eq!(s["witnessed_size"], 0);
        assert_eq!(s["witnesses_required"], 0);
        assert_eq!(s["witnessed_by"], Value::Array(vec![]));
        let p = &s["peers"][0];
        assert_eq!(p["name"], "acme");
        assert_eq!(p["enabled"], true);
        assert_eq!(p["breaker"], "closed");
        assert_eq!(p["queue_depth"], 0);
        assert!(p["endpoint"].as_str().unwrap().starts_with("https://"));
    }

    let admin_b = [admin_args(&b), vec!["--output".into(), "json".into()]].concat();
    let admin_a = [admin_args(&a), vec!["--output".into(), "json".into()]].concat();

    let peers = json(with(admin_b.clone(), &["peer", "list"]));
    assert_eq!(peers[0]["name"], "acme");
    assert_eq!(peers[0]["enabled"], true);
    assert!(
        peers[0]["keys"][0]["vkey"]
            .as_str()
            .unwrap()
            .starts_with("acme.accord/log+")
    );

    let h = json(with(admin_a.clone(), &["peer", "health", "globex"]));
    assert_eq!(h["peer"], "globex");
    assert_eq!(h["queue_depth"], 0);
    assert_eq!(h["breaker"], "closed");
    assert!(h["last_success_unix_ms"].as_i64().unwrap() > 0);
    assert!(h["oldest_queued_age_ms"].is_i64());

    let q = json(with(admin_b.clone(), &["quarantine", "list"]));
    assert_eq!(q[0]["peer"], "acme");
    assert_eq!(q[0]["code"], "unproven");
    assert_eq!(
        q[0]["outcome"],
        serde_json::json!(["quarantined", "unproven"])
    );
    assert_eq!(q[0]["record_id"].as_str().unwrap().len(), 64);
    assert_eq!(q[0]["author"], "acme/alice");

    let r = json(with(admin_b.clone(), &["refusals"]));
    assert_eq!(r[0]["peer"], "acme");
    assert_eq!(r[0]["code"], "wrong_receiver");
    assert!(r[0]["at_unix_ms"].as_i64().unwrap() > 0);

    let hc = json(with(
        [vec!["health".into()], conn(&b)].concat(),
        &["--output", "json"],
    ));
    assert_eq!(hc["status"], "SERVING");

    // Offline reads: an inclusion proof and a checkpoint note of acme's log.
    // Inclusion proofs are for those who may read the record: the operator here.
    let mut log = a.log_as(&a.admin_token()).await.unwrap();
    let cp = eventually(Duration::from_secs(30), || {
        let mut log = log.clone();
        async move {
            let c = log
                .get_checkpoint(GetCheckpointRequest {})
                .await?
                .into_inner()
                .latest;
            Ok::<_, tonic::Status>(c.filter(|c| c.size >= 1))
        }
    })
    .await
    .unwrap();
    let p = log
        .get_inclusion_proof(GetInclusionProofRequest {
            leaf: Some(Leaf::LeafIndex(0)),
            tree_size: cp.size,
        })
        .await
        .unwrap()
        .into_inner();
    let proof: Vec<String> = p.hashes.iter().map(hex::encode).collect();
    let mut args = vec![
        "tlog".to_string(),
        "verify-inclusion".into(),
        "--leaf-hash".into(),
        hex::encode(&p.leaf_hash),
        "--index".into(),
        "0".into(),
        "--size".into(),
        cp.size.to_string(),
        "--root".into(),
        hex::encode(&cp.root),
        "--output".into(),
        "json".into(),
    ];
    if !proof.is_empty() {
        args.extend(["--proof".into(), proof.join(",")]);
    }
    let inc = json(args);
    assert_eq!(inc["valid"], true);
    assert_eq!(inc["size"], cp.size);
    assert_eq!(inc["root"], hex::encode(&cp.root));

    let note = tmp.path().join("cp.note");
    std::fs::write(&note, &cp.note).unwrap();
    let n = json(vec![
        "note".into(),
        "verify".into(),
        "--vkey".into(),
        a.vkey(),
        note.display().to_string(),
        "--output".into(),
        "json".into(),
    ]);
    assert_eq!(n["valid"], true);
    assert_eq!(n["checkpoint"]["origin"], "acme.accord/log");
    assert_eq!(n["checkpoint"]["size"], cp.size);
    assert!(
        n["signed_by"][0]
            .as_str()
            .unwrap()
            .starts_with("acme.accord/log")
    );
    assert_eq!(n["cosigned_by"], Value::Array(vec![]));
}

#[tokio::test(flavor = "multi_thread")]
async fn tables_by_default_completions_and_errors_that_say_what_to_do() {
    let (b, a) = receiver_with_sender().await;
    // A table by default, with a header and the peer's row.
    let (code, out, err) = accordctl(&with(admin_args(&b), &["peer", "list"]));
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("PEER") && header.contains("ENDPOINT"),
        "{out}"
    );
    assert!(lines.next().unwrap().starts_with("acme "), "{out}");
    assert!(serde_json::from_str::<Value>(out.trim()).is_err());

    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = accordctl(&["completions".to_string(), shell.to_string()]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("accordctl") && out.contains("status"),
            "{shell}"
        );
    }

    // Nothing listens there: the error asks whether the node runs and names --node.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let (code, _, err) = accordctl(&[
        "status".into(),
        "--node".into(),
        format!("https://{addr}"),
        "--ca".into(),
        b.dir.join("tls/ca.pem").display().to_string(),
        "--token-file".into(),
        b.dir.join("admin.token").display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("is the node running? check --node"), "{err}");

    // The wrong token: UNAUTHENTICATED, and where the right one is.
    let tmp = tempfile::tempdir().unwrap();
    let wrong = tmp.path().join("wrong.token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let (code, _, err) = accordctl(&[
        "status".into(),
        "--node".into(),
        format!("https://{}", b.addr),
        "--ca".into(),
        b.dir.join("tls/ca.pem").display().to_string(),
        "--token-file".into(),
        wrong.display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("Unauthenticated"), "{err}");
    assert!(
        err.contains("pass --token-file <node dir>/admin.token"),
        "{err}"
    );

    // The wrong CA: the TLS failure points at --ca.
    let (code, _, err) = accordctl(&[
        "status".into(),
        "--node".into(),
        format!("https://{}", b.addr),
        "--ca".into(),
        a.dir.join("tls/ca.pem").display().to_string(),
        "--token-file".into(),
        b.dir.join("admin.token").display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--ca"), "{err}");
}

/// The record-path benchmarks answer one JSON document with their figure, the Ed25519
/// batch-verification limit measured in the same run and the ratio between them (BENCHMARKS.md
/// records these). Small runs: this checks the shape and consistency, not the speed.
#[test]
fn benchmarks_answer_json_with_their_limit() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let fed = json(s(&[
        "bench",
        "federation",
        "--records",
        "200",
        "--clients",
        "4",
        "--latency-records",
        "20",
        "--output",
        "json",
    ]));
    assert_eq!(fed["bench"], "federation");
    assert_eq!(fed["records"], 200);
    let rate = fed["federated_per_s"].as_f64().unwrap();
    let limit = fed["limit"]["per_s"].as_f64().unwrap();
    assert!(rate > 0.0 && limit > 0.0, "{fed}");
    let ratio = fed["ratio_to_limit"].as_f64().unwrap();
    assert!((ratio - rate / limit).abs() < 1e-9, "{fed}");
    assert_eq!(fed["latency"]["records"], 20);

    let app = json(s(&[
        "bench",
        "append",
        "--records",
        "400",
        "--clients",
        "4",
        "--connections",
        "2",
        "--latency-secs",
        "1",
        "--output",
        "json",
    ]));
    assert_eq!(app["bench"], "append");
    let rate = app["appends_per_s"].as_f64().unwrap();
    let limit = app["verify_batch_per_s_2core"].as_f64().unwrap();
    assert!(rate > 0.0 && limit > 0.0, "{app}");
    assert!((app["ratio"].as_f64().unwrap() - rate / limit).abs() < 1e-9);
    assert!(app["appends_per_s_unary"].as_f64().unwrap() > 0.0, "{app}");
    assert!(app["half_load_records"].as_u64().unwrap() > 0, "{app}");
}
