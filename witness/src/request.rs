//! The add-checkpoint request and its HTTP text form (c2sp.org/tlog-witness, "add-checkpoint"):
//!
//! ```text
//! old <size>\n
//! <base64 proof hash>\n      (zero to 63 lines)
//! \n
//! <checkpoint signed note>
//! ```
//!
//! The same request arrives over gRPC as `accord.witness.v1.AddCheckpointRequest`.

use accord_proto::merkle::Hash;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::error::Error;

/// The most consistency-proof hashes a request may carry (c2sp.org/tlog-witness: "The client
/// MUST NOT send more than 63 consistency proof lines").
pub const MAX_PROOF_HASHES: usize = 63;

/// An add-checkpoint request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// The size of the checkpoint the client believes the witness holds (0 if none).
    pub old_size: u64,
    /// The RFC 6962 consistency proof from `old_size` to the checkpoint's size.
    pub proof: Vec<Hash>,
    /// The checkpoint as a signed note (its text, a blank line, its signature lines).
    pub checkpoint: String,
}

impl AddCheckpoint {
    /// Parses the HTTP request body of c2sp.org/tlog-witness "add-checkpoint".
    pub fn parse_http_body(body: &[u8]) -> Result<AddCheckpoint, Error> {
        let text = std::str::from_utf8(body).map_err(|_| Error::malformed("body is not UTF-8"))?;
        let (old_line, mut rest) = text
            .split_once('\n')
            .ok_or_else(|| Error::malformed("missing the old size line"))?;
        let old_size = old_line
            .strip_prefix("old ")
            .and_then(parse_decimal)
            .ok_or_else(|| Error::malformed("old size line is not \"old <decimal size>\""))?;
        let mut proof = Vec::new();
        loop {
            let (line, after) = rest
                .split_once('\n')
                .ok_or_else(|| Error::malformed("missing the empty line before the checkpoint"))?;
            rest = after;
            if line.is_empty() {
                break;
            }
            if proof.len() == MAX_PROOF_HASHES {
                return Err(Error::malformed("more than 63 consistency proof lines"));
            }
            proof.push(decode_hash(line)?);
        }
        if rest.is_empty() {
            return Err(Error::malformed("missing the checkpoint"));
        }
        Ok(AddCheckpoint {
            old_size,
            proof,
            checkpoint: rest.to_owned(),
        })
    }

    /// The HTTP request body for this request (what a C2SP log sends).
    pub fn to_http_body(&self) -> String {
        let mut body = format!("old {}\n", self.old_size);
        for h in &self.proof {
            body.push_str(&B64.encode(h));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&self.checkpoint);
        body
    }

    /// Builds a request from the gRPC message's fields, checking the proof hashes.
    pub fn from_grpc(
        old_size: u64,
        proof: &[impl AsRef<[u8]>],
        checkpoint: String,
    ) -> Result<AddCheckpoint, Error> {
        if proof.len() > MAX_PROOF_HASHES {
            return Err(Error::malformed("more than 63 consistency proof hashes"));
        }
        let proof = proof
            .iter()
            .map(|h| {
                <Hash>::try_from(h.as_ref())
                    .map_err(|_| Error::malformed("a consistency proof hash is not 32 bytes"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AddCheckpoint {
            old_size,
            proof,
            checkpoint,
        })
    }
}

/// ASCII decimal without leading zeros (except "0"), fitting in a u64.
pub(crate) fn parse_decimal(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

fn decode_hash(line: &str) -> Result<Hash, Error> {
    B64.decode(line)
        .ok()
        .and_then(|h| Hash::try_from(h.as_slice()).ok())
        .ok_or_else(|| Error::malformed("a consistency proof line is not base64 of 32 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_the_spec_example_shape() {
        let req = AddCheckpoint {
            old_size: 20852014,
            proof: vec![[1; 32], [2; 32]],
            checkpoint: "example.com/behind-the-sofa\n20852163\nAAAA\n\n— x y\n".to_owned(),
        };
        let body = req.to_http_body();
        assert!(body.starts_with("old 20852014\nAQEB"));
        assert_eq!(
            AddCheckpoint::parse_http_body(body.as_bytes()).unwrap(),
            req
        );
    }

    #[test]
    fn rejects_malformed_bodies() {
        for body in [
            "",
            "old 1",
            "old 01\n\ncp\n",
            "old -1\n\ncp\n",
            "new 1\n\ncp\n",
            "old 1\nnot-base64\n\ncp\n",
            "old 1\nAAAA\n\ncp\n",
            "old 1\n\n",
            "old 1\n",
            "old 18446744073709551616\n\ncp\n",
        ] {
            assert!(
                matches!(
                    AddCheckpoint::parse_http_body(body.as_bytes()),
                    Err(Error::Malformed { .. })
                ),
                "{body:?}"
            );
        }
        let mut long = "old 1\n".to_owned();
        for _ in 0..64 {
            long.push_str(&B64.encode([0u8; 32]));
            long.push('\n');
        }
        long.push_str("\ncp\n");
        assert!(AddCheckpoint::parse_http_body(long.as_bytes()).is_err());
    }

    #[test]
    fn grpc_hashes_must_be_32_bytes() {
        assert!(AddCheckpoint::from_grpc(1, &[vec![0u8; 31]], String::new()).is_err());
        assert!(AddCheckpoint::from_grpc(1, &[vec![0u8; 32]], String::new()).is_ok());
    }
}
