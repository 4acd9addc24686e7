//! Transparency-log checkpoints (c2sp.org/tlog-checkpoint) and witness cosignatures
//! (c2sp.org/tlog-cosignature: Ed25519 `cosignature/v1` and ML-DSA-44 `subtree/v1`; see
//! [`Cosigner`]).
//!
//! A checkpoint is a signed note whose text is
//!
//! ```text
//! <origin>
//! <tree size, decimal, no leading zeros>
//! <base64 RFC 6962 root hash>
//! [extension lines]
//! ```
//!
//! signed by the log's key, whose name is the origin. A cosignature is one more signature line,
//! by a type 0x04 key, whose payload is `key ID(4) || u64be timestamp || Ed25519 sig(64)` and
//! whose signed message is `"cosignature/v1\ntime <t>\n" || checkpoint text`.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::error::{Error, KeyRef};
use crate::note::{self, Note, OpenedNote, Signer, Verifier};

mod cosign;
pub use cosign::{
    Cosigner, cosignature_message, cosigned_message, verify_cosignature, verify_subtree_cosignature,
};

/// A checkpoint: the note text of a signed tree head.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// The log's unique identity, e.g. `example.com/log42`.
    pub origin: String,
    /// The number of leaves in the tree.
    pub size: u64,
    /// The RFC 6962 Merkle tree hash at `size`.
    pub root: [u8; 32],
    /// Opaque, non-empty extension lines (without newlines); NOT RECOMMENDED by the spec.
    pub extensions: Vec<String>,
}

fn malformed(reason: &'static str) -> Error {
    Error::MalformedCheckpoint { reason }
}

impl Checkpoint {
    /// A checkpoint without extension lines.
    pub fn new(origin: impl Into<String>, size: u64, root: [u8; 32]) -> Checkpoint {
        Checkpoint {
            origin: origin.into(),
            size,
            root,
            extensions: Vec::new(),
        }
    }

    /// Parses a checkpoint note text (the body, ending in a newline, without signatures):
    /// at least three lines, all non-empty; a decimal size without leading zeros that fits in
    /// 64 bits; a root that is the canonical base64 of 32 bytes.
    pub fn parse(body: &str) -> Result<Checkpoint, Error> {
        note::check_text(body).map_err(|_| malformed("not a valid note text"))?;
        let body = body.strip_suffix('\n').unwrap_or(body);
        let lines: Vec<&str> = body.split('\n').collect();
        let [origin, size, root, extensions @ ..] = &lines[..] else {
            return Err(malformed("fewer than three lines"));
        };
        if origin.is_empty() {
            return Err(malformed("empty origin"));
        }
        let size = parse_decimal(size).ok_or(malformed("tree size is not canonical decimal"))?;
        let root: [u8; 32] = B64
            .decode(root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or(malformed("root hash is not base64 of 32 bytes"))?;
        if extensions.iter().any(|l| l.is_empty()) {
            return Err(malformed("empty extension line"));
        }
        Ok(Checkpoint {
            origin: (*origin).to_owned(),
            size,
            root,
            extensions: extensions.iter().map(|l| (*l).to_owned()).collect(),
        })
    }

    /// Checks that the fields can be written as a checkpoint text that parses back to them.
    pub fn validate(&self) -> Result<(), Error> {
        let bad_line = |l: &str| l.is_empty() || l.chars().any(|c| c < ' ');
        if bad_line(&self.origin) {
            return Err(malformed("origin is empty or contains a control character"));
        }
        if self.extensions.iter().any(|l| bad_line(l)) {
            return Err(malformed(
                "extension line is empty or contains a control character",
            ));
        }
        Ok(())
    }

    /// The checkpoint note text, ending in a newline.
    pub fn to_body(&self) -> Result<String, Error> {
        self.validate()?;
        Ok(self.to_string())
    }

    /// Signs the checkpoint as a note with the log key. The key name must be the origin
    /// (c2sp.org/tlog-checkpoint: "The log's key name in its signature line SHOULD match the
    /// origin line"; Accord makes it a rule so a vkey names the log it is for).
    pub fn sign(&self, log: &Signer) -> Result<String, Error> {
        if log.name() != self.origin {
            return Err(Error::OriginMismatch {
                expected: log.name().to_owned(),
                found: self.origin.clone(),
            });
        }
        note::sign_note(&self.to_body()?, &[log])
    }
}

impl fmt::Display for Checkpoint {
    /// Writes the note text. Use [`Checkpoint::to_body`] to have the fields validated first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.origin)?;
        writeln!(f, "{}", self.size)?;
        writeln!(f, "{}", B64.encode(self.root))?;
        for e in &self.extensions {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

/// ASCII decimal with no leading zeros (except "0" itself), fitting in a u64.
fn parse_decimal(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

/// A checkpoint whose log signature (and any known cosignatures) verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedCheckpoint {
    /// The parsed checkpoint.
    pub checkpoint: Checkpoint,
    /// The note verification result: which keys signed, which signatures were unknown.
    pub note: OpenedNote,
}

impl OpenedCheckpoint {
    /// The verified cosignatures: each cosigner's verifier and its timestamp.
    pub fn cosignatures(&self) -> impl Iterator<Item = (&Verifier, u64)> {
        self.note
            .verified
            .iter()
            .filter_map(|v| v.timestamp.map(|t| (&v.verifier, t)))
    }
}

/// Parses and verifies a signed checkpoint (cosignatures of both types verify): the note must verify (c2sp.org/signed-note rules)
/// against `log_keys` and `cosigners` together, at least one of `log_keys` must have signed it
/// ([`Error::MissingSignature`] otherwise), and the origin line must be `origin`
/// ([`Error::OriginMismatch`]).
pub fn open_checkpoint(
    msg: &[u8],
    origin: &str,
    log_keys: &[Verifier],
    cosigners: &[Verifier],
) -> Result<OpenedCheckpoint, Error> {
    let parsed = Note::parse(msg)?;
    let checkpoint = Checkpoint::parse(parsed.text())?;
    if checkpoint.origin != origin {
        return Err(Error::OriginMismatch {
            expected: origin.to_owned(),
            found: checkpoint.origin,
        });
    }
    let all: Vec<Verifier> = log_keys.iter().chain(cosigners).cloned().collect();
    let note = parsed.verify(&all)?;
    if !log_keys.iter().any(|k| note.is_signed_by(k)) {
        let key = log_keys
            .first()
            .map_or_else(|| KeyRef::new(origin, [0; 4]), Verifier::key_ref);
        return Err(Error::MissingSignature { key });
    }
    Ok(OpenedCheckpoint { checkpoint, note })
}
