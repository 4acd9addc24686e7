//! DSSE-style signing of records, envelopes and receipts (DESIGN.md, "Records and signing";
//! the pre-authentication encoding of the DSSE v1 protocol, github.com/secure-systems-lab/dsse).
//!
//! A signature covers `PAE(payload_type, payload)` over the exact payload bytes carried on the
//! wire, so a verifier checks the bytes it received before decoding them, and nothing is ever
//! re-encoded to check a signature. A record's id is `SHA-256(PAE)`: the payload type is bound
//! into the id, so equal bytes under different types are different objects.

use ed25519_dalek::Signature as EdSignature;
use prost::Message as _;
use prost::bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::error::{Error, KeyRef};
use crate::note::{KeyKind, Signer, Verifier};
use crate::pb::record::v1 as pb;

/// The payload type of an encoded `accord.record.v1.Record` that is not a typed Declaration (and of
/// every record signed before typed Declarations: see [`crate::declaration`]).
pub const RECORD_PAYLOAD_TYPE: &str = "application/vnd.accord.record.v1+protobuf";
/// The payload type of an encoded federation envelope.
pub const ENVELOPE_PAYLOAD_TYPE: &str = "application/vnd.accord.envelope.v1+protobuf";
/// The payload type of an encoded federation receipt.
pub const RECEIPT_PAYLOAD_TYPE: &str = "application/vnd.accord.receipt.v1+protobuf";
/// The payload type of an encoded `ReceiptBatch`: what the receiver signs once for a batch of
/// receipts (issue 14; see `accord.federation.v1.Receipt`).
pub const RECEIPT_BATCH_PAYLOAD_TYPE: &str = "application/vnd.accord.receipt-batch.v1+protobuf";

/// A record id: `SHA-256(PAE(payload_type, payload))`.
pub type RecordId = [u8; 32];

/// The DSSE v1 pre-authentication encoding:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload`, lengths in bytes as ASCII
/// decimal without leading zeros.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let head = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    );
    let mut out = Vec::with_capacity(head.len() + payload.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The id of a signed object: `SHA-256(PAE(payload_type, payload))`.
pub fn record_id(payload_type: &str, payload: &[u8]) -> RecordId {
    Sha256::digest(pae(payload_type, payload)).into()
}

/// Signs `PAE(payload_type, payload)` with `signer`; the signature carries the key's signed-note
/// name and 4-byte key ID so verifiers can pick the key.
pub fn sign(signer: &Signer, payload_type: &str, payload: &[u8]) -> pb::Signature {
    let sig = signer.sign(&pae(payload_type, payload));
    pb::Signature {
        key_name: signer.name().to_owned(),
        key_id: Bytes::copy_from_slice(&signer.key_id()),
        signature: Bytes::copy_from_slice(&sig),
    }
}

/// Encodes `record` with prost and signs the bytes under its payload type: its typed
/// Declaration type (`https://suiss.app/ns/work/declaration/<wire name>`, seed 000) or
/// [`RECORD_PAYLOAD_TYPE`] for Claims, run and envelope records
/// ([`crate::declaration::payload_type`]). The returned payload is the exact signed byte string;
/// it is what must be stored and sent.
pub fn sign_record(signer: &Signer, record: &pb::Record) -> pb::SignedRecord {
    let payload = record.encode_to_vec();
    let payload_type = crate::declaration::payload_type(record);
    let signature = sign(signer, &payload_type, &payload);
    pb::SignedRecord {
        payload: Bytes::from(payload),
        payload_type,
        signatures: vec![signature],
    }
}

/// Verifies one signature over `PAE(payload_type, payload)`: the signature's key name and key ID
/// must be the verifier's ([`Error::KeyMismatch`]), the verifier must be an Ed25519 (type 0x01)
/// key ([`Error::WrongKeyKind`]), and the signature must be 64 bytes and valid.
pub fn verify(
    verifier: &Verifier,
    payload_type: &str,
    payload: &[u8],
    sig: &pb::Signature,
) -> Result<(), Error> {
    let signed_by = signature_key(sig)?;
    if signed_by.name != verifier.name() || signed_by.key_id != verifier.key_id() {
        return Err(Error::KeyMismatch {
            signed_by,
            expected: verifier.key_ref(),
        });
    }
    check_kind(verifier)?;
    let sig_bytes = parse_signature(&sig.signature, None)?;
    if verifier.verify(&pae(payload_type, payload), &sig_bytes.to_bytes()) {
        Ok(())
    } else {
        Err(Error::BadSignature {
            key: signed_by,
            index: None,
        })
    }
}

/// The (name, key ID) a wire signature claims.
pub fn signature_key(sig: &pb::Signature) -> Result<KeyRef, Error> {
    let key_id: [u8; 4] =
        sig.key_id
            .as_ref()
            .try_into()
            .map_err(|_| Error::MalformedSignature {
                reason: "key id is not 4 bytes",
                index: None,
            })?;
    Ok(KeyRef::new(sig.key_name.clone(), key_id))
}

fn check_kind(verifier: &Verifier) -> Result<(), Error> {
    if verifier.kind() == KeyKind::Ed25519 {
        Ok(())
    } else {
        Err(Error::WrongKeyKind {
            key: verifier.key_ref(),
            expected: KeyKind::Ed25519,
            actual: verifier.kind(),
        })
    }
}

fn parse_signature(sig: &[u8], index: Option<usize>) -> Result<EdSignature, Error> {
    EdSignature::from_slice(sig).map_err(|_| Error::MalformedSignature {
        reason: "Ed25519 signature is not 64 bytes",
        index,
    })
}

/// Verifies many Ed25519 signatures at once with `ed25519_dalek::verify_batch`; each item is
/// (verifier, message, signature) where the message is the already-built PAE bytes.
///
/// When the batch fails, each item is checked alone so the error names the first bad one
/// ([`Error::BadSignature`] with its index and key). The batch equation is the same
/// cofactorless one as single verification, combined with random 128-bit weights, so a batch
/// of signatures that each verify always passes.
pub fn verify_batch(items: &[(&Verifier, &[u8], &[u8])]) -> Result<(), Error> {
    let mut messages = Vec::with_capacity(items.len());
    let mut signatures = Vec::with_capacity(items.len());
    let mut keys = Vec::with_capacity(items.len());
    for (i, (v, msg, sig)) in items.iter().enumerate() {
        check_kind(v)?;
        signatures.push(parse_signature(sig, Some(i))?);
        messages.push(*msg);
        // check_kind admitted only Ed25519 keys, which always have one.
        let Some(key) = v.verifying_key() else {
            return Err(Error::WrongKeyKind {
                key: v.key_ref(),
                expected: KeyKind::Ed25519,
                actual: v.kind(),
            });
        };
        keys.push(*key);
    }
    if items.is_empty() || ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok() {
        return Ok(());
    }
    for (i, (v, msg, sig)) in items.iter().enumerate() {
        if !v.verify(msg, sig) {
            return Err(Error::BadSignature {
                key: v.key_ref(),
                index: Some(i),
            });
        }
    }
    // Unreachable in theory (see above); never report success for a failed batch.
    Err(Error::BadSignature {
        key: items[0].0.key_ref(),
        index: None,
    })
}
