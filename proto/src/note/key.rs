//! Ed25519 keys in C2SP signed-note text form (c2sp.org/signed-note, and the key encodings of
//! Go's `golang.org/x/mod/sumdb/note`):
//!
//! - verifier key (vkey): `<name>+<hex key ID>+base64(type || 32-byte public key)`
//! - signer key (skey):   `PRIVATE+KEY+<name>+<hex key ID>+base64(type || 32-byte seed)`
//! - key ID:              `SHA-256(name || 0x0A || type || public key)[:4]`
//!
//! Type 0x01 is a plain Ed25519 note signature; type 0x04 is an Ed25519 tlog-cosignature/v1
//! key (c2sp.org/tlog-cosignature), whose signatures are timestamped and cover a different message;
//! type 0x06 is an ML-DSA-44 (FIPS 204) cosigner key, whose vkey carries the 1,312-byte public key
//! and whose signatures cover the `subtree/v1` `cosigned_message` ([`super::mldsa`]).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer as _, SigningKey, Verifier as _, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::error::{Error, KeyRef};

/// The signature type a key is for (c2sp.org/signed-note "Signature types").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// Type 0x01: Ed25519 signatures over the note text.
    Ed25519,
    /// Type 0x04: timestamped Ed25519 witness cosignatures (c2sp.org/tlog-cosignature).
    CosignatureV1,
    /// Type 0x06: ML-DSA-44 witness cosignatures over the `subtree/v1` `cosigned_message`
    /// (c2sp.org/tlog-cosignature, "ML-DSA-44 signed message").
    MlDsa44,
}

impl KeyKind {
    /// The signature type identifier byte.
    pub fn type_byte(self) -> u8 {
        match self {
            KeyKind::Ed25519 => 0x01,
            KeyKind::CosignatureV1 => 0x04,
            KeyKind::MlDsa44 => 0x06,
        }
    }

    /// Whether this is a witness cosignature key (type 0x04 or 0x06), whose signatures carry a
    /// timestamp.
    pub fn is_cosignature(self) -> bool {
        matches!(self, KeyKind::CosignatureV1 | KeyKind::MlDsa44)
    }

    /// The kind for a signature type byte; other types are not supported by this crate.
    pub fn from_type_byte(key_type: u8) -> Result<KeyKind, Error> {
        match key_type {
            0x01 => Ok(KeyKind::Ed25519),
            0x04 => Ok(KeyKind::CosignatureV1),
            0x06 => Ok(KeyKind::MlDsa44),
            _ => Err(Error::UnsupportedKeyType { key_type }),
        }
    }
}

/// The C2SP key ID: `SHA-256(name || 0x0A || key_type || public_key)[:4]` (c2sp.org/signed-note,
/// "Signatures"; for cosignature keys c2sp.org/tlog-cosignature with type 0x04 and the 32-byte
/// Ed25519 key, or type 0x06 and the 1,312-byte ML-DSA-44 key).
pub fn key_id(name: &str, key_type: u8, public_key: &[u8]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', key_type]);
    h.update(public_key);
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

/// Checks a key name against c2sp.org/signed-note: "Key names MUST be non-empty and MUST NOT
/// contain any Unicode spaces or plus (U+002B) characters". (`&str` is already valid UTF-8.)
/// Rust's `char::is_whitespace` is the Unicode White_Space property, as Go's `unicode.IsSpace`.
pub fn check_key_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.contains('+') {
        "contains '+'"
    } else if name.chars().any(char::is_whitespace) {
        "contains whitespace"
    } else {
        return Ok(());
    };
    Err(Error::InvalidKeyName {
        name: name.to_owned(),
        reason,
    })
}

/// Whether `name` is a valid signed-note key name (see [`check_key_name`]).
pub fn is_valid_key_name(name: &str) -> bool {
    check_key_name(name).is_ok()
}

/// Parses the `<hex key ID>` field: exactly eight hex digits (Go accepts either case).
pub(crate) fn parse_key_id(text: &str) -> Result<[u8; 4], Error> {
    let mut id = [0u8; 4];
    if text.len() != 8 || hex::decode_to_slice(text, &mut id).is_err() {
        return Err(Error::MalformedKey {
            reason: "key id is not 8 hex digits",
        });
    }
    Ok(id)
}

/// Decodes `base64(type || key bytes)` into the kind and the key bytes, of any length (the
/// callers check the length their kind needs).
pub(crate) fn parse_key_material_any(text: &str) -> Result<(KeyKind, Vec<u8>), Error> {
    let raw = B64.decode(text).map_err(|_| Error::MalformedKey {
        reason: "key is not valid base64",
    })?;
    let (&key_type, rest) = raw.split_first().ok_or(Error::MalformedKey {
        reason: "key material is empty",
    })?;
    Ok((KeyKind::from_type_byte(key_type)?, rest.to_vec()))
}

/// Decodes `base64(type || 32 bytes)` into the kind and the 32 key bytes.
fn parse_key_material(text: &str) -> Result<(KeyKind, [u8; 32]), Error> {
    let raw = B64.decode(text).map_err(|_| Error::MalformedKey {
        reason: "key is not valid base64",
    })?;
    let (&key_type, rest) = raw.split_first().ok_or(Error::MalformedKey {
        reason: "key material is empty",
    })?;
    let kind = KeyKind::from_type_byte(key_type)?;
    let key: [u8; 32] = rest.try_into().map_err(|_| Error::MalformedKey {
        reason: "Ed25519 key is not 32 bytes",
    })?;
    Ok((kind, key))
}

pub(crate) fn encode_key_material(kind: KeyKind, key: &[u8]) -> String {
    let mut raw = Vec::with_capacity(1 + key.len());
    raw.push(kind.type_byte());
    raw.extend_from_slice(key);
    B64.encode(raw)
}

pub(crate) fn check_stated_id(name: &str, stated: [u8; 4], computed: [u8; 4]) -> Result<(), Error> {
    if stated == computed {
        Ok(())
    } else {
        Err(Error::KeyIdMismatch {
            name: name.to_owned(),
            stated,
            computed,
        })
    }
}

/// An Ed25519 private key with its name and kind; the common core of [`Signer`] and
/// [`crate::checkpoint::Cosigner`].
#[derive(Clone)]
pub(crate) struct KeyPair {
    name: String,
    kind: KeyKind,
    key: SigningKey,
    key_id: [u8; 4],
}

impl KeyPair {
    pub(crate) fn new(name: &str, kind: KeyKind, key: SigningKey) -> Result<KeyPair, Error> {
        check_key_name(name)?;
        let key_id = key_id(name, kind.type_byte(), key.verifying_key().as_bytes());
        Ok(KeyPair {
            name: name.to_owned(),
            kind,
            key,
            key_id,
        })
    }

    /// For a name already validated elsewhere (e.g. taken from another [`KeyPair`]).
    pub(crate) fn from_parts_unchecked(name: &str, kind: KeyKind, key: SigningKey) -> KeyPair {
        let key_id = key_id(name, kind.type_byte(), key.verifying_key().as_bytes());
        KeyPair {
            name: name.to_owned(),
            kind,
            key,
            key_id,
        }
    }

    pub(crate) fn generate(
        name: &str,
        kind: KeyKind,
        rng: &mut (impl rand::RngCore + rand::CryptoRng),
    ) -> Result<KeyPair, Error> {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let pair = KeyPair::new(name, kind, SigningKey::from_bytes(&seed));
        seed.fill(0);
        pair
    }

    /// Parses `PRIVATE+KEY+<name>+<hex key ID>+base64(type || seed)` and requires `kind`.
    pub(crate) fn from_skey(text: &str, kind: KeyKind) -> Result<KeyPair, Error> {
        // The name and key ID cannot contain '+'; the base64 key may, so split at most 5 ways.
        let parts: Vec<&str> = text.trim_end_matches('\n').splitn(5, '+').collect();
        let [private, key_word, name, id, material] = parts[..] else {
            return Err(Error::MalformedKey {
                reason: "private key needs 5 '+'-separated parts",
            });
        };
        if private != "PRIVATE" || key_word != "KEY" {
            return Err(Error::MalformedKey {
                reason: "private key does not start with PRIVATE+KEY+",
            });
        }
        check_key_name(name)?;
        let stated = parse_key_id(id)?;
        let (found, seed) = parse_key_material(material)?;
        if found != kind {
            return Err(Error::UnsupportedKeyType {
                key_type: found.type_byte(),
            });
        }
        let pair = KeyPair::new(name, kind, SigningKey::from_bytes(&seed))?;
        check_stated_id(name, stated, pair.key_id)?;
        Ok(pair)
    }

    pub(crate) fn to_skey(&self) -> String {
        format!(
            "PRIVATE+KEY+{}+{}+{}",
            self.name,
            hex::encode(self.key_id),
            encode_key_material(self.kind, self.key.as_bytes())
        )
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn key_id(&self) -> [u8; 4] {
        self.key_id
    }

    pub(crate) fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    pub(crate) fn verifier(&self) -> Verifier {
        Verifier {
            name: self.name.clone(),
            key_id: self.key_id,
            kind: self.kind,
            key: PublicKey::Ed25519(self.key.verifying_key()),
        }
    }

    pub(crate) fn sign(&self, msg: &[u8]) -> [u8; 64] {
        self.key.sign(msg).to_bytes()
    }
}

impl fmt::Debug for KeyPair {
    // Never print key material: only the public identity.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPair")
            .field(
                "key",
                &KeyRef::new(self.name.clone(), self.key_id).to_string(),
            )
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// An Ed25519 signing key (signature type 0x01) with its signed-note key name.
///
/// `Debug` prints only the name and key ID, never the key.
#[derive(Clone)]
pub struct Signer(KeyPair);

impl Signer {
    /// Generates a new key named `name` (validated per c2sp.org/signed-note).
    pub fn generate(
        name: &str,
        rng: &mut (impl rand::RngCore + rand::CryptoRng),
    ) -> Result<Signer, Error> {
        KeyPair::generate(name, KeyKind::Ed25519, rng).map(Signer)
    }

    /// A signer from an existing Ed25519 key.
    pub fn from_signing_key(name: &str, key: SigningKey) -> Result<Signer, Error> {
        KeyPair::new(name, KeyKind::Ed25519, key).map(Signer)
    }

    /// Parses a Go-format private key, `PRIVATE+KEY+<name>+<hex key ID>+base64(0x01 || seed)`,
    /// and checks that the key ID matches. A trailing newline is tolerated (key files).
    pub fn from_skey(text: &str) -> Result<Signer, Error> {
        KeyPair::from_skey(text, KeyKind::Ed25519).map(Signer)
    }

    /// The private key in Go `sumdb/note` text form. Treat the result as a secret.
    pub fn to_skey(&self) -> String {
        self.0.to_skey()
    }

    /// The key name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The 4-byte key ID (type 0x01).
    pub fn key_id(&self) -> [u8; 4] {
        self.0.key_id()
    }

    /// The matching public key.
    pub fn verifier(&self) -> Verifier {
        self.0.verifier()
    }

    /// The underlying Ed25519 key.
    pub fn signing_key(&self) -> &SigningKey {
        self.0.signing_key()
    }

    /// A plain RFC 8032 Ed25519 signature over `msg`.
    pub fn sign(&self, msg: &[u8]) -> [u8; 64] {
        self.0.sign(msg)
    }
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("key", &KeyRef::new(self.name(), self.key_id()).to_string())
            .finish_non_exhaustive()
    }
}

/// The public key material of a [`Verifier`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum PublicKey {
    Ed25519(VerifyingKey),
    MlDsa44(super::mldsa::MlDsa44Public),
}

/// A public key (Ed25519, or ML-DSA-44 for type 0x06 cosigners) with its signed-note name, key
/// ID and signature type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verifier {
    name: String,
    key_id: [u8; 4],
    kind: KeyKind,
    key: PublicKey,
}

impl Verifier {
    /// A verifier from a raw Ed25519 public key (e.g. one published as hex); the key ID is
    /// computed from `name`, `kind` and the key. `kind` must be an Ed25519 kind (0x01 or 0x04);
    /// for ML-DSA-44 use [`Verifier::new_ml_dsa_44`].
    pub fn new(name: &str, kind: KeyKind, key: VerifyingKey) -> Result<Verifier, Error> {
        check_key_name(name)?;
        if kind == KeyKind::MlDsa44 {
            return Err(Error::MalformedKey {
                reason: "an Ed25519 key cannot be a type 0x06 (ML-DSA-44) key",
            });
        }
        Ok(Verifier {
            name: name.to_owned(),
            key_id: key_id(name, kind.type_byte(), key.as_bytes()),
            kind,
            key: PublicKey::Ed25519(key),
        })
    }

    /// A type 0x06 verifier from a raw 1,312-byte ML-DSA-44 public key (FIPS 204 `pkEncode`).
    pub fn new_ml_dsa_44(name: &str, public_key: &[u8]) -> Result<Verifier, Error> {
        check_key_name(name)?;
        let key = super::mldsa::MlDsa44Public::from_bytes(public_key)?;
        Ok(Verifier {
            name: name.to_owned(),
            key_id: key_id(name, KeyKind::MlDsa44.type_byte(), public_key),
            kind: KeyKind::MlDsa44,
            key: PublicKey::MlDsa44(key),
        })
    }

    /// Parses a verifier key, `<name>+<hex key ID>+base64(type || public key)`, with type 0x01
    /// (Ed25519), 0x04 (Ed25519 cosignature/v1) or 0x06 (ML-DSA-44 cosigner, 1,312-byte key),
    /// and checks that the key ID matches.
    pub fn from_vkey(text: &str) -> Result<Verifier, Error> {
        let parts: Vec<&str> = text.trim_end_matches('\n').splitn(3, '+').collect();
        let [name, id, material] = parts[..] else {
            return Err(Error::MalformedKey {
                reason: "verifier key needs 3 '+'-separated parts",
            });
        };
        check_key_name(name)?;
        let stated = parse_key_id(id)?;
        let (kind, public) = parse_key_material_any(material)?;
        let v = if kind == KeyKind::MlDsa44 {
            Verifier::new_ml_dsa_44(name, &public)?
        } else {
            let public: [u8; 32] = public.try_into().map_err(|_| Error::MalformedKey {
                reason: "Ed25519 key is not 32 bytes",
            })?;
            let key = VerifyingKey::from_bytes(&public).map_err(|_| Error::MalformedKey {
                reason: "not a valid Ed25519 public key",
            })?;
            Verifier::new(name, kind, key)?
        };
        check_stated_id(name, stated, v.key_id)?;
        Ok(v)
    }

    /// The verifier key text form.
    pub fn to_vkey(&self) -> String {
        format!(
            "{}+{}+{}",
            self.name,
            hex::encode(self.key_id),
            encode_key_material(self.kind, self.public_key_bytes())
        )
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The 4-byte key ID.
    pub fn key_id(&self) -> [u8; 4] {
        self.key_id
    }

    /// The key's identity (`name+hex(keyid)`), for errors and display.
    pub fn key_ref(&self) -> KeyRef {
        KeyRef::new(self.name.clone(), self.key_id)
    }

    /// The signature type this key is for.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The Ed25519 public key; `None` for an ML-DSA-44 key.
    pub fn verifying_key(&self) -> Option<&ed25519_dalek::VerifyingKey> {
        match &self.key {
            PublicKey::Ed25519(k) => Some(k),
            PublicKey::MlDsa44(_) => None,
        }
    }

    /// The raw public key: 32 bytes (Ed25519) or 1,312 bytes (ML-DSA-44).
    pub fn public_key_bytes(&self) -> &[u8] {
        match &self.key {
            PublicKey::Ed25519(k) => k.as_bytes(),
            PublicKey::MlDsa44(k) => k.as_bytes(),
        }
    }

    /// Checks a raw signature over `msg`: RFC 8032 Ed25519 (the cofactorless check of Go's
    /// `crypto/ed25519`), or FIPS 204 ML-DSA-44 (pure, empty context) for a type 0x06 key. For a
    /// cosignature key, `msg` must already be the cosignature message; see
    /// [`crate::checkpoint::verify_cosignature`]. A `sig` of the wrong length is simply invalid.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        match &self.key {
            PublicKey::Ed25519(key) => {
                let Ok(sig) = ed25519_dalek::Signature::from_slice(sig) else {
                    return false;
                };
                key.verify(msg, &sig).is_ok()
            }
            PublicKey::MlDsa44(key) => key.verify(msg, sig),
        }
    }
}
