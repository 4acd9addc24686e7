//! DSSE-style record signing (DESIGN.md "Records and signing"): PAE known answers, record
//! sign/verify, key matching, and batch verification that names the bad item.

use accord_proto::Error;
use accord_proto::note::{KeyKind, Signer, Verifier};
use accord_proto::pb::record::v1 as pb;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE};
use accord_proto::{Cosigner, KeyRef};
use proptest::prelude::*;
use prost::Message as _;
use prost::bytes::Bytes;
use rand::rngs::OsRng;

const PETER_SKEY: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";

#[test]
fn pae_known_answers() {
    // The DSSE protocol document's example.
    assert_eq!(
        signing::pae("http://example.com/HelloWorld", b"hello world"),
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    );
    assert_eq!(
        signing::pae(RECORD_PAYLOAD_TYPE, b""),
        b"DSSEv1 41 application/vnd.accord.record.v1+protobuf 0 "
    );
    // Lengths count bytes, not characters.
    assert_eq!(
        signing::pae("é", b"\x00\xff"),
        b"DSSEv1 2 \xc3\xa9 2 \x00\xff"
    );
}

#[test]
fn record_id_is_sha256_of_pae() {
    assert_eq!(
        hex::encode(signing::record_id(
            "http://example.com/HelloWorld",
            b"hello world"
        )),
        "217751fac2c4f14edb2c9297fbc34abcb016ba88e74757e875ec4ac16fb6b6a1"
    );
    assert_eq!(
        hex::encode(signing::record_id(RECORD_PAYLOAD_TYPE, b"")),
        "54549669e7a971c02830d6573a1fe036dec16f769ffb3c6a953e124c354c5de4"
    );
    // The payload type is bound into the id.
    assert_ne!(
        signing::record_id(signing::RECORD_PAYLOAD_TYPE, b"x"),
        signing::record_id(signing::RECEIPT_PAYLOAD_TYPE, b"x")
    );
}

fn sample_record() -> pb::Record {
    pb::Record {
        author: Some(pb::PartyRef {
            organisation: "acme".into(),
            name: "alice".into(),
        }),
        declared_at_unix_ms: 1_700_000_000_000,
        commitment_id: "c-1".into(),
        nonce: Bytes::from_static(b"n1"),
        operation: Some(pb::record::Operation::Promise(pb::Promise {})),
        ..Default::default()
    }
}

#[test]
fn record_sign_verify_roundtrip() {
    let signer = Signer::from_skey(PETER_SKEY).unwrap();
    let v = signer.verifier();
    let record = sample_record();
    let signed = signing::sign_record(&signer, &record);
    // Seed 000: "Every operation is a typed Declaration
    // (https://suiss.app/ns/work/declaration/<wire name>)".
    assert_eq!(
        signed.payload_type,
        "https://suiss.app/ns/work/declaration/promise"
    );
    assert_eq!(signed.signatures.len(), 1);
    let sig = &signed.signatures[0];
    assert_eq!(sig.key_name, "PeterNeumann");
    assert_eq!(sig.key_id.as_ref(), [0xc7, 0x4f, 0x20, 0xa3]);
    assert_eq!(sig.signature.len(), 64);

    signing::verify(&v, &signed.payload_type, &signed.payload, sig).unwrap();
    // Verify the bytes, then decode them.
    assert_eq!(pb::Record::decode(signed.payload.clone()).unwrap(), record);

    // Flipping any payload bit breaks the signature and changes the id.
    let mut bad = signed.payload.to_vec();
    bad[0] ^= 0x01;
    assert_eq!(
        signing::verify(&v, &signed.payload_type, &bad, sig),
        Err(Error::BadSignature {
            key: v.key_ref(),
            index: None
        })
    );
    assert_ne!(
        signing::record_id(&signed.payload_type, &bad),
        signing::record_id(&signed.payload_type, &signed.payload)
    );
    // The type is signed too: neither the generic record type nor another's verifies.
    assert!(matches!(
        signing::verify(&v, RECORD_PAYLOAD_TYPE, &signed.payload, sig),
        Err(Error::BadSignature { .. })
    ));
    assert!(matches!(
        signing::verify(&v, signing::ENVELOPE_PAYLOAD_TYPE, &signed.payload, sig),
        Err(Error::BadSignature { .. })
    ));
}

#[test]
fn verify_checks_the_key_identity_first() {
    let signer = Signer::from_skey(PETER_SKEY).unwrap();
    let sig = signing::sign(&signer, RECORD_PAYLOAD_TYPE, b"payload");

    // Same key, another name: the signature names PeterNeumann.
    let renamed = Signer::from_signing_key("Other", signer.signing_key().clone()).unwrap();
    let err = signing::verify(&renamed.verifier(), RECORD_PAYLOAD_TYPE, b"payload", &sig);
    assert_eq!(
        err,
        Err(Error::KeyMismatch {
            signed_by: KeyRef::new("PeterNeumann", signer.key_id()),
            expected: renamed.verifier().key_ref(),
        })
    );

    // Wrong key id length on the wire.
    let mut short = sig.clone();
    short.key_id = Bytes::from_static(b"\xc7\x4f");
    assert!(matches!(
        signing::verify(&signer.verifier(), RECORD_PAYLOAD_TYPE, b"payload", &short),
        Err(Error::MalformedSignature { .. })
    ));

    // Wrong signature length.
    let mut trunc = sig.clone();
    trunc.signature = trunc.signature.slice(..63);
    assert!(matches!(
        signing::verify(&signer.verifier(), RECORD_PAYLOAD_TYPE, b"payload", &trunc),
        Err(Error::MalformedSignature { .. })
    ));

    // A cosignature key may not verify records, even with a matching identity.
    let cos = Cosigner::from_signer(&signer).verifier();
    let mut as_cos = sig.clone();
    as_cos.key_id = Bytes::copy_from_slice(&cos.key_id());
    assert!(matches!(
        signing::verify(&cos, RECORD_PAYLOAD_TYPE, b"payload", &as_cos),
        Err(Error::WrongKeyKind {
            expected: KeyKind::Ed25519,
            actual: KeyKind::CosignatureV1,
            ..
        })
    ));
}

#[test]
fn batch_verification_names_the_bad_item() {
    let signers: Vec<Signer> = (0..6)
        .map(|i| Signer::generate(&format!("org{i}.example/k"), &mut OsRng).unwrap())
        .collect();
    let verifiers: Vec<Verifier> = signers.iter().map(Signer::verifier).collect();
    let msgs: Vec<Vec<u8>> = (0..6)
        .map(|i| signing::pae(RECORD_PAYLOAD_TYPE, format!("record {i}").as_bytes()))
        .collect();
    let mut sigs: Vec<[u8; 64]> = signers.iter().zip(&msgs).map(|(s, m)| s.sign(m)).collect();

    let items = |sigs: &[[u8; 64]]| -> Result<(), Error> {
        let items: Vec<(&Verifier, &[u8], &[u8])> = (0..6)
            .map(|i| (&verifiers[i], msgs[i].as_slice(), sigs[i].as_slice()))
            .collect();
        signing::verify_batch(&items)
    };
    items(&sigs).unwrap();
    signing::verify_batch(&[]).unwrap();

    sigs[3][10] ^= 0x04;
    assert_eq!(
        items(&sigs),
        Err(Error::BadSignature {
            key: verifiers[3].key_ref(),
            index: Some(3)
        })
    );

    // A signature by the wrong key (item 4 signed by key 5).
    sigs[3][10] ^= 0x04;
    sigs[4] = signers[5].sign(&msgs[4]);
    let err = items(&sigs).unwrap_err();
    assert!(matches!(err, Error::BadSignature { index: Some(4), .. }));
    assert!(err.to_string().contains("batch item 4"), "{err}");

    // A malformed signature is reported by index before any crypto.
    let short = [0u8; 10];
    let res = signing::verify_batch(&[
        (&verifiers[0], &msgs[0][..], &sigs[0][..]),
        (&verifiers[1], &msgs[1][..], &short[..]),
    ]);
    assert!(matches!(
        res,
        Err(Error::MalformedSignature { index: Some(1), .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sign_verify_any_payload(
        payload in proptest::collection::vec(any::<u8>(), 0..512),
        payload_type in "[a-z/.+-]{1,60}",
        seed in any::<[u8; 32]>(),
        flip in any::<usize>(),
    ) {
        let s = Signer::from_signing_key("k.example", ed25519_dalek::SigningKey::from_bytes(&seed)).unwrap();
        let sig = signing::sign(&s, &payload_type, &payload);
        prop_assert!(signing::verify(&s.verifier(), &payload_type, &payload, &sig).is_ok());
        let mut bad = sig.signature.to_vec();
        let bit = flip % (64 * 8);
        bad[bit / 8] ^= 1 << (bit % 8);
        let mut bad_sig = sig.clone();
        bad_sig.signature = Bytes::from(bad);
        prop_assert!(signing::verify(&s.verifier(), &payload_type, &payload, &bad_sig).is_err());
    }
}
