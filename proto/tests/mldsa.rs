//! ML-DSA-44 cosigner keys and `subtree/v1` cosignatures (c2sp.org/tlog-cosignature, type
//! 0x06): known-answer data, our own pinned vectors, and the verification rules.
//!
//! Interop evidence:
//! - the key derivation matches the ML-DSA-44 example key of the IETF LAMPS
//!   `dilithium-certificates` examples (shipped by RustCrypto's `ml-dsa` crate in
//!   `tests/examples/ML-DSA-44-seed.priv` / `ML-DSA-44.pub`): seed `00 01 .. 1f` gives the public
//!   key whose SHA-256 is pinned below;
//! - the pinned vector (`VECTOR_*`) was produced by this code and verified independently with
//!   the pure-Python FIPS 204 implementation `dilithium-py` 1.5.1 (`ML_DSA_44.verify(pk, msg,
//!   sig)`, empty context) over the `cosigned_message` bytes, which were rebuilt there from the
//!   spec's struct; the key also matched `ML_DSA_44.key_derive(seed)`, and dilithium-py's own
//!   deterministic signature over those bytes was byte-identical to ours.

use accord_proto::checkpoint::{
    self, Checkpoint, Cosigner, cosigned_message, verify_cosignature, verify_subtree_cosignature,
};
use accord_proto::note::{self, KeyKind, Note, Verifier};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rand::rngs::OsRng;
use sha2::{Digest, Sha256};

const SEED: [u8; 32] = {
    let mut s = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        s[i] = i as u8;
        i += 1;
    }
    s
};

/// SHA-256 of the LAMPS example ML-DSA-44 public key (seed 00..1f).
const LAMPS_PK_SHA256: &str = "9f107644c1084526af3bc8098680b05499a2325a644e388fb4f970e058d19d46";

const NAME: &str = "witness.example/pq";

fn vector_checkpoint() -> String {
    Checkpoint::new("example.com/log", 5, [0x42; 32])
        .to_body()
        .unwrap()
}

#[test]
fn key_derivation_matches_the_lamps_example_key() {
    let c = Cosigner::ml_dsa_44_from_seed(NAME, &SEED).unwrap();
    let v = c.verifier();
    assert_eq!(v.kind(), KeyKind::MlDsa44);
    assert_eq!(v.public_key_bytes().len(), 1312);
    assert_eq!(
        hex::encode(Sha256::digest(v.public_key_bytes())),
        LAMPS_PK_SHA256
    );
    assert!(v.verifying_key().is_none());
    // Key ID: SHA-256(name || "\n" || 0x06 || public key)[:4].
    let mut h = Sha256::new();
    h.update(NAME.as_bytes());
    h.update([b'\n', 0x06]);
    h.update(v.public_key_bytes());
    assert_eq!(v.key_id(), h.finalize()[..4]);
    assert_eq!(note::key_id(NAME, 0x06, v.public_key_bytes()), v.key_id());
}

#[test]
fn vkey_and_skey_text_forms_round_trip() {
    let c = Cosigner::generate_ml_dsa_44(NAME, &mut OsRng).unwrap();
    let vkey = c.verifier().to_vkey();
    let (name, rest) = vkey.split_once('+').unwrap();
    assert_eq!(name, NAME);
    let (id, material) = rest.split_once('+').unwrap();
    assert_eq!(id, hex::encode(c.key_id()));
    let raw = B64.decode(material).unwrap();
    assert_eq!((raw[0], raw.len()), (0x06, 1313));
    assert_eq!(Verifier::from_vkey(&vkey).unwrap(), c.verifier());
    let skey = c.to_skey();
    assert!(skey.starts_with(&format!("PRIVATE+KEY+{NAME}+{id}+")));
    let raw = B64.decode(skey.splitn(5, '+').nth(4).unwrap()).unwrap();
    assert_eq!((raw[0], raw.len()), (0x06, 33));
    let back = Cosigner::from_skey(&format!("{skey}\n")).unwrap();
    assert_eq!(back.verifier(), c.verifier());
    assert_eq!(back.kind(), KeyKind::MlDsa44);

    // Wrong key ID, truncated key, a type 0x06 vkey with a 32-byte key, a bad seed length.
    let bad_id = vkey.replacen(id, "00000000", 1);
    assert!(Verifier::from_vkey(&bad_id).is_err());
    let mut short = raw_vkey(&c);
    short.truncate(1000);
    assert!(Verifier::from_vkey(&format!("{NAME}+{id}+{}", B64.encode(&short))).is_err());
    let mut ed_len = vec![0x06];
    ed_len.extend([1u8; 32]);
    assert!(Verifier::from_vkey(&format!("{NAME}+{id}+{}", B64.encode(&ed_len))).is_err());
    let mut seed31 = vec![0x06];
    seed31.extend([1u8; 31]);
    assert!(
        Cosigner::from_skey(&format!("PRIVATE+KEY+{NAME}+{id}+{}", B64.encode(&seed31))).is_err()
    );
    // An Ed25519 cosigner key still parses as one.
    let ed = Cosigner::generate("witness.example/ed", &mut OsRng).unwrap();
    assert_eq!(
        Cosigner::from_skey(&ed.to_skey()).unwrap().kind(),
        KeyKind::CosignatureV1
    );
    // Debug never shows key material.
    assert!(!format!("{c:?}").contains(&B64.encode(&raw[1..])));
}

fn raw_vkey(c: &Cosigner) -> Vec<u8> {
    let mut raw = vec![0x06];
    raw.extend_from_slice(c.verifier().public_key_bytes());
    raw
}

#[test]
fn cosigned_message_layout() {
    let hash = [0xab; 32];
    let m = cosigned_message(
        "w.example/1",
        1679315147,
        "example.com/log",
        0,
        20852163,
        &hash,
    )
    .unwrap();
    let mut want = b"subtree/v1\n\0".to_vec();
    want.push(11);
    want.extend_from_slice(b"w.example/1");
    want.extend_from_slice(&1679315147u64.to_be_bytes());
    want.push(15);
    want.extend_from_slice(b"example.com/log");
    want.extend_from_slice(&0u64.to_be_bytes());
    want.extend_from_slice(&20852163u64.to_be_bytes());
    want.extend_from_slice(&hash);
    assert_eq!(m, want);
    assert_eq!(&m[..12], b"subtree/v1\n\x00");
    // start > 0 requires timestamp 0; names are 1..255 bytes.
    assert!(cosigned_message("w", 1, "o", 8, 13, &hash).is_err());
    assert!(cosigned_message("w", 0, "o", 8, 13, &hash).is_ok());
    assert!(cosigned_message("", 0, "o", 0, 1, &hash).is_err());
    assert!(cosigned_message("w", 0, &"o".repeat(256), 0, 1, &hash).is_err());
}

/// The pinned vector: SHA-256 of the cosignature line that `SEED` / `NAME` gives for
/// `vector_checkpoint()` at timestamp 1700000000 (deterministic ML-DSA-44).
const VECTOR_LINE_SHA256: &str = "68e3bc01d6c5260c1136f0d9af7bf34fda5c788cab478eaa7aaa5127e51e5942";

#[test]
fn pinned_cosignature_vector() {
    let c = Cosigner::ml_dsa_44_from_seed(NAME, &SEED).unwrap();
    let body = vector_checkpoint();
    let line = c.cosign(&body, 1_700_000_000).unwrap();
    assert_eq!(line.signature.len(), 8 + 2420);
    assert_eq!(line.signature[..8], 1_700_000_000u64.to_be_bytes());
    let text = line.to_line();
    if std::env::var_os("ACCORD_PRINT_VECTORS").is_some() {
        println!("VKEY {}", c.verifier().to_vkey());
        println!("BODY {}", B64.encode(&body));
        println!("LINE {text}");
    }
    assert_eq!(
        hex::encode(Sha256::digest(text.as_bytes())),
        VECTOR_LINE_SHA256
    );
    assert_eq!(
        verify_cosignature(&c.verifier(), &body, &line).unwrap(),
        1_700_000_000
    );
}

#[test]
fn checkpoint_cosigned_by_both_types_verifies_and_tampering_fails() {
    let log = note::Signer::generate("example.com/log", &mut OsRng).unwrap();
    let ed = Cosigner::generate("witness.example/ed", &mut OsRng).unwrap();
    let pq = Cosigner::generate_ml_dsa_44("witness.example/pq", &mut OsRng).unwrap();
    let cp = Checkpoint {
        extensions: vec!["ext line".into()],
        ..Checkpoint::new("example.com/log", 9, [7; 32])
    };
    let body = cp.to_body().unwrap();
    let mut n = Note::parse(cp.sign(&log).unwrap().as_bytes()).unwrap();
    n.add_signature(ed.cosign(&body, 100).unwrap()).unwrap();
    n.add_signature(pq.cosign(&body, 200).unwrap()).unwrap();
    let msg = n.to_string();
    let opened = checkpoint::open_checkpoint(
        msg.as_bytes(),
        "example.com/log",
        &[log.verifier()],
        &[ed.verifier(), pq.verifier()],
    )
    .unwrap();
    let mut got: Vec<_> = opened.cosignatures().map(|(v, t)| (v.kind(), t)).collect();
    got.sort_by_key(|g| g.1);
    assert_eq!(
        got,
        vec![(KeyKind::CosignatureV1, 100), (KeyKind::MlDsa44, 200)]
    );

    // The ML-DSA message does not cover extension lines (the spec says so); the Ed25519 one does.
    let other_ext = Checkpoint {
        extensions: vec!["other".into()],
        ..cp.clone()
    }
    .to_body()
    .unwrap();
    let pq_line = &n.signatures()[2];
    assert_eq!(
        verify_cosignature(&pq.verifier(), &other_ext, pq_line).unwrap(),
        200
    );
    assert!(verify_cosignature(&ed.verifier(), &other_ext, &n.signatures()[1]).is_err());
    // Another root or size fails.
    let other_root = Checkpoint::new("example.com/log", 9, [8; 32])
        .to_body()
        .unwrap();
    assert!(verify_cosignature(&pq.verifier(), &other_root, pq_line).is_err());
    let other_size = Checkpoint::new("example.com/log", 10, [7; 32])
        .to_body()
        .unwrap();
    assert!(verify_cosignature(&pq.verifier(), &other_size, pq_line).is_err());
    // A flipped signature bit is a bad signature, and the note as a whole is rejected.
    let mut bad = pq_line.clone();
    bad.signature[100] ^= 1;
    assert!(matches!(
        verify_cosignature(&pq.verifier(), &body, &bad),
        Err(accord_proto::Error::BadSignature { .. })
    ));
    let mut tampered = Note::parse(cp.sign(&log).unwrap().as_bytes()).unwrap();
    tampered.add_signature(bad).unwrap();
    assert!(
        checkpoint::open_checkpoint(
            tampered.to_string().as_bytes(),
            "example.com/log",
            &[log.verifier()],
            &[pq.verifier()],
        )
        .is_err()
    );
    // A payload of the Ed25519 length under an ML-DSA key is malformed.
    let mut short = pq_line.clone();
    short.signature.truncate(72);
    assert!(verify_cosignature(&pq.verifier(), &body, &short).is_err());
    // The same name with the other key type has another key ID, so lines never cross.
    assert_ne!(ed.key_id(), pq.key_id());
}

#[test]
fn subtree_cosignatures() {
    let pq = Cosigner::generate_ml_dsa_44("witness.example/pq", &mut OsRng).unwrap();
    let hash = [9; 32];
    let line = pq.cosign_subtree("example.com/log", 8, 13, &hash).unwrap();
    assert_eq!(line.signature[..8], [0; 8]);
    assert_eq!(
        verify_subtree_cosignature(&pq.verifier(), "example.com/log", 8, 13, &hash, &line).unwrap(),
        0
    );
    for (origin, start, end, h) in [
        ("example.com/other", 8, 13, hash),
        ("example.com/log", 8, 12, hash),
        ("example.com/log", 0, 13, hash),
        ("example.com/log", 8, 13, [1; 32]),
    ] {
        assert!(verify_subtree_cosignature(&pq.verifier(), origin, start, end, &h, &line).is_err());
    }
    // Ed25519 keys cannot sign subtrees, and cannot verify subtree/v1 lines.
    let ed = Cosigner::generate("witness.example/ed", &mut OsRng).unwrap();
    assert!(ed.cosign_subtree("example.com/log", 8, 13, &hash).is_err());
    assert!(
        verify_subtree_cosignature(&ed.verifier(), "example.com/log", 8, 13, &hash, &line).is_err()
    );
}
