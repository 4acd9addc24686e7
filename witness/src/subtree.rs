//! sign-subtree (c2sp.org/tlog-witness, "sign-subtree"): co-signs a subtree `[start, end)` of a
//! checkpoint this witness co-signed, given a subtree consistency proof
//! (draft-ietf-plants-merkle-tree-certs, "Subtree Consistency Proofs"). HTTP body:
//!
//! ```text
//! subtree <start> <end>\n
//! <base64 subtree hash>\n
//! <base64 proof hash>\n          (zero to 63 lines)
//! \n
//! <reference checkpoint, signed note carrying this witness's cosignature>
//! ```
//!
//! Answers, in the order the text gives them: 400 (malformed, not a valid subtree, or `end`
//! beyond the checkpoint), 422 (the proof does not verify), 404 (unknown origin), 403 (no valid
//! cosignature by one of this witness's keys), else 200 with one `subtree/v1` line per ML-DSA-44
//! key, timestamp 0. Only ML-DSA-44 cosignatures can sign subtrees, so a witness without such a
//! key answers 501 / `UNIMPLEMENTED`.

use accord_proto::checkpoint::Checkpoint;
use accord_proto::merkle::{self, Hash};
use accord_proto::note::{KeyKind, Note, Verifier};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use tracing::{info, instrument};

use crate::error::{Error, LimitScope};
use crate::request::{MAX_PROOF_HASHES, parse_decimal};
use crate::witness::Witness;

/// A sign-subtree request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignSubtree {
    /// The first leaf of the subtree.
    pub start: u64,
    /// One past the last leaf of the subtree.
    pub end: u64,
    /// The subtree hash `MTH(D[start:end])`.
    pub hash: Hash,
    /// The subtree consistency proof from the subtree to the checkpoint.
    pub proof: Vec<Hash>,
    /// The reference checkpoint as a signed note, carrying this witness's cosignature.
    pub checkpoint: String,
}

fn decode_hash(line: &str, what: &str) -> Result<Hash, Error> {
    B64.decode(line)
        .ok()
        .and_then(|h| Hash::try_from(h.as_slice()).ok())
        .ok_or_else(|| Error::malformed(format!("{what} is not base64 of 32 bytes")))
}

impl SignSubtree {
    /// Parses the HTTP request body.
    pub fn parse_http_body(body: &[u8]) -> Result<SignSubtree, Error> {
        let text = std::str::from_utf8(body).map_err(|_| Error::malformed("body is not UTF-8"))?;
        let mut rest = text;
        let mut line = || -> Result<&str, Error> {
            let (l, after) = rest
                .split_once('\n')
                .ok_or_else(|| Error::malformed("missing a line or the empty line"))?;
            rest = after;
            Ok(l)
        };
        let range = line()?;
        let (start, end) = range
            .strip_prefix("subtree ")
            .and_then(|r| r.split_once(' '))
            .and_then(|(s, e)| Some((parse_decimal(s)?, parse_decimal(e)?)))
            .ok_or_else(|| {
                Error::malformed("subtree range line is not \"subtree <start> <end>\"")
            })?;
        let hash = decode_hash(line()?, "the subtree hash line")?;
        let mut proof = Vec::new();
        loop {
            let l = line()?;
            if l.is_empty() {
                break;
            }
            if proof.len() == MAX_PROOF_HASHES {
                return Err(Error::malformed("more than 63 consistency proof lines"));
            }
            proof.push(decode_hash(l, "a consistency proof line")?);
        }
        if rest.is_empty() {
            return Err(Error::malformed("missing the checkpoint"));
        }
        Ok(SignSubtree {
            start,
            end,
            hash,
            proof,
            checkpoint: rest.to_owned(),
        })
    }

    /// The HTTP request body for this request.
    pub fn to_http_body(&self) -> String {
        let mut body = format!(
            "subtree {} {}\n{}\n",
            self.start,
            self.end,
            B64.encode(self.hash)
        );
        for h in &self.proof {
            body.push_str(&B64.encode(h));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&self.checkpoint);
        body
    }

    /// Builds a request from the gRPC message's fields, checking the hash lengths.
    pub fn from_grpc(
        start: u64,
        end: u64,
        hash: &[u8],
        proof: &[impl AsRef<[u8]>],
        checkpoint: String,
    ) -> Result<SignSubtree, Error> {
        if proof.len() > MAX_PROOF_HASHES {
            return Err(Error::malformed("more than 63 consistency proof hashes"));
        }
        let hash = Hash::try_from(hash)
            .map_err(|_| Error::malformed("the subtree hash is not 32 bytes"))?;
        let proof = proof
            .iter()
            .map(|h| {
                Hash::try_from(h.as_ref())
                    .map_err(|_| Error::malformed("a consistency proof hash is not 32 bytes"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SignSubtree {
            start,
            end,
            hash,
            proof,
            checkpoint,
        })
    }
}

impl Witness {
    /// sign-subtree: checks the request as the spec orders it and returns the subtree
    /// cosignature line(s), one per ML-DSA-44 key, timestamp 0.
    #[instrument(name = "sign_subtree", skip_all, fields(start = req.start, end = req.end, origin = tracing::field::Empty))]
    pub async fn sign_subtree(&self, req: SignSubtree) -> Result<String, Error> {
        let signers: Vec<_> = self
            .cosigners
            .iter()
            .filter(|c| c.kind() == KeyKind::MlDsa44)
            .cloned()
            .collect();
        if signers.is_empty() {
            return Err(Error::Unsupported {
                reason: "sign-subtree needs an ML-DSA-44 witness key",
            });
        }
        let _permit = self
            .global
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::Overloaded {
                scope: LimitScope::Global,
            })?;
        let note = Note::parse(req.checkpoint.as_bytes())
            .map_err(|e| Error::malformed(format!("checkpoint note: {e}")))?;
        let cp = Checkpoint::parse(note.text())
            .map_err(|e| Error::malformed(format!("checkpoint: {e}")))?;
        tracing::Span::current().record("origin", cp.origin.as_str());
        if !merkle::is_valid_subtree(req.start, req.end) {
            return Err(Error::malformed(format!(
                "[{}, {}) is not a valid subtree",
                req.start, req.end
            )));
        }
        if req.end > cp.size {
            return Err(Error::malformed(format!(
                "subtree end {} is beyond the checkpoint size {}",
                req.end, cp.size
            )));
        }
        merkle::verify_subtree_consistency(
            req.start, req.end, cp.size, &req.proof, &req.hash, &cp.root,
        )
        .map_err(|e| Error::Inconsistent {
            reason: format!("subtree consistency proof: {e}"),
        })?;
        if self.log(&cp.origin)?.is_none() {
            return Err(Error::UnknownOrigin {
                origin: cp.origin.clone(),
            });
        }
        let ours: Vec<Verifier> = self.verifiers();
        let (origin, start, end, hash) = (cp.origin.clone(), req.start, req.end, req.hash);
        let lines = tokio::task::spawn_blocking(move || -> Result<String, Error> {
            // The reference checkpoint must carry a valid cosignature by one of our keys.
            note.verify(&ours).map_err(|source| Error::Untrusted {
                origin: origin.clone(),
                source,
            })?;
            let mut lines = String::new();
            for s in &signers {
                let line = s
                    .cosign_subtree(&origin, start, end, &hash)
                    .map_err(|e| Error::Internal(format!("subtree cosigning failed: {e}")))?;
                lines.push_str(&line.to_line());
            }
            Ok(lines)
        })
        .await
        .map_err(|e| Error::Internal(format!("blocking task failed: {e}")))??;
        info!("subtree co-signed");
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_body_round_trips_and_rejects_malformed() {
        let req = SignSubtree {
            start: 8,
            end: 13,
            hash: [1; 32],
            proof: vec![[2; 32], [3; 32]],
            checkpoint: "o\n14\nAAAA\n\n— x y\n".into(),
        };
        let body = req.to_http_body();
        assert!(body.starts_with("subtree 8 13\nAQEB"));
        assert_eq!(SignSubtree::parse_http_body(body.as_bytes()).unwrap(), req);
        for bad in [
            "",
            "subtree 8\nAA==\n\ncp\n",
            "subtree 08 13\n",
            "subtree 8 13\nnot-base64\n\ncp\n",
            "subtree 8 13\n",
            "old 8 13\n\n\ncp\n",
            "subtree 8 13\nAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n\n",
        ] {
            assert!(
                matches!(
                    SignSubtree::parse_http_body(bad.as_bytes()),
                    Err(Error::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(SignSubtree::from_grpc(0, 1, &[0; 31], &[[0u8; 32]], String::new()).is_err());
    }
}
