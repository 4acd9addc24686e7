//! Federation's errors (issue 10, item 6): typed, with the reason code from the closed list in
//! federation.proto where there is one. [`FedError`] converts into the node's [`Error`] (and so
//! into a `tonic::Status` with `accord-reason`); storage and internal failures keep their detail
//! in the log and tell the client only "internal error" (`error.rs`).

use crate::error::Error;
use accord_proto::signing::RecordId;

/// Why one peer record fails its checks at the door (seed 000, "Federation admission"): it is
/// rejected with [`Rejection::code`], and the rest of its envelope goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct Rejection {
    /// The reason code (`malformed`, `unauthorized_author`, `key_not_for_author`,
    /// `unknown_key`, `bad_signature`, ...).
    pub code: &'static str,
    /// What was wrong (logged; never answered to the peer beyond the code).
    pub detail: String,
}

impl Rejection {
    /// A rejection with `code`.
    pub fn new(code: &'static str, detail: impl Into<String>) -> Rejection {
        Rejection {
            code,
            detail: detail.into(),
        }
    }
}

/// A log proof that is not well formed (too many hashes, a hash of the wrong length).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadProof(pub String);

/// Errors of federation.
#[derive(Debug, thiserror::Error)]
pub enum FedError {
    /// A peer's envelope or call was refused whole and the refusal recorded; `code` is the
    /// `accord-reason`. Nothing was admitted.
    #[error("refused: {code}: {detail}")]
    Refused {
        /// The reason code, e.g. `unknown_peer`, `wrong_tls_identity`, `bad_log_proof`.
        code: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// More records of one envelope would be rejected at the door than the peer's budget
    /// allows (`too_many_rejections`); nothing was written.
    #[error(
        "{}: {records} records of this envelope would be rejected; peer {peer} may have {burst} at once, {per_minute} a minute",
        super::codes::TOO_MANY_REJECTIONS
    )]
    TooManyRejections {
        /// The peer.
        peer: String,
        /// Records of the envelope rejected at the door.
        records: u32,
        /// The budget's burst.
        burst: u32,
        /// Its refill per minute.
        per_minute: u32,
    },
    /// A pipelined envelope (issue 14) whose predecessor was not decided here in time: the
    /// sender starts again from the head of its queue. Nothing was written.
    #[error(
        "out_of_order: the envelope before this one (first sequence {previous}) was not decided within {waited_ms} ms"
    )]
    OutOfOrder {
        /// `Envelope.previous_first_sequence`.
        previous: u64,
        /// How long it waited.
        waited_ms: u64,
    },
    /// An operator decision about a record that is not quarantined.
    #[error("record {} is not quarantined", hex::encode(.0))]
    NotQuarantined(RecordId),
    /// Something a decision was kept from does not decode (a stored record, receipt or answer).
    #[error("stored {what} does not decode: {detail}")]
    Corrupt {
        /// What was read.
        what: &'static str,
        /// The decoder's complaint.
        detail: String,
    },
    /// The node below failed (ledger, storage, a bad record conversion).
    #[error(transparent)]
    Node(#[from] Error),
}

impl FedError {
    /// A refusal (already recorded by [`super::refusals::refuse`]).
    pub fn refused(code: &'static str, detail: String) -> FedError {
        FedError::Refused { code, detail }
    }

    /// A stored value that does not decode.
    pub fn corrupt(what: &'static str, e: impl std::fmt::Display) -> FedError {
        FedError::Corrupt {
            what,
            detail: e.to_string(),
        }
    }
}

impl From<FedError> for Error {
    fn from(e: FedError) -> Error {
        match e {
            FedError::Refused { code, detail } => Error::Refused { code, detail },
            e @ FedError::TooManyRejections { .. } => Error::ResourceExhausted(e.to_string()),
            e @ FedError::OutOfOrder { .. } => Error::Unavailable(e.to_string()),
            e @ FedError::NotQuarantined(_) => Error::NotFound(e.to_string()),
            e @ FedError::Corrupt { .. } => Error::Storage(e.to_string()),
            FedError::Node(e) => e,
        }
    }
}

impl From<FedError> for tonic::Status {
    fn from(e: FedError) -> tonic::Status {
        Error::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_carry_the_reason_and_hide_internal_detail() {
        let s = tonic::Status::from(FedError::refused("unknown_peer", "x is not a peer".into()));
        assert_eq!(s.code(), tonic::Code::PermissionDenied);
        assert_eq!(s.metadata().get("accord-reason").unwrap(), "unknown_peer");
        let s = tonic::Status::from(FedError::corrupt("receipt", "secret detail at /var/lib"));
        assert_eq!(s.code(), tonic::Code::Internal);
        assert_eq!(s.message(), "internal error");
        assert!(!format!("{s:?}").contains("secret"));
        let s = tonic::Status::from(FedError::NotQuarantined([7; 32]));
        assert_eq!(s.code(), tonic::Code::NotFound);
        let s = tonic::Status::from(FedError::TooManyRejections {
            peer: "acme".into(),
            records: 9,
            burst: 1,
            per_minute: 1,
        });
        assert_eq!(s.code(), tonic::Code::ResourceExhausted);
        assert!(
            s.message().contains("too_many_rejections: 9 records"),
            "{}",
            s.message()
        );
    }
}
