//! Issue 17 end to end with real processes: a witness holding both an Ed25519 and an ML-DSA-44
//! key co-signs a node's checkpoints; the node's K-of-N policy counts the ML-DSA-44 witness
//! toward K beside an Ed25519 one; the witness's monitoring endpoint serves the checkpoint with
//! both cosignature types, and `accordctl note verify` checks both (and rejects a tampered
//! ML-DSA-44 line).

use accord_proto::note::Signer;
use accord_proto::pb::work::v1 as work;
use accord_tests::{TestNode, TestWitness, WorkClient, eventually, run_bin};
use sha2::{Digest as _, Sha256};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

async fn submit(c: &mut WorkClient, alice: &Signer, i: u32) -> work::SubmitResponse {
    let r = accord_tests::records::alice_asks_bob(&format!("pq-{i}"), &format!("t{i}"));
    accord_tests::records::submit(c, alice, &r).await
}

/// A one-shot HTTP/1.1 GET; (status, body).
async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
    .await
}

/// A one-shot HTTP/1.1 POST; (status, body).
async fn http_post(addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    http(addr, &req).await
}

async fn http(addr: SocketAddr, head: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// Gives a running lib `TestWitness` a second, ML-DSA-44 key made with `accordctl key generate
/// --cosigner --alg ml-dsa-44`, and restarts it with `key_files` listing both keys. Returns the
/// ML-DSA-44 vkey.
async fn add_ml_dsa_key(w: &mut TestWitness) -> String {
    w.kill9();
    let skey = w.dir.join("witness-mldsa44.skey");
    let (code, out, err) = run_bin(
        "accordctl",
        &[
            "key",
            "generate",
            "--name",
            &w.name,
            "--cosigner",
            "--alg",
            "ml-dsa-44",
            "--out",
            skey.to_str().unwrap(),
        ],
        None,
    )
    .unwrap();
    assert_eq!(code, 0, "{out}{err}");
    let vkey = out.trim().to_owned();
    let cfg = w.dir.join("witness.toml");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "key_file = \"witness.skey\"",
        "key_files = [\"witness.skey\", \"witness-mldsa44.skey\"]",
    );
    std::fs::write(&cfg, text).unwrap();
    w.spawn().await.unwrap();
    vkey
}

#[tokio::test(flavor = "multi_thread")]
async fn ml_dsa_44_and_ed25519_witnesses_count_toward_k_and_both_types_verify_offline() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| {
            *t = t.replace(
                "checkpoint_interval_ms = 1000",
                "checkpoint_interval_ms = 100",
            )
        })
        .init()
        .unwrap();
    let w1 = TestWitness::start("w1.example", &node.origin(), &node.vkey())
        .await
        .unwrap();
    let mut w2 = TestWitness::start("w2.example", &node.origin(), &node.vkey())
        .await
        .unwrap();
    let (ed2, pq2) = (w2.vkey(), add_ml_dsa_key(&mut w2).await);
    assert!(pq2.starts_with("w2.example+"), "{pq2}");

    // The node trusts w1 by its Ed25519 key and w2 by its ML-DSA-44 key; K = 2 needs both.
    let e1 = w1.node_config_entry();
    let e2 = w2.node_config_entry().replace(&ed2, &pq2);
    node.trust_witnesses(2, &[e1, e2]).unwrap();
    node.spawn().await.unwrap();

    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let mut c = node.work().await.unwrap();
    let mut last = None;
    for i in 0..3 {
        last = Some(submit(&mut c, &alice, i).await);
    }
    let id = last.unwrap().record_id;
    let d = {
        let c = c.clone();
        eventually(Duration::from_secs(30), move || {
            let (mut c, id) = (c.clone(), id.clone());
            async move {
                let d = c
                    .get_durability(work::GetDurabilityRequest { record_id: id })
                    .await?
                    .into_inner();
                Ok::<_, tonic::Status>((d.durability() == work::Durability::Witnessed).then_some(d))
            }
        })
        .await
        .expect("record reaches witnessed with an Ed25519 and an ML-DSA-44 witness")
    };

    // The witnessed checkpoint: the log's signature, w1's Ed25519 and w2's ML-DSA-44 cosignature.
    let verify = |vkeys: &[&str], note: &str| {
        let mut args = vec!["note", "verify"];
        for v in vkeys {
            args.extend(["--vkey", v]);
        }
        args.push("-");
        run_bin("accordctl", &args, Some(note)).unwrap()
    };
    let (code, out, err) = verify(&[&node.vkey(), &w1.vkey(), &pq2], &d.checkpoint);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("signed by acme.accord/log"), "{out}");
    assert!(
        out.contains("cosigned by w1.example+") && out.contains("[ed25519]"),
        "{out}"
    );
    assert!(
        out.contains("cosigned by w2.example+") && out.contains("[ml-dsa-44]"),
        "{out}"
    );

    // w2's monitoring endpoint serves its latest checkpoint with both of its cosignatures.
    let hash = hex::encode(Sha256::digest(node.origin().as_bytes()));
    let (status, body) = http_get(w2.http, &format!("/{hash}/checkpoint")).await;
    assert_eq!(status, 200, "{body}");
    let (code, out, err) = verify(&[&node.vkey(), &ed2, &pq2], &body);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("cosigned by w2.example+").count(), 2, "{out}");
    assert!(
        out.contains("[ed25519]") && out.contains("[ml-dsa-44]"),
        "{out}"
    );
    assert!(!out.contains("unknown signature"), "{out}");

    // A flipped bit in the ML-DSA-44 signature: accordctl says invalid (exit 1).
    let pq_line = body
        .lines()
        .filter(|l| l.starts_with("\u{2014} w2.example "))
        .max_by_key(|l| l.len())
        .unwrap();
    let (prefix, b64) = pq_line.rsplit_once(' ').unwrap();
    // 4 + 8 + 2420 bytes in base64; change one character inside the signature.
    assert_eq!(b64.len(), (4 + 8 + 2420usize).div_ceil(3) * 4);
    let mut chars: Vec<char> = b64.chars().collect();
    chars[200] = if chars[200] == 'A' { 'B' } else { 'A' };
    let bad = format!("{prefix} {}", chars.into_iter().collect::<String>());
    let tampered = body.replace(pq_line, &bad);
    let (code, out, err) = verify(&[&node.vkey(), &ed2, &pq2], &tampered);
    assert_eq!(code, 1, "{out}{err}");

    // An origin hash the witness never co-signed: 404.
    let other = hex::encode(Sha256::digest(b"nobody.example/log"));
    assert_eq!(
        http_get(w2.http, &format!("/{other}/checkpoint")).await.0,
        404
    );

    // sign-subtree on the node's witnessed checkpoint: the whole tree [0, size) is a subtree
    // whose hash is the root and whose proof is empty; the answer verifies with accordctl.
    let note = accord_proto::note::Note::parse(d.checkpoint.as_bytes()).unwrap();
    let cp = accord_proto::checkpoint::Checkpoint::parse(note.text()).unwrap();
    let root_b64 = note.text().lines().nth(2).unwrap();
    let req = format!("subtree 0 {}\n{root_b64}\n\n{}", cp.size, d.checkpoint);
    let (status, lines) = http_post(w2.http, "/sign-subtree", &req).await;
    assert_eq!(status, 200, "{lines}");
    let (size, root) = (cp.size.to_string(), hex::encode(cp.root));
    let origin = node.origin();
    let args = [
        "tlog",
        "verify-subtree",
        "--start",
        "0",
        "--end",
        &size,
        "--hash",
        &root,
        "--size",
        &size,
        "--root",
        &root,
        "--origin",
        &origin,
        "--vkey",
        &pq2,
        "--cosignature",
        lines.trim_end(),
    ];
    let (code, out, err) = run_bin("accordctl", &args, None).unwrap();
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("cosigned by w2.example+") && out.contains("(timestamp 0)"),
        "{out}"
    );
    // The same request to w1 (Ed25519 only) is 501: its key type cannot sign subtrees.
    assert_eq!(http_post(w1.http, "/sign-subtree", &req).await.0, 501);
}
