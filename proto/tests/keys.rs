//! Signed-note keys (c2sp.org/signed-note; Go `sumdb/note` key formats): the published Go test
//! keys reproduce exactly, and every malformed key string is rejected with a precise error.

mod common;

use accord_proto::note::{self, KeyKind, Signer, Verifier};
use accord_proto::{Cosigner, Error};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use proptest::prelude::*;
use rand::rngs::OsRng;

const PETER_SKEY: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const PETER_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";

/// The Go test vectors, read from `signed-note.txt`: (skey, vkey, text, signed note).
fn go_vectors() -> (String, String, String, String) {
    let f = common::vector_file("signed-note.txt");
    let skey = common::line_starting(&f, "PRIVATE+KEY+PeterNeumann+").to_owned();
    let vkey = common::line_starting(&f, "PeterNeumann+").to_owned();
    let signed = common::block(&f, 0);
    let text = signed.split_once("\n\n").unwrap().0.to_owned() + "\n";
    (skey, vkey, text, signed)
}

#[test]
fn go_key_signs_the_published_note_exactly() {
    let (skey, vkey, text, signed) = go_vectors();
    assert_eq!(skey, PETER_SKEY);
    let signer = Signer::from_skey(&skey).unwrap();
    assert_eq!(signer.name(), "PeterNeumann");
    assert_eq!(signer.key_id(), [0xc7, 0x4f, 0x20, 0xa3]);
    assert_eq!(signer.to_skey(), skey);
    assert_eq!(signer.verifier().to_vkey(), vkey);

    // Ed25519 is deterministic, so the signature line is the published one.
    let sig = signer.sign(text.as_bytes());
    let mut payload = signer.key_id().to_vec();
    payload.extend_from_slice(&sig);
    let by_hand = format!("{text}\n\u{2014} PeterNeumann {}\n", B64.encode(payload));
    assert_eq!(by_hand, signed);
    assert_eq!(note::sign_note(&text, &[&signer]).unwrap(), signed);
}

#[test]
fn go_vkeys_parse_and_verify() {
    let (_, vkey, text, signed) = go_vectors();
    let f = common::vector_file("signed-note.txt");
    let peter = Verifier::from_vkey(&vkey).unwrap();
    assert_eq!(peter.kind(), KeyKind::Ed25519);
    assert_eq!(peter.name(), "PeterNeumann");
    assert_eq!(peter.key_id(), [0xc7, 0x4f, 0x20, 0xa3]);
    assert_eq!(peter.to_vkey(), vkey);
    assert_eq!(
        hex::encode(peter.verifying_key().unwrap().as_bytes()),
        "1a5cd907143c384c41e830c5bce12aa8817ec5649aaabf2c31388b35b2d744d6"
    );
    let peter_sig = signed.rsplit_once(' ').unwrap().1.trim_end();
    let raw = B64.decode(peter_sig).unwrap();
    assert!(peter.verify(text.as_bytes(), &raw[4..]));

    let enoch = Verifier::from_vkey(common::line_after(&f, "second key (verify-only): ")).unwrap();
    assert_eq!(enoch.key_id(), [0xaf, 0x0c, 0xfe, 0x78]);
    let enoch_line = common::line_following(&f, "its signature on the same text:");
    let raw = B64.decode(enoch_line.rsplit_once(' ').unwrap().1).unwrap();
    assert_eq!(raw[..4], enoch.key_id());
    assert!(enoch.verify(text.as_bytes(), &raw[4..]));
    assert!(!peter.verify(text.as_bytes(), &raw[4..]));
}

#[test]
fn key_id_is_sha256_of_name_newline_type_key() {
    let v = Verifier::from_vkey(PETER_VKEY).unwrap();
    let pk = v.verifying_key().unwrap().as_bytes();
    assert_eq!(
        note::key_id("PeterNeumann", 0x01, pk),
        [0xc7, 0x4f, 0x20, 0xa3]
    );
    // The same key under another name or type has another id (signed-note.txt's log key).
    assert_eq!(
        note::key_id("example.com/test-log", 0x01, pk),
        [0x1b, 0x54, 0x22, 0x40]
    );
    assert_ne!(note::key_id("PeterNeumann", 0x04, pk), v.key_id());
}

#[test]
fn flipped_bits_fail_verification() {
    let signer = Signer::from_skey(PETER_SKEY).unwrap();
    let v = signer.verifier();
    let msg = b"If you think cryptography is the answer to your problem,\n";
    let sig = signer.sign(msg);
    assert!(v.verify(msg, &sig));

    let mut bad_msg = msg.to_vec();
    bad_msg[3] ^= 0x01;
    assert!(!v.verify(&bad_msg, &sig));

    for i in [0, 31, 32, 63] {
        let mut bad_sig = sig;
        bad_sig[i] ^= 0x80;
        assert!(!v.verify(msg, &bad_sig), "flipped signature byte {i}");
    }
    assert!(!v.verify(msg, &sig[..63]), "short signature");

    let mut pk = *v.verifying_key().unwrap().as_bytes();
    pk[0] ^= 0x01;
    if let Ok(k) = ed25519_dalek::VerifyingKey::from_bytes(&pk) {
        let other = Verifier::new("PeterNeumann", KeyKind::Ed25519, k).unwrap();
        assert!(!other.verify(msg, &sig));
    }
}

/// A key string and a check on the error it must give.
type Case = (String, fn(&Error) -> bool);

/// Re-encodes a vkey with a replaced part, keeping the others.
fn vkey_with(name: &str, id: &str, material: &[u8]) -> String {
    format!("{name}+{id}+{}", B64.encode(material))
}

#[test]
fn malformed_vkeys_are_rejected_with_reasons() {
    let v = Verifier::from_vkey(PETER_VKEY).unwrap();
    let pk = *v.verifying_key().unwrap().as_bytes();
    let mut material = vec![0x01];
    material.extend_from_slice(&pk);

    let cases: Vec<Case> = vec![
        // missing parts
        ("PeterNeumann+c74f20a3".into(), |e| {
            matches!(e, Error::MalformedKey { .. })
        }),
        ("PeterNeumann".into(), |e| {
            matches!(e, Error::MalformedKey { .. })
        }),
        ("".into(), |e| matches!(e, Error::MalformedKey { .. })),
        // bad base64
        (
            "PeterNeumann+c74f20a3+ARpc2QcU!!!".into(),
            |e| matches!(e, Error::MalformedKey { reason } if reason.contains("base64")),
        ),
        // non-canonical padding
        (PETER_VKEY.trim_end_matches('W').to_owned() + "X", |e| {
            matches!(e, Error::MalformedKey { .. } | Error::KeyIdMismatch { .. })
        }),
        // wrong key id
        (vkey_with("PeterNeumann", "c74f20a4", &material), |e| {
            matches!(e, Error::KeyIdMismatch { stated, computed, .. }
                if *stated == [0xc7, 0x4f, 0x20, 0xa4] && *computed == [0xc7, 0x4f, 0x20, 0xa3])
        }),
        // key id not 8 hex digits
        (
            vkey_with("PeterNeumann", "c74f20a", &material),
            |e| matches!(e, Error::MalformedKey { reason } if reason.contains("hex")),
        ),
        (vkey_with("PeterNeumann", "c74f20zz", &material), |e| {
            matches!(e, Error::MalformedKey { .. })
        }),
        // wrong type byte
        (
            vkey_with("PeterNeumann", "c74f20a3", &[&[0x02][..], &pk].concat()),
            |e| matches!(e, Error::UnsupportedKeyType { key_type: 0x02 }),
        ),
        // wrong key length
        (
            vkey_with("PeterNeumann", "c74f20a3", &material[..32]),
            |e| matches!(e, Error::MalformedKey { reason } if reason.contains("32")),
        ),
        (vkey_with("PeterNeumann", "c74f20a3", &[]), |e| {
            matches!(e, Error::MalformedKey { .. })
        }),
        // bad names
        (vkey_with("Peter Neumann", "c74f20a3", &material), |e| {
            matches!(e, Error::InvalidKeyName { .. })
        }),
        (vkey_with("", "c74f20a3", &material), |e| {
            matches!(
                e,
                Error::InvalidKeyName {
                    reason: "empty",
                    ..
                }
            )
        }),
        (
            vkey_with("Peter\u{3000}Neumann", "c74f20a3", &material),
            |e| matches!(e, Error::InvalidKeyName { .. }),
        ),
    ];
    for (text, want) in cases {
        let err = Verifier::from_vkey(&text).expect_err(&text);
        assert!(want(&err), "{text:?}: unexpected {err:?}");
        assert!(!err.to_string().is_empty());
    }
}

#[test]
fn malformed_skeys_are_rejected_with_reasons() {
    let good = Signer::from_skey(PETER_SKEY).unwrap();
    let seed = *good.signing_key().as_bytes();
    let skey = |prefix: &str, name: &str, id: &str, material: &[u8]| {
        format!("{prefix}+{name}+{id}+{}", B64.encode(material))
    };
    let m = |t: u8| [&[t][..], &seed].concat();

    let cases: Vec<Case> = vec![
        ("PRIVATE+KEY+PeterNeumann+c74f20a3".into(), |e| {
            matches!(e, Error::MalformedKey { .. })
        }),
        (
            skey("PRIVATE+KEYS", "PeterNeumann", "c74f20a3", &m(1)),
            |e| matches!(e, Error::MalformedKey { reason } if reason.contains("PRIVATE+KEY")),
        ),
        (PETER_VKEY.into(), |e| {
            matches!(e, Error::MalformedKey { .. })
        }),
        (
            skey("PRIVATE+KEY", "PeterNeumann", "c74f20a3", b"\x01short"),
            |e| matches!(e, Error::MalformedKey { .. }),
        ),
        (
            "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEK*ALVFGyN".into(),
            |e| matches!(e, Error::MalformedKey { reason } if reason.contains("base64")),
        ),
        (
            skey("PRIVATE+KEY", "PeterNeumann", "00000000", &m(1)),
            |e| matches!(e, Error::KeyIdMismatch { .. }),
        ),
        (
            skey("PRIVATE+KEY", "PeterNeumann", "c74f20a3", &m(0x04)),
            |e| matches!(e, Error::UnsupportedKeyType { key_type: 0x04 }),
        ),
        (
            skey("PRIVATE+KEY", "PeterNeumann", "c74f20a3", &m(0x07)),
            |e| matches!(e, Error::UnsupportedKeyType { key_type: 0x07 }),
        ),
        (
            skey("PRIVATE+KEY", "Peter\tNeumann", "c74f20a3", &m(1)),
            |e| matches!(e, Error::InvalidKeyName { .. }),
        ),
    ];
    for (text, want) in cases {
        let err = Signer::from_skey(&text).expect_err(&text);
        assert!(want(&err), "{text:?}: unexpected {err:?}");
    }
    // A key file's trailing newline is tolerated.
    assert!(Signer::from_skey(&format!("{PETER_SKEY}\n")).is_ok());
}

#[test]
fn generate_validates_names() {
    for bad in [
        "",
        "a+b",
        "a b",
        "a\nb",
        "tab\t",
        "nbsp\u{a0}x",
        "em\u{2003}space",
    ] {
        assert!(
            matches!(
                Signer::generate(bad, &mut OsRng),
                Err(Error::InvalidKeyName { .. })
            ),
            "{bad:?}"
        );
    }
    for good in [
        "example.com/log",
        "PeterNeumann",
        "oid/1.3.6.1",
        "naïve—name",
    ] {
        assert!(Signer::generate(good, &mut OsRng).is_ok(), "{good:?}");
    }
}

#[test]
fn debug_never_prints_the_private_key() {
    let s = Signer::generate("example.com/k", &mut OsRng).unwrap();
    let skey = s.to_skey();
    let secret = skey.splitn(5, '+').nth(4).unwrap();
    let dbg = format!("{s:?}");
    assert!(dbg.contains("example.com/k"));
    assert!(!dbg.contains(secret), "{dbg}");
    assert!(!dbg.contains(&hex::encode(s.signing_key().as_bytes())));
    let c = Cosigner::from_signer(&s);
    assert!(!format!("{c:?}").contains(secret));
}

#[test]
fn cosigner_keys_use_type_0x04() {
    let c = Cosigner::generate("witness.example/w1", &mut OsRng).unwrap();
    let v = c.verifier();
    assert_eq!(v.kind(), KeyKind::CosignatureV1);
    assert_eq!(
        v.key_id(),
        note::key_id(
            "witness.example/w1",
            0x04,
            v.verifying_key().unwrap().as_bytes()
        )
    );
    let vkey = v.to_vkey();
    assert_eq!(
        B64.decode(vkey.splitn(3, '+').nth(2).unwrap()).unwrap()[0],
        0x04
    );
    assert_eq!(Verifier::from_vkey(&vkey).unwrap(), v);
    let back = Cosigner::from_skey(&c.to_skey()).unwrap();
    assert_eq!(back.verifier(), v);
    // A cosigner skey is not a note signer skey and vice versa.
    assert!(matches!(
        Signer::from_skey(&c.to_skey()),
        Err(Error::UnsupportedKeyType { key_type: 0x04 })
    ));
    assert!(matches!(
        Cosigner::from_skey(PETER_SKEY),
        Err(Error::UnsupportedKeyType { key_type: 0x01 })
    ));
}

#[test]
fn published_cosigner_vkey_parses() {
    let f = common::vector_file("signed-note.txt");
    let vkey = common::word_after(&f, "cosigner vkey (type 0x04): ");
    let v = Verifier::from_vkey(vkey).unwrap();
    assert_eq!(v.kind(), KeyKind::CosignatureV1);
    assert_eq!(v.name(), "witness.example/w1");
    assert_eq!(hex::encode(v.key_id()), "7da626ad");
    assert_eq!(
        hex::encode(v.verifying_key().unwrap().as_bytes()),
        "65e501f2c519e8790d8d2be905400a81c9cecd1eac504a35059d1674cd9f44b0"
    );
}

proptest! {
    #[test]
    fn generated_keys_roundtrip_through_text(name in "[a-z0-9./_-]{1,40}", seed in any::<[u8; 32]>()) {
        let s = Signer::from_signing_key(&name, ed25519_dalek::SigningKey::from_bytes(&seed)).unwrap();
        let back = Signer::from_skey(&s.to_skey()).unwrap();
        prop_assert_eq!(back.to_skey(), s.to_skey());
        let v = Verifier::from_vkey(&s.verifier().to_vkey()).unwrap();
        prop_assert_eq!(&v, &s.verifier());
        prop_assert!(v.verify(b"msg", &back.sign(b"msg")));
    }

    #[test]
    fn arbitrary_key_text_never_panics(text in "\\PC{0,120}") {
        // Random text is no key: each parser answers with a malformed-key error.
        let malformed = |e: accord_proto::Error| {
            matches!(
                e,
                accord_proto::Error::MalformedKey { .. }
                    | accord_proto::Error::KeyIdMismatch { .. }
                    | accord_proto::Error::InvalidKeyName { .. }
                    | accord_proto::Error::UnsupportedKeyType { .. }
            )
        };
        prop_assert!(malformed(Verifier::from_vkey(&text).unwrap_err()));
        prop_assert!(malformed(Signer::from_skey(&text).unwrap_err()));
        prop_assert!(malformed(Cosigner::from_skey(&text).unwrap_err()));
    }
}
