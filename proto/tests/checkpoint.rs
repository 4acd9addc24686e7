//! Checkpoints (c2sp.org/tlog-checkpoint) and cosignatures (c2sp.org/tlog-cosignature): the
//! derived vector reproduces byte for byte, and the real Sigsum checkpoint with its eight witness
//! cosignatures verifies.

mod common;

use accord_proto::checkpoint::{self, Checkpoint, Cosigner};
use accord_proto::note::{self, KeyKind, Note, NoteSignature, Signer, Verifier};
use accord_proto::{Error, merkle};
use ed25519_dalek::{SigningKey, VerifyingKey};
use proptest::prelude::*;
use rand::rngs::OsRng;

const PETER_SEED: &str = "810a1402d5146c8d84f2443330f54080ebf98ee17d9c74f6252fc5d5c7283173";

fn seed(hex_str: &str) -> SigningKey {
    SigningKey::from_bytes(&hex::decode(hex_str).unwrap().try_into().unwrap())
}

fn pubkey(hex_str: &str) -> VerifyingKey {
    VerifyingKey::from_bytes(&hex::decode(hex_str).unwrap().try_into().unwrap()).unwrap()
}

#[test]
fn derived_checkpoint_and_cosignature_reproduce_exactly() {
    let f = common::vector_file("signed-note.txt");
    let body = common::block(&f, 2);
    let cosig_msg = common::block(&f, 3);
    let signed = common::block(&f, 4);

    let cp = Checkpoint::parse(&body).unwrap();
    assert_eq!(cp.origin, "example.com/test-log");
    assert_eq!(cp.size, 8);
    assert_eq!(
        hex::encode(cp.root),
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
    );
    assert!(cp.extensions.is_empty());
    assert_eq!(cp.to_body().unwrap(), body);
    assert_eq!(Checkpoint::new(&cp.origin, cp.size, cp.root), cp);

    let log = Signer::from_signing_key("example.com/test-log", seed(PETER_SEED)).unwrap();
    assert_eq!(
        log.verifier().to_vkey(),
        common::word_after(&f, "# Log vkey: ")
    );
    let witness_seed = common::word_after(&f, "# Witness seed hex = ");
    // Through the skey text form, to exercise it too.
    let w = Signer::from_signing_key("witness.example/w1", seed(witness_seed)).unwrap();
    let witness = Cosigner::from_skey(&Cosigner::from_signer(&w).to_skey()).unwrap();
    assert_eq!(
        witness.verifier().to_vkey(),
        common::word_after(&f, "cosigner vkey (type 0x04): ")
    );

    assert_eq!(
        checkpoint::cosignature_message(&body, 1679315147),
        cosig_msg.as_bytes()
    );
    let signed_by_log = cp.sign(&log).unwrap();
    let cosig = witness.cosign(&body, 1679315147).unwrap();
    assert_eq!(cosig.signature.len(), 72);
    assert_eq!(format!("{signed_by_log}{}", cosig.to_line()), signed);

    let opened = checkpoint::open_checkpoint(
        signed.as_bytes(),
        &cp.origin,
        &[log.verifier()],
        &[witness.verifier()],
    )
    .unwrap();
    assert_eq!(opened.checkpoint, cp);
    let cosigs: Vec<_> = opened.cosignatures().collect();
    assert_eq!(cosigs, [(&witness.verifier(), 1679315147)]);

    // A modified timestamp fails.
    let mut moved = cosig.clone();
    moved.signature[7] ^= 1;
    assert!(matches!(
        checkpoint::verify_cosignature(&witness.verifier(), &body, &moved),
        Err(Error::BadSignature { .. })
    ));
    let tampered = format!("{signed_by_log}{}", moved.to_line());
    assert!(matches!(
        checkpoint::open_checkpoint(
            tampered.as_bytes(),
            &cp.origin,
            &[log.verifier()],
            &[witness.verifier()]
        ),
        Err(Error::BadSignature { .. })
    ));
}

struct Sigsum {
    origin: String,
    body: String,
    signed: String,
    log: Verifier,
    witnesses: Vec<(Verifier, String)>, // vkey and the published raw signature hex
}

fn sigsum() -> Sigsum {
    let f = common::vector_file("signed-note.txt");
    let body = common::block(&f, 5);
    let origin = body.lines().next().unwrap().to_owned();
    let log = Verifier::new(
        &origin,
        KeyKind::Ed25519,
        pubkey(common::word_after(&f, "log pubkey hex = ")),
    )
    .unwrap();
    let witnesses = f
        .lines()
        .filter(|l| l.starts_with("witness ") && l.contains(" vkey="))
        .map(|l| {
            let word = |k: &str| common::word_after(l, k).to_owned();
            (Verifier::from_vkey(&word(" vkey=")).unwrap(), word(" sig="))
        })
        .collect();
    Sigsum {
        origin,
        signed: common::block(&f, 6),
        body,
        log,
        witnesses,
    }
}

#[test]
fn sigsum_checkpoint_and_eight_cosignatures_verify() {
    let s = sigsum();
    assert_eq!(hex::encode(s.log.key_id()), "57f71a6a");
    assert_eq!(s.witnesses.len(), 8);
    let cosigners: Vec<Verifier> = s.witnesses.iter().map(|(v, _)| v.clone()).collect();

    let opened = checkpoint::open_checkpoint(
        s.signed.as_bytes(),
        &s.origin,
        std::slice::from_ref(&s.log),
        &cosigners,
    )
    .unwrap();
    assert_eq!(opened.checkpoint.size, 381382);
    assert_eq!(opened.note.verified.len(), 9);
    assert!(opened.note.unverified.is_empty());
    let cosigs: Vec<_> = opened.cosignatures().collect();
    assert_eq!(cosigs.len(), 8);
    assert!(cosigs.iter().all(|(_, t)| *t == 1770193051));

    // Each published raw signature is over the cosignature/v1 message.
    let msg = checkpoint::cosignature_message(&s.body, 1770193051);
    for (v, sig_hex) in &s.witnesses {
        assert!(
            v.verify(&msg, &hex::decode(sig_hex).unwrap()),
            "{}",
            v.name()
        );
        assert!(!v.verify(s.body.as_bytes(), &hex::decode(sig_hex).unwrap()));
    }

    // With only the log key the cosignatures are unknown, not errors.
    let only_log = checkpoint::open_checkpoint(
        s.signed.as_bytes(),
        &s.origin,
        std::slice::from_ref(&s.log),
        &[],
    )
    .unwrap();
    assert_eq!(only_log.note.unverified.len(), 8);
    assert_eq!(only_log.cosignatures().count(), 0);

    // The wrong origin is refused.
    assert!(matches!(
        checkpoint::open_checkpoint(
            s.signed.as_bytes(),
            "other",
            std::slice::from_ref(&s.log),
            &[]
        ),
        Err(Error::OriginMismatch { .. })
    ));
}

#[test]
fn sigsum_modified_timestamp_fails() {
    let s = sigsum();
    let note = Note::parse(s.signed.as_bytes()).unwrap();
    for i in 1..note.signatures().len() {
        let mut tampered = Note::new(note.text()).unwrap();
        for (j, sig) in note.signatures().iter().enumerate() {
            let mut sig = sig.clone();
            if i == j {
                let ts = u64::from_be_bytes(sig.signature[..8].try_into().unwrap()) + 1;
                sig.signature[..8].copy_from_slice(&ts.to_be_bytes());
            }
            tampered.add_signature(sig).unwrap();
        }
        let (v, _) = &s.witnesses[i - 1];
        assert_eq!(tampered.signatures()[i].name, v.name());
        assert!(matches!(
            checkpoint::verify_cosignature(v, note.text(), &tampered.signatures()[i]),
            Err(Error::BadSignature { .. })
        ));
        let err = checkpoint::open_checkpoint(
            tampered.to_string().as_bytes(),
            &s.origin,
            std::slice::from_ref(&s.log),
            std::slice::from_ref(v),
        )
        .unwrap_err();
        assert!(matches!(err, Error::BadSignature { .. }), "{err:?}");
    }
}

#[test]
fn checkpoint_parse_rejects_malformed_bodies() {
    let root = "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=";
    for bad in [
        "example.com/log\n8\n".to_owned(),
        format!("example.com/log\n8\n{root}"),
        format!("\n8\n{root}\n"),
        format!("example.com/log\n08\n{root}\n"),
        format!("example.com/log\n-1\n{root}\n"),
        format!("example.com/log\n+1\n{root}\n"),
        format!("example.com/log\n 8\n{root}\n"),
        format!("example.com/log\n18446744073709551616\n{root}\n"),
        "example.com/log\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQw==\n".to_owned(),
        "example.com/log\n8\nnot base64!\n".to_owned(),
        format!("example.com/log\n8\n{root}\n\next\n"),
        format!("example.com/log\n8\n{root}\nbad\tline\n"),
    ] {
        assert!(
            matches!(
                Checkpoint::parse(&bad),
                Err(Error::MalformedCheckpoint { .. })
            ),
            "{bad:?}"
        );
    }
    let ok = Checkpoint::parse(&format!("o\n0\n{root}\next one\next two\n")).unwrap();
    assert_eq!(ok.size, 0);
    assert_eq!(ok.extensions, ["ext one", "ext two"]);
    assert_eq!(
        Checkpoint::parse(
            "o\n18446744073709551615\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
        )
        .unwrap()
        .size,
        u64::MAX
    );
}

#[test]
fn signing_and_cosigning_rules() {
    let log = Signer::generate("example.com/log", &mut OsRng).unwrap();
    let witness = Cosigner::generate("witness.example/w", &mut OsRng).unwrap();
    let cp = Checkpoint::new("example.com/log", 5, merkle::EMPTY_ROOT);

    // The log key's name must be the origin.
    let other = Signer::generate("example.com/other", &mut OsRng).unwrap();
    assert!(matches!(cp.sign(&other), Err(Error::OriginMismatch { .. })));
    // Invalid fields cannot be written.
    let mut bad = cp.clone();
    bad.extensions.push(String::new());
    assert!(bad.to_body().is_err() && bad.sign(&log).is_err());
    bad.extensions = vec!["x\ny".into()];
    assert!(bad.to_body().is_err());

    // Cosigning needs a checkpoint body and a timestamp within 2^63 - 1.
    let body = cp.to_body().unwrap();
    assert!(matches!(
        witness.cosign("not a checkpoint\n", 1),
        Err(Error::MalformedCheckpoint { .. })
    ));
    assert!(matches!(
        witness.cosign(&body, 1 << 63),
        Err(Error::MalformedCosignature { .. })
    ));
    let cosig = witness.cosign(&body, (1 << 63) - 1).unwrap();
    assert_eq!(
        checkpoint::verify_cosignature(&witness.verifier(), &body, &cosig),
        Ok((1 << 63) - 1)
    );

    // A cosignature is not checked with a plain Ed25519 verifier of the same key, nor with
    // another cosigner.
    assert!(matches!(
        checkpoint::verify_cosignature(&log.verifier(), &body, &cosig),
        Err(Error::WrongKeyKind { .. })
    ));
    let w2 = Cosigner::generate("witness.example/w2", &mut OsRng).unwrap();
    assert!(matches!(
        checkpoint::verify_cosignature(&w2.verifier(), &body, &cosig),
        Err(Error::KeyMismatch { .. })
    ));
    // A truncated payload is malformed.
    let mut short = cosig.clone();
    short.signature.truncate(70);
    assert!(matches!(
        checkpoint::verify_cosignature(&witness.verifier(), &body, &short),
        Err(Error::MalformedCosignature { .. })
    ));

    // A cosigned checkpoint whose log signature is by an unconfigured key is refused even
    // though a known cosigner verified.
    let rotated = Signer::generate("example.com/log", &mut OsRng).unwrap();
    let mut n = Note::parse(cp.sign(&rotated).unwrap().as_bytes()).unwrap();
    n.add_signature(cosig).unwrap();
    let err = checkpoint::open_checkpoint(
        n.to_string().as_bytes(),
        "example.com/log",
        &[log.verifier()],
        &[witness.verifier()],
    )
    .unwrap_err();
    assert!(matches!(err, Error::MissingSignature { .. }), "{err:?}");
}

proptest! {
    #[test]
    fn checkpoint_body_roundtrip(
        origin in "[a-z0-9./_-]{1,30}",
        size in any::<u64>(),
        root in any::<[u8; 32]>(),
        extensions in proptest::collection::vec("[ -~]{1,20}", 0..3),
        ts in 0u64..(1 << 63),
    ) {
        let cp = Checkpoint { origin: origin.clone(), size, root, extensions };
        let body = cp.to_body().unwrap();
        prop_assert_eq!(Checkpoint::parse(&body).unwrap(), cp.clone());

        let seed: [u8; 32] = root;
        let log = Signer::from_signing_key(&origin, SigningKey::from_bytes(&seed)).unwrap();
        let w = Cosigner::from_signer(&log);
        let mut n = Note::parse(cp.sign(&log).unwrap().as_bytes()).unwrap();
        n.add_signature(w.cosign(&body, ts).unwrap()).unwrap();
        let opened = checkpoint::open_checkpoint(
            n.to_string().as_bytes(), &origin, &[log.verifier()], &[w.verifier()],
        ).unwrap();
        prop_assert_eq!(opened.cosignatures().next().map(|(_, t)| t), Some(ts));
    }

    #[test]
    fn checkpoint_parse_never_panics(s in "\\PC{0,120}") {
        // One line without a newline is never a checkpoint nor a signed note.
        prop_assert!(matches!(
            Checkpoint::parse(&s),
            Err(accord_proto::Error::MalformedCheckpoint { .. })
        ), "not refused as a malformed checkpoint");
        prop_assert!(matches!(
            note::open(s.as_bytes(), &[]),
            Err(accord_proto::Error::MalformedNote { .. })
        ), "not refused as a malformed note");
        if let Ok(sig) = NoteSignature::parse_line(&s) {
            // A well-formed line with random bytes is no cosignature by a fresh key.
            let w = Cosigner::generate("w", &mut OsRng).unwrap();
            prop_assert!(checkpoint::verify_cosignature(&w.verifier(), &s, &sig).is_err());
        }
    }
}
