//! The seed corpora (`fuzz/seeds/<target>/`, committed), written by `fuzz/seeds.sh` through the
//! `accord-fuzz-seeds` binary: inputs built with the fixed keys of this crate, so that mutations
//! start past the signature checks, and inputs from the public vectors in `proto/tests/vectors`
//! (signed notes, keys, RFC 6962 and transparency-dev Merkle probes). With the `node` feature,
//! also config files written by `accord-node init` / `accord-witness init` and variants of them.
//! Everything but the config files (their keys and tokens are fresh at each `init`) is the same
//! at every generation.
use crate::*;
use accord_proto::checkpoint::Checkpoint;
use accord_proto::merkle::{self, Hash};
use accord_proto::pb::federation::v1::{Envelope, Receipt, ReceiptKind, Signed};
use accord_proto::pb::record::v1::{Admission, AdmissionOutcome, PartyRef, Record, record};
use accord_proto::signing::{self, ENVELOPE_PAYLOAD_TYPE, RECEIPT_PAYLOAD_TYPE};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use prost::Message;
use std::path::{Path, PathBuf};

struct Out {
    root: PathBuf,
    n: usize,
}

impl Out {
    fn put(&mut self, target: &str, bytes: impl AsRef<[u8]>) {
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        self.n += 1;
        std::fs::write(dir.join(format!("seed-{:04}", self.n)), bytes).expect("write seed");
    }
}

/// The `-----BEGIN-----` … `-----END-----` blocks of signed-note.txt, each ending in a newline.
fn blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (line, &mut cur) {
            ("-----BEGIN-----", _) => cur = Some(String::new()),
            ("-----END-----", c) => out.extend(c.take()),
            (l, Some(c)) => {
                c.push_str(l);
                c.push('\n');
            }
            _ => {}
        }
    }
    out
}

fn merkle_seed(a: u64, b: u64, mode: u8, hashes: &[Hash]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&a.to_be_bytes());
    v.extend_from_slice(&b.to_be_bytes());
    v.extend_from_slice(&[mode, 9, 0, 3]);
    for h in hashes {
        v.extend_from_slice(h);
    }
    v
}

fn b64_hash(v: &serde_json::Value) -> Option<Hash> {
    B64.decode(v.as_str()?).ok()?.try_into().ok()
}

/// transparency-dev probes: inclusion (leafIdx, treeSize, leafHash, root, proof) and
/// consistency (size1, size2, root1, root2, proof), in the merkle target's layout.
fn transparency_dev(dir: &Path, out: &mut Out) {
    let Ok(kinds) = std::fs::read_dir(dir) else {
        return;
    };
    for kind in kinds.flatten() {
        let mut stack = vec![kind.path()];
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                stack.extend(
                    std::fs::read_dir(&p)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                );
                continue;
            }
            let Ok(j) = std::fs::read_to_string(&p)
                .map_err(|_| ())
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|_| ()))
            else {
                continue;
            };
            let proof: Vec<Hash> = j["proof"]
                .as_array()
                .map(|a| a.iter().filter_map(b64_hash).collect())
                .unwrap_or_default();
            let num = |k: &str| j[k].as_u64().unwrap_or(0);
            let seed = if j.get("leafIdx").is_some() {
                let (Some(l), Some(r)) = (b64_hash(&j["leafHash"]), b64_hash(&j["root"])) else {
                    continue;
                };
                let mut hs = vec![l, r];
                hs.extend(proof);
                merkle_seed(num("leafIdx"), num("treeSize"), 0, &hs)
            } else {
                let (Some(r1), Some(r2)) = (b64_hash(&j["root1"]), b64_hash(&j["root2"])) else {
                    continue;
                };
                let mut hs = vec![r1, r2];
                hs.extend(proof);
                merkle_seed(num("size1"), num("size2"), 1, &hs)
            };
            out.put("merkle", seed);
        }
    }
}

fn envelope(records: Vec<accord_proto::pb::record::v1::SignedRecord>, signer: &Signer) -> Vec<u8> {
    let e = Envelope {
        sender: ORG.into(),
        receiver: RECEIVER.into(),
        first_sequence: 1,
        sent_at_unix_ms: 1_700_000_000_000,
        records,
        ..Default::default()
    };
    let payload = e.encode_to_vec();
    Signed {
        signatures: vec![signing::sign(signer, ENVELOPE_PAYLOAD_TYPE, &payload)],
        payload: payload.into(),
        payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
    }
    .encode_to_vec()
}

use accord_proto::note::Signer;

fn signed_receipt(r: &Receipt) -> Vec<u8> {
    let payload = r.encode_to_vec();
    Signed {
        signatures: vec![signing::sign(
            &org_node_signer(),
            RECEIPT_PAYLOAD_TYPE,
            &payload,
        )],
        payload: payload.into(),
        payload_type: RECEIPT_PAYLOAD_TYPE.into(),
    }
    .encode_to_vec()
}

/// An admission receipt proven by a one-leaf checkpoint of the receiver's log, cosigned.
fn proven_receipt() -> Vec<u8> {
    let sample = sample_signed_record("c-1");
    let record_id = signing::record_id(&sample.payload_type, &sample.payload);
    let admission = Record {
        author: Some(PartyRef {
            organisation: ORG.into(),
            name: "work-service".into(),
        }),
        declared_at_unix_ms: 1_700_000_000_000,
        commitment_id: "c-1".into(),
        operation: Some(record::Operation::Admission(Admission {
            record_id: record_id.to_vec().into(),
            peer: RECEIVER.into(),
            outcome: AdmissionOutcome::Admitted as i32,
            code: String::new(),
            closes: Default::default(),
        })),
        ..Default::default()
    };
    let leaf = signing::sign_record(&org_node_signer(), &admission);
    let leaf_bytes = leaf.encode_to_vec();
    let root = merkle::leaf_hash(&leaf_bytes);
    let body = Checkpoint::new(ORG_ORIGIN, 1, root)
        .to_body()
        .expect("body");
    let mut note = accord_proto::Note::new(&body).expect("note");
    note.sign(&org_node_signer()).expect("sign");
    note.add_signature(cosigner().cosign(&body, 1_700_000_000).expect("cosign"))
        .expect("add");
    signed_receipt(&Receipt {
        kind: ReceiptKind::Admission as i32,
        receiver: ORG.into(),
        sender: RECEIVER.into(),
        envelope_id: vec![1; 32].into(),
        record_id: record_id.to_vec().into(),
        outcome: AdmissionOutcome::Admitted as i32,
        code: String::new(),
        admission_record_id: signing::record_id(&leaf.payload_type, &leaf.payload)
            .to_vec()
            .into(),
        admission_sequence: 0,
        issued_at_unix_ms: 1_700_000_000_000,
        checkpoint: note.to_string(),
        inclusion_proof: vec![],
        admission_leaf: leaf_bytes.into(),
        batch: None,
    })
}

/// Writes the seeds under `corpus/<target>/` from the vectors directory `vectors`; returns how
/// many.
pub fn generate(vectors: &Path, corpus: &Path) -> usize {
    let mut out = Out {
        root: corpus.to_path_buf(),
        n: 0,
    };

    // Signed notes and keys from the public vectors.
    let notes = std::fs::read_to_string(vectors.join("signed-note.txt"))
        .expect("signed-note.txt in the vectors dir");
    for b in blocks(&notes) {
        out.put("note", &b);
        out.put("checkpoint", &b);
    }
    for line in notes.lines() {
        for word in line.split_whitespace() {
            if word.matches('+').count() >= 2 && !word.contains(':') {
                out.put("keys", word);
            }
        }
        if line.starts_with('\u{2014}') {
            out.put("keys", line);
        }
    }

    // Notes, keys and checkpoints made here, which verify under the targets' fixed keys.
    let (log, cos) = (log_signer(), cosigner());
    for k in [
        log.to_skey(),
        log.verifier().to_vkey(),
        cos.to_skey(),
        cos.verifier().to_vkey(),
    ] {
        out.put("keys", k);
    }
    for size in [0u64, 1, 4, 7, 8, 64] {
        let cp = signed_checkpoint(size, 1_700_000_000 + size);
        out.put("note", &cp);
        out.put("checkpoint", &cp);
        if let Some(line) = cp.lines().last() {
            out.put("keys", line);
        }
        // The witness's add-checkpoint body, from the size it holds (4) when possible.
        let src_leaves = leaves(size);
        let src = Leaves(&src_leaves);
        let old = if size >= 4 { 4 } else { 0 };
        let proof = merkle::consistency_proof(&src, old, size).expect("proof");
        let mut body = format!("old {old}\n");
        for h in &proof {
            body.push_str(&B64.encode(h));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&cp);
        out.put("witness_body", body);
    }

    // RFC 6962 / transparency-dev Merkle probes, and proofs over our own trees.
    transparency_dev(&vectors.join("transparency-dev-merkle"), &mut out);
    for (a, b, mode) in [
        (0u64, 1u64, 0u8),
        (3, 8, 0x10),
        (5, 7, 0x21),
        (6, 70, 2),
        (1, 64, 1),
    ] {
        let all = leaves(8);
        let mut hs = vec![all[0], merkle::root_from_leaf_hashes(&all)];
        hs.extend(merkle::inclusion_proof(&Leaves(&all), 0, 8).expect("proof"));
        out.put("merkle", merkle_seed(a, b, mode, &hs));
    }

    // Records, envelopes and receipts.
    let signed = sample_signed_record("c-1");
    out.put("signed_record", signed.encode_to_vec());
    out.put("record_edge", signed.encode_to_vec());
    out.put("record_edge", sample_record("c-2").encode_to_vec());
    let by_node = signing::sign_record(&org_node_signer(), &sample_record("c-3"));
    out.put("signed_record", by_node.encode_to_vec());
    out.put(
        "envelope",
        envelope(vec![signed.clone(), by_node.clone()], &org_node_signer()),
    );
    out.put("envelope", envelope(vec![signed.clone()], &party_signer()));
    out.put("envelope", envelope(vec![], &org_node_signer()));
    out.put(
        "receipt",
        signed_receipt(&Receipt {
            kind: ReceiptKind::EnvelopeRecorded as i32,
            receiver: ORG.into(),
            sender: RECEIVER.into(),
            envelope_id: vec![1; 32].into(),
            issued_at_unix_ms: 1_700_000_000_000,
            ..Default::default()
        }),
    );
    out.put("receipt", proven_receipt());
    #[cfg(feature = "node")]
    configs(&mut out);
    out.n
}

/// Config files as `init` writes them (the config targets resolve their paths against a
/// directory made by the same init, so these seeds validate), and variants that reach more of
/// validation: peers, witnesses, limits, federation.
#[cfg(feature = "node")]
fn configs(out: &mut Out) {
    let tmp = std::env::temp_dir().join(format!("accord-fuzz-seeds-{}", std::process::id()));
    let (n, w) = (tmp.join("n"), tmp.join("w"));
    accord_node::init::init(&accord_node::init::InitOptions {
        dir: n.clone(),
        name: "acme".into(),
        parties: vec!["alice".into()],
        listen: "127.0.0.1:0".into(),
        sans: vec![],
    })
    .expect("node init");
    accord_witness::init::init(&accord_witness::init::InitOptions {
        dir: w.clone(),
        name: "w1.example".into(),
        sans: vec![],
        grpc_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
    })
    .expect("witness init");
    let read =
        |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let node = read(n.join("accord.toml"));
    let witness = read(w.join("witness.toml"));
    let witness_vkey = read(w.join("witness.vkey"));
    let node_vkey = read(n.join("keys/node.vkey"));
    out.put("node_config", &node);
    out.put(
        "node_config",
        format!(
            "{node}\n[federation]\nbatch_size = 4\nquarantine_timeout_ms = 1000\n\n[limits]\nmax_connections = 10\n\n[[witnesses.list]]\nvkey = \"{}\"\nendpoint = \"https://127.0.0.1:1\"\nca = \"tls/ca.pem\"\n",
            witness_vkey.trim()
        ),
    );
    out.put("witness_config", &witness);
    out.put(
        "witness_config",
        format!(
            "{witness}\n[[logs]]\norigin = \"acme.accord/log\"\nvkeys = [\"{}\"]\n",
            node_vkey.trim()
        ),
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
