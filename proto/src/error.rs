//! The crate's one error type.
//!
//! Every parser and verifier in `accord-proto` returns [`Error`]. Variants carry machine-readable
//! detail (a stable `reason` string, the key that failed, the index of a bad batch item) so that
//! callers can map them to gRPC status codes or CLI exit codes without parsing messages. No
//! function in this crate panics on untrusted input.

use std::fmt;

use crate::note::KeyKind;

/// A key identity in signed-note form, `name+hex(keyid)`, as used in error messages by Go's
/// `golang.org/x/mod/sumdb/note` (e.g. `ambiguous key EnochRoot+af0cfe78`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyRef {
    /// The key name.
    pub name: String,
    /// The 4-byte key ID.
    pub key_id: [u8; 4],
}

impl KeyRef {
    /// A key reference from its name and ID.
    pub fn new(name: impl Into<String>, key_id: [u8; 4]) -> Self {
        KeyRef {
            name: name.into(),
            key_id,
        }
    }
}

impl fmt::Display for KeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{}", self.name, hex::encode(self.key_id))
    }
}

/// Everything that can go wrong in `accord-proto`.
///
/// The `reason` fields are short, stable, lower-case phrases (never formatted from input), so they
/// may be used as machine-readable codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key name violates c2sp.org/signed-note: it must be non-empty and contain neither Unicode
    /// whitespace nor `+`.
    #[error("invalid key name {name:?}: {reason}")]
    InvalidKeyName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A private (`PRIVATE+KEY+...`) or public (vkey) key string could not be parsed.
    #[error("malformed key: {reason}")]
    MalformedKey {
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A key's signature-type byte is not one this crate supports (0x01 Ed25519, 0x04
    /// Ed25519 cosignature/v1), or not the one the context requires.
    #[error("unsupported key type 0x{key_type:02x}")]
    UnsupportedKeyType {
        /// The type byte found.
        key_type: u8,
    },

    /// The key ID written in a key string is not the one its name, type and key hash to
    /// (c2sp.org/signed-note: `SHA-256(name || 0x0A || type || key)[:4]`).
    #[error("key id mismatch for key {name:?}: text says {stated}, key hashes to {computed}", stated = hex::encode(.stated), computed = hex::encode(.computed))]
    KeyIdMismatch {
        /// The key name.
        name: String,
        /// The key ID written in the text.
        stated: [u8; 4],
        /// The key ID computed from the key.
        computed: [u8; 4],
    },

    /// A key of the wrong kind was used, e.g. a cosignature/v1 key to verify a record signature.
    #[error("key {key} is a {actual:?} key; {expected:?} required")]
    WrongKeyKind {
        /// The key.
        key: KeyRef,
        /// The kind the operation needs.
        expected: KeyKind,
        /// The kind the key has.
        actual: KeyKind,
    },

    /// A signature names a different key (name or key ID) than the verifier it was checked with.
    #[error("signature is by key {signed_by}, not by {expected}")]
    KeyMismatch {
        /// The key named by the signature.
        signed_by: KeyRef,
        /// The verifier's key.
        expected: KeyRef,
    },

    /// A signature is well-formed but does not verify under its key. In a batch, `index` is the
    /// position of the first bad item.
    #[error("invalid signature for key {key}{}", .index.map(|i| format!(" (batch item {i})")).unwrap_or_default())]
    BadSignature {
        /// The key the signature claims.
        key: KeyRef,
        /// The item's position in a batch, if the check was a batch.
        index: Option<usize>,
    },

    /// A signature has the wrong shape (e.g. not 64 bytes for Ed25519).
    #[error("malformed signature{}: {reason}", .index.map(|i| format!(" (batch item {i})")).unwrap_or_default())]
    MalformedSignature {
        /// Why it was rejected.
        reason: &'static str,
        /// The item's position in a batch, if the check was a batch.
        index: Option<usize>,
    },

    /// A signed note violates c2sp.org/signed-note's format.
    #[error("malformed note: {reason}")]
    MalformedNote {
        /// Why it was rejected.
        reason: &'static str,
    },

    /// No signature on a note is by a known key that verified (c2sp.org/signed-note: "If no
    /// signature from a known key verifies successfully, clients MUST reject the note").
    #[error("note has no verifiable signatures")]
    UnverifiedNote,

    /// Two configured verifiers share a key name and key ID, so a signature by that identity
    /// cannot be attributed.
    #[error("ambiguous key {key}")]
    AmbiguousKey {
        /// The shared identity.
        key: KeyRef,
    },

    /// A required signature is absent from a note (e.g. a checkpoint without its log's
    /// signature, though cosigned).
    #[error("note is not signed by {key}")]
    MissingSignature {
        /// The key whose signature is required.
        key: KeyRef,
    },

    /// A checkpoint body violates c2sp.org/tlog-checkpoint.
    #[error("malformed checkpoint: {reason}")]
    MalformedCheckpoint {
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A checkpoint's origin is not the one expected (e.g. the log key's name).
    #[error("checkpoint origin {found:?} is not {expected:?}")]
    OriginMismatch {
        /// The origin required.
        expected: String,
        /// The origin found.
        found: String,
    },

    /// A cosignature line or its payload violates c2sp.org/tlog-cosignature.
    #[error("malformed cosignature: {reason}")]
    MalformedCosignature {
        /// Why it was rejected.
        reason: &'static str,
    },

    /// An inclusion or consistency proof does not verify (RFC 9162 §2.1.3.2 / §2.1.4.2).
    #[error("proof invalid: {reason}")]
    ProofInvalid {
        /// Why it failed.
        reason: &'static str,
    },

    /// A proof or root was requested for indices or sizes that do not exist (e.g. a leaf index
    /// not below the tree size, or size1 > size2).
    #[error("invalid tree range: {reason} (index/size1 {first}, size/size2 {second})")]
    InvalidRange {
        /// Why the request is invalid.
        reason: &'static str,
        /// The leaf index or first size.
        first: u64,
        /// The tree size or second size.
        second: u64,
    },

    /// A [`crate::merkle::NodeSource`] does not hold a subtree hash it was asked for.
    #[error("merkle node (level {level}, index {index}) is not available")]
    NodeUnavailable {
        /// The subtree's level (0 = leaf).
        level: u32,
        /// The subtree's index at that level.
        index: u64,
    },

    /// A [`crate::merkle::NodeSource`] backed by storage failed; `message` is the storage layer's.
    #[error("merkle node storage: {message}")]
    Storage {
        /// The storage layer's description.
        message: String,
    },
}
