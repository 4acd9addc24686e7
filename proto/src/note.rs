//! C2SP signed notes (c2sp.org/signed-note), with the semantics of Go's
//! `golang.org/x/mod/sumdb/note`:
//!
//! ```text
//! <text, ending in a newline>
//! <blank line>
//! — <key name> base64(key ID || signature)
//! ...
//! ```
//!
//! The keys themselves live in [`key`] and are re-exported here. A note is first parsed
//! ([`Note::parse`]: structure only) and then verified against the verifiers the caller trusts
//! ([`Note::verify`], or [`open`] for both). As the spec requires, signatures by unknown keys are
//! kept but ignored, a known key whose signature fails rejects the note, and a note with no
//! verified signature is rejected. Verifiers of kind [`KeyKind::CosignatureV1`] (Ed25519) and
//! [`KeyKind::MlDsa44`] check c2sp.org/tlog-cosignature lines and report their timestamps.

pub mod key;
pub mod mldsa;

use std::collections::HashSet;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

pub use self::key::{KeyKind, Signer, Verifier, check_key_name, is_valid_key_name, key_id};
use crate::error::{Error, KeyRef};

/// The most signature lines a note may carry. c2sp.org/signed-note asks verifiers to accept at
/// least 16; Go's `sumdb/note` (whose test vectors we follow) rejects a note with more than 100.
pub const MAX_SIGNATURES: usize = 100;

/// The prefix of a signature line: U+2014 EM DASH and a space.
const SIG_PREFIX: &str = "\u{2014} ";

/// One signature line of a note, not yet verified.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NoteSignature {
    /// The key name.
    pub name: String,
    /// The key ID (the first four bytes of the base64 payload).
    pub key_id: [u8; 4],
    /// The signature bytes after the key ID (64 for Ed25519; 72 for a cosignature/v1:
    /// an 8-byte big-endian timestamp and the 64-byte signature; 2,428 for ML-DSA-44: the
    /// timestamp and the 2,420-byte signature).
    pub signature: Vec<u8>,
}

impl NoteSignature {
    /// The signing key's identity.
    pub fn key_ref(&self) -> KeyRef {
        KeyRef::new(self.name.clone(), self.key_id)
    }

    /// Parses one signature line, with or without its trailing newline:
    /// `— <name> base64(key ID || signature)`.
    pub fn parse_line(line: &str) -> Result<NoteSignature, Error> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let rest = line.strip_prefix(SIG_PREFIX).ok_or(Error::MalformedNote {
            reason: "signature line does not start with an em dash and a space",
        })?;
        // Go's chop: the name ends at the first space; a space inside a name therefore shows
        // up as a bad base64 payload.
        let (name, b64) = rest.split_once(' ').unwrap_or((rest, ""));
        if !is_valid_key_name(name) {
            return Err(Error::MalformedNote {
                reason: "invalid key name in signature line",
            });
        }
        let raw = B64.decode(b64).map_err(|_| Error::MalformedNote {
            reason: "signature is not valid base64",
        })?;
        if raw.len() < 5 {
            return Err(Error::MalformedNote {
                reason: "signature is shorter than a key id and one byte",
            });
        }
        let (id, sig) = raw.split_at(4);
        Ok(NoteSignature {
            name: name.to_owned(),
            key_id: [id[0], id[1], id[2], id[3]],
            signature: sig.to_vec(),
        })
    }

    /// The signature line, including its trailing newline.
    pub fn to_line(&self) -> String {
        let mut raw = Vec::with_capacity(4 + self.signature.len());
        raw.extend_from_slice(&self.key_id);
        raw.extend_from_slice(&self.signature);
        format!("{SIG_PREFIX}{} {}\n", self.name, B64.encode(raw))
    }

    fn check(&self) -> Result<(), Error> {
        if !is_valid_key_name(&self.name) || self.signature.is_empty() {
            return Err(Error::MalformedNote {
                reason: "signature has an invalid key name or is empty",
            });
        }
        Ok(())
    }
}

/// Checks characters per c2sp.org/signed-note: valid UTF-8 (given by `&str`) with no ASCII
/// control characters other than newline.
fn check_chars(s: &str) -> Result<(), Error> {
    if s.chars().any(|c| c < ' ' && c != '\n') {
        return Err(Error::MalformedNote {
            reason: "contains an ASCII control character other than newline",
        });
    }
    Ok(())
}

/// Checks a note text: non-empty, newline-terminated, allowed characters only.
pub fn check_text(text: &str) -> Result<(), Error> {
    if !text.ends_with('\n') {
        return Err(Error::MalformedNote {
            reason: "text does not end in a newline",
        });
    }
    check_chars(text)
}

/// A signed note: its text and signature lines, parsed but not verified.
///
/// `Display` writes the exact signed-note form: the text, a blank line, the signature lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    text: String,
    signatures: Vec<NoteSignature>,
}

impl Note {
    /// A note with `text` (checked with [`check_text`]) and no signatures yet.
    pub fn new(text: &str) -> Result<Note, Error> {
        check_text(text)?;
        Ok(Note {
            text: text.to_owned(),
            signatures: Vec::new(),
        })
    }

    /// Parses a signed note's structure (no signature is verified): UTF-8 without control
    /// characters other than newline; the text, which ends at the *last* blank line; then one or
    /// more well-formed signature lines, at most [`MAX_SIGNATURES`], each ending in a newline.
    pub fn parse(msg: &[u8]) -> Result<Note, Error> {
        let msg = std::str::from_utf8(msg).map_err(|_| Error::MalformedNote {
            reason: "not valid UTF-8",
        })?;
        check_chars(msg)?;
        // Signature lines are never empty, so the last "\n\n" is the separator.
        let split = msg.rfind("\n\n").ok_or(Error::MalformedNote {
            reason: "no blank line before the signatures",
        })?;
        let (text, sigs) = (&msg[..=split], &msg[split + 2..]);
        if sigs.is_empty() {
            return Err(Error::MalformedNote {
                reason: "no signature lines",
            });
        }
        let Some(sigs) = sigs.strip_suffix('\n') else {
            return Err(Error::MalformedNote {
                reason: "last signature line does not end in a newline",
            });
        };
        let mut signatures = Vec::new();
        for line in sigs.split('\n') {
            if signatures.len() == MAX_SIGNATURES {
                return Err(Error::MalformedNote {
                    reason: "more than 100 signatures",
                });
            }
            signatures.push(NoteSignature::parse_line(line)?);
        }
        Ok(Note {
            text: text.to_owned(),
            signatures,
        })
    }

    /// The note text, including its final newline.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The signature lines, in order.
    pub fn signatures(&self) -> &[NoteSignature] {
        &self.signatures
    }

    /// Adds a signature line, replacing any existing one by the same key name and ID (as Go's
    /// `note.Sign` does when re-signing).
    pub fn add_signature(&mut self, sig: NoteSignature) -> Result<(), Error> {
        sig.check()?;
        if let Some(old) = self
            .signatures
            .iter_mut()
            .find(|s| s.name == sig.name && s.key_id == sig.key_id)
        {
            *old = sig;
            return Ok(());
        }
        if self.signatures.len() == MAX_SIGNATURES {
            return Err(Error::MalformedNote {
                reason: "more than 100 signatures",
            });
        }
        self.signatures.push(sig);
        Ok(())
    }

    /// Signs the text with `signer` (Ed25519 over the text, type 0x01) and adds the line.
    pub fn sign(&mut self, signer: &Signer) -> Result<(), Error> {
        let sig = NoteSignature {
            name: signer.name().to_owned(),
            key_id: signer.key_id(),
            signature: signer.sign(self.text.as_bytes()).to_vec(),
        };
        self.add_signature(sig)
    }

    /// Verifies the note against `verifiers` with Go `sumdb/note` `Open` semantics:
    ///
    /// - a signature whose (name, key ID) matches no verifier is kept in `unverified`
    ///   (identical repeated lines once);
    /// - two verifiers with the same (name, key ID) are [`Error::AmbiguousKey`] when a signature
    ///   uses that identity;
    /// - the first signature by a known key must verify, else [`Error::BadSignature`]; repeats
    ///   by the same key are dropped;
    /// - no verified signature at all is [`Error::UnverifiedNote`].
    pub fn verify(&self, verifiers: &[Verifier]) -> Result<OpenedNote, Error> {
        let mut verified = Vec::new();
        let mut unverified: Vec<NoteSignature> = Vec::new();
        let mut seen_known: HashSet<([u8; 4], &str)> = HashSet::new();
        let mut seen_unknown: HashSet<&NoteSignature> = HashSet::new();
        for sig in &self.signatures {
            let mut matching = verifiers
                .iter()
                .filter(|v| v.name() == sig.name && v.key_id() == sig.key_id);
            let Some(verifier) = matching.next() else {
                if seen_unknown.insert(sig) {
                    unverified.push(sig.clone());
                }
                continue;
            };
            if matching.next().is_some() {
                return Err(Error::AmbiguousKey { key: sig.key_ref() });
            }
            if !seen_known.insert((sig.key_id, &sig.name)) {
                continue;
            }
            let timestamp = verify_one(verifier, &self.text, sig)?;
            verified.push(VerifiedSignature {
                verifier: verifier.clone(),
                signature: sig.clone(),
                timestamp,
            });
        }
        if verified.is_empty() {
            return Err(Error::UnverifiedNote);
        }
        Ok(OpenedNote {
            text: self.text.clone(),
            verified,
            unverified,
        })
    }
}

/// Checks one signature by a known key; returns the cosignature timestamp for cosigner keys
/// (type 0x04 Ed25519 and type 0x06 ML-DSA-44).
fn verify_one(v: &Verifier, text: &str, sig: &NoteSignature) -> Result<Option<u64>, Error> {
    match v.kind() {
        KeyKind::Ed25519 => {
            if v.verify(text.as_bytes(), &sig.signature) {
                Ok(None)
            } else {
                Err(Error::BadSignature {
                    key: sig.key_ref(),
                    index: None,
                })
            }
        }
        KeyKind::CosignatureV1 | KeyKind::MlDsa44 => {
            crate::checkpoint::verify_cosignature(v, text, sig).map(Some)
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)?;
        f.write_str("\n")?;
        for s in &self.signatures {
            f.write_str(&s.to_line())?;
        }
        Ok(())
    }
}

/// A signature that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// The verifier it verified under.
    pub verifier: Verifier,
    /// The signature line.
    pub signature: NoteSignature,
    /// For a cosigner key (type 0x04 or 0x06), the cosignature's timestamp (POSIX seconds).
    pub timestamp: Option<u64>,
}

/// The result of verifying a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedNote {
    /// The note text, including its final newline.
    pub text: String,
    /// The signatures by known keys, all verified, in note order.
    pub verified: Vec<VerifiedSignature>,
    /// The signatures by unknown keys, kept as c2sp.org/signed-note requires ignoring them.
    pub unverified: Vec<NoteSignature>,
}

impl OpenedNote {
    /// Whether `key` is among the verified signers.
    pub fn is_signed_by(&self, key: &Verifier) -> bool {
        self.verified.iter().any(|v| &v.verifier == key)
    }
}

/// Parses and verifies a signed note ([`Note::parse`] then [`Note::verify`]).
pub fn open(msg: &[u8], verifiers: &[Verifier]) -> Result<OpenedNote, Error> {
    Note::parse(msg)?.verify(verifiers)
}

/// Signs `text` with each signer and returns the signed note (c2sp.org/signed-note). The text
/// must end in a newline and contain no control characters other than newline; at least one
/// signer is required, since a note without signature lines is not a signed note.
pub fn sign_note(text: &str, signers: &[&Signer]) -> Result<String, Error> {
    let mut note = Note::new(text)?;
    if signers.is_empty() {
        return Err(Error::MalformedNote {
            reason: "a signed note needs at least one signature",
        });
    }
    for s in signers {
        note.sign(s)?;
    }
    Ok(note.to_string())
}
