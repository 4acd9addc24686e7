//! Witness cosignatures (c2sp.org/tlog-cosignature): a [`Cosigner`] holds an Ed25519 key
//! (`cosignature/v1`, type 0x04) or an ML-DSA-44 key (`subtree/v1`, type 0x06).
//!
//! A cosignature line's payload is `key ID(4) || timestamped_signature`, where
//! `timestamped_signature` is `u64be timestamp || signature` (64 bytes Ed25519, 2,420 bytes
//! ML-DSA-44). The signed messages differ:
//!
//! - Ed25519: `"cosignature/v1\ntime <t>\n" || checkpoint text` ("Ed25519 signed message");
//! - ML-DSA-44: the `cosigned_message` structure ("ML-DSA-44 signed message"),
//!   `"subtree/v1\n\0" || u8 len || cosigner name || u64 timestamp || u8 len || origin ||
//!   u64 start || u64 end || hash[32]`, which names the cosigner, covers only origin, size and
//!   root (no extension lines), and can sign a subtree `[start, end)` (then timestamp 0).

use crate::error::Error;
use crate::merkle::Hash;
use crate::note::key::KeyPair;
use crate::note::mldsa::{MlDsa44Pair, SIGNATURE_LEN};
use crate::note::{KeyKind, NoteSignature, Signer, Verifier};

use super::Checkpoint;

/// The message an Ed25519 cosignature/v1 signs: `"cosignature/v1\ntime <t>\n" || body`
/// (c2sp.org/tlog-cosignature, "Ed25519 signed message").
pub fn cosignature_message(body: &str, timestamp: u64) -> Vec<u8> {
    format!("cosignature/v1\ntime {timestamp}\n{body}").into_bytes()
}

/// The `subtree/v1` label of a `cosigned_message`: 12 bytes.
const SUBTREE_LABEL: &[u8; 12] = b"subtree/v1\n\0";

/// The `cosigned_message` an ML-DSA-44 cosignature signs (c2sp.org/tlog-cosignature, "ML-DSA-44
/// signed message"), in RFC 8446 §3 presentation encoding. The cosigner name and the origin must
/// be 1 to 255 bytes; a subtree with `start > 0` must have timestamp 0 (the spec: "If `start`
/// is not zero, these values MUST be zero").
pub fn cosigned_message(
    cosigner_name: &str,
    timestamp: u64,
    origin: &str,
    start: u64,
    end: u64,
    hash: &Hash,
) -> Result<Vec<u8>, Error> {
    let short = |s: &str| (1..=255).contains(&s.len());
    if !short(cosigner_name) || !short(origin) {
        return Err(Error::MalformedCosignature {
            reason: "cosigner name and origin must be 1 to 255 bytes",
        });
    }
    if start != 0 && timestamp != 0 {
        return Err(Error::MalformedCosignature {
            reason: "a subtree cosignature with start > 0 must have timestamp 0",
        });
    }
    if start > end {
        return Err(Error::MalformedCosignature {
            reason: "subtree start is after its end",
        });
    }
    let mut m = Vec::with_capacity(12 + 2 + cosigner_name.len() + origin.len() + 24 + 32);
    m.extend_from_slice(SUBTREE_LABEL);
    m.push(cosigner_name.len() as u8);
    m.extend_from_slice(cosigner_name.as_bytes());
    m.extend_from_slice(&timestamp.to_be_bytes());
    m.push(origin.len() as u8);
    m.extend_from_slice(origin.as_bytes());
    m.extend_from_slice(&start.to_be_bytes());
    m.extend_from_slice(&end.to_be_bytes());
    m.extend_from_slice(hash);
    Ok(m)
}

/// The spec's bound on cosignature timestamps: they MUST NOT exceed 2^63 - 1.
const MAX_TIMESTAMP: u64 = i64::MAX as u64;

#[derive(Clone, Debug)]
enum CosignerKey {
    Ed25519(KeyPair),
    MlDsa44(MlDsa44Pair),
}

/// A witness cosigning key: Ed25519 (type 0x04, `cosignature/v1`) or ML-DSA-44 (type 0x06,
/// `subtree/v1`), c2sp.org/tlog-cosignature.
///
/// Its skey is `PRIVATE+KEY+<name>+<hex key ID>+base64(type || 32-byte seed)`. `Debug` never
/// prints the key.
#[derive(Clone, Debug)]
pub struct Cosigner(CosignerKey);

impl Cosigner {
    /// Generates a new Ed25519 (type 0x04) cosigner key named `name`.
    pub fn generate(
        name: &str,
        rng: &mut (impl rand::RngCore + rand::CryptoRng),
    ) -> Result<Cosigner, Error> {
        KeyPair::generate(name, KeyKind::CosignatureV1, rng)
            .map(|k| Cosigner(CosignerKey::Ed25519(k)))
    }

    /// Generates a new ML-DSA-44 (type 0x06) cosigner key named `name`.
    pub fn generate_ml_dsa_44(
        name: &str,
        rng: &mut (impl rand::RngCore + rand::CryptoRng),
    ) -> Result<Cosigner, Error> {
        MlDsa44Pair::generate(name, rng).map(|k| Cosigner(CosignerKey::MlDsa44(k)))
    }

    /// The ML-DSA-44 cosigner derived from a 32-byte FIPS 204 seed ξ (for test vectors).
    pub fn ml_dsa_44_from_seed(name: &str, seed: &[u8; 32]) -> Result<Cosigner, Error> {
        MlDsa44Pair::from_seed(name, seed).map(|k| Cosigner(CosignerKey::MlDsa44(k)))
    }

    /// An Ed25519 cosigner with the same name and key as a note signer (the key ID differs, as
    /// the type byte is 0x04). The spec allows reusing a key across signature types.
    pub fn from_signer(signer: &Signer) -> Cosigner {
        // The name was validated when the Signer was built.
        Cosigner(CosignerKey::Ed25519(KeyPair::from_parts_unchecked(
            signer.name(),
            KeyKind::CosignatureV1,
            signer.signing_key().clone(),
        )))
    }

    /// Parses `PRIVATE+KEY+<name>+<hex key ID>+base64(type || seed)` with type 0x04 (Ed25519)
    /// or 0x06 (ML-DSA-44), checking the key ID. A trailing newline is tolerated.
    pub fn from_skey(text: &str) -> Result<Cosigner, Error> {
        let parts: Vec<&str> = text.trim_end_matches('\n').splitn(5, '+').collect();
        if let [_, _, name, id, material] = parts[..]
            && let Ok((KeyKind::MlDsa44, seed)) = crate::note::key::parse_key_material_any(material)
        {
            if parts[0] != "PRIVATE" || parts[1] != "KEY" {
                return Err(Error::MalformedKey {
                    reason: "private key does not start with PRIVATE+KEY+",
                });
            }
            crate::note::check_key_name(name)?;
            let stated = crate::note::key::parse_key_id(id)?;
            return MlDsa44Pair::from_skey_parts(name, stated, &seed)
                .map(|k| Cosigner(CosignerKey::MlDsa44(k)));
        }
        KeyPair::from_skey(text, KeyKind::CosignatureV1).map(|k| Cosigner(CosignerKey::Ed25519(k)))
    }

    /// The private key text. Treat it as a secret.
    pub fn to_skey(&self) -> String {
        match &self.0 {
            CosignerKey::Ed25519(k) => k.to_skey(),
            CosignerKey::MlDsa44(k) => k.to_skey(),
        }
    }

    /// The cosigner name.
    pub fn name(&self) -> &str {
        match &self.0 {
            CosignerKey::Ed25519(k) => k.name(),
            CosignerKey::MlDsa44(k) => k.verifier().name(),
        }
    }

    /// The 4-byte key ID (type 0x04 or 0x06).
    pub fn key_id(&self) -> [u8; 4] {
        match &self.0 {
            CosignerKey::Ed25519(k) => k.key_id(),
            CosignerKey::MlDsa44(k) => k.verifier().key_id(),
        }
    }

    /// The key's kind: [`KeyKind::CosignatureV1`] or [`KeyKind::MlDsa44`].
    pub fn kind(&self) -> KeyKind {
        match &self.0 {
            CosignerKey::Ed25519(_) => KeyKind::CosignatureV1,
            CosignerKey::MlDsa44(_) => KeyKind::MlDsa44,
        }
    }

    /// The public key; `to_vkey()` gives its vkey text.
    pub fn verifier(&self) -> Verifier {
        match &self.0 {
            CosignerKey::Ed25519(k) => k.verifier(),
            CosignerKey::MlDsa44(k) => k.verifier().clone(),
        }
    }

    /// Cosigns a checkpoint body (the note text, which must parse as a checkpoint) at
    /// `timestamp` (POSIX seconds, at most 2^63 - 1). An ML-DSA-44 key signs the subtree
    /// `[0, size)` with that timestamp. The result's [`to_line`](NoteSignature::to_line) is the
    /// signature line to append to the note.
    pub fn cosign(&self, body: &str, timestamp: u64) -> Result<NoteSignature, Error> {
        let cp = Checkpoint::parse(body)?;
        if timestamp > MAX_TIMESTAMP {
            return Err(Error::MalformedCosignature {
                reason: "timestamp exceeds 2^63 - 1",
            });
        }
        let sig = match &self.0 {
            CosignerKey::Ed25519(k) => k.sign(&cosignature_message(body, timestamp)).to_vec(),
            CosignerKey::MlDsa44(k) => k.sign(&cosigned_message(
                self.name(),
                timestamp,
                &cp.origin,
                0,
                cp.size,
                &cp.root,
            )?)?,
        };
        Ok(self.line(timestamp, &sig))
    }

    /// Cosigns the subtree `[start, end)` with hash `hash` of the log `origin`, timestamp 0
    /// (c2sp.org/tlog-witness "sign-subtree": "the timestamp MUST be zero"). Only an ML-DSA-44
    /// key can: the Ed25519 format does not support subtrees. The caller checks that the range
    /// is a valid subtree and consistent with a checkpoint it co-signed.
    pub fn cosign_subtree(
        &self,
        origin: &str,
        start: u64,
        end: u64,
        hash: &Hash,
    ) -> Result<NoteSignature, Error> {
        let CosignerKey::MlDsa44(k) = &self.0 else {
            return Err(Error::WrongKeyKind {
                key: self.verifier().key_ref(),
                expected: KeyKind::MlDsa44,
                actual: self.kind(),
            });
        };
        let sig = k.sign(&cosigned_message(self.name(), 0, origin, start, end, hash)?)?;
        Ok(self.line(0, &sig))
    }

    fn line(&self, timestamp: u64, sig: &[u8]) -> NoteSignature {
        let mut payload = Vec::with_capacity(8 + sig.len());
        payload.extend_from_slice(&timestamp.to_be_bytes());
        payload.extend_from_slice(sig);
        NoteSignature {
            name: self.name().to_owned(),
            key_id: self.key_id(),
            signature: payload,
        }
    }
}

/// Splits a cosignature payload into the timestamp and the signature of the expected length.
fn split_payload(sig: &NoteSignature, sig_len: usize) -> Result<(u64, &[u8]), Error> {
    let bad = Error::MalformedCosignature {
        reason: "payload is not timestamp(8) || signature of the key's type",
    };
    let Some((ts, rest)) = sig.signature.split_first_chunk::<8>() else {
        return Err(bad);
    };
    if rest.len() != sig_len {
        return Err(bad);
    }
    let timestamp = u64::from_be_bytes(*ts);
    if timestamp > MAX_TIMESTAMP {
        return Err(Error::MalformedCosignature {
            reason: "timestamp exceeds 2^63 - 1",
        });
    }
    Ok((timestamp, rest))
}

fn check_identity(verifier: &Verifier, sig: &NoteSignature) -> Result<(), Error> {
    if verifier.name() != sig.name || verifier.key_id() != sig.key_id {
        return Err(Error::KeyMismatch {
            signed_by: sig.key_ref(),
            expected: verifier.key_ref(),
        });
    }
    Ok(())
}

/// Verifies a cosignature line on `body` (the cosigned checkpoint text) and returns its
/// timestamp. The verifier must be a cosigner key (type 0x04 or 0x06) whose name and key ID
/// match the line; an ML-DSA-44 cosignature is checked as the subtree `[0, size)` of the
/// checkpoint.
pub fn verify_cosignature(
    verifier: &Verifier,
    body: &str,
    sig: &NoteSignature,
) -> Result<u64, Error> {
    match verifier.kind() {
        KeyKind::CosignatureV1 => {
            check_identity(verifier, sig)?;
            let (timestamp, ed_sig) = split_payload(sig, 64)?;
            if verifier.verify(&cosignature_message(body, timestamp), ed_sig) {
                Ok(timestamp)
            } else {
                Err(Error::BadSignature {
                    key: sig.key_ref(),
                    index: None,
                })
            }
        }
        KeyKind::MlDsa44 => {
            let cp = Checkpoint::parse(body)?;
            verify_subtree_cosignature(verifier, &cp.origin, 0, cp.size, &cp.root, sig)
        }
        actual => Err(Error::WrongKeyKind {
            key: verifier.key_ref(),
            expected: KeyKind::CosignatureV1,
            actual,
        }),
    }
}

/// Verifies an ML-DSA-44 `subtree/v1` cosignature on the subtree `[start, end)` with hash
/// `hash` of the log `origin`, and returns its timestamp (0 for a subtree with `start > 0`, as
/// the spec requires).
pub fn verify_subtree_cosignature(
    verifier: &Verifier,
    origin: &str,
    start: u64,
    end: u64,
    hash: &Hash,
    sig: &NoteSignature,
) -> Result<u64, Error> {
    if verifier.kind() != KeyKind::MlDsa44 {
        return Err(Error::WrongKeyKind {
            key: verifier.key_ref(),
            expected: KeyKind::MlDsa44,
            actual: verifier.kind(),
        });
    }
    check_identity(verifier, sig)?;
    let (timestamp, ml_sig) = split_payload(sig, SIGNATURE_LEN)?;
    let msg = cosigned_message(verifier.name(), timestamp, origin, start, end, hash)?;
    if verifier.verify(&msg, ml_sig) {
        Ok(timestamp)
    } else {
        Err(Error::BadSignature {
            key: sig.key_ref(),
            index: None,
        })
    }
}
