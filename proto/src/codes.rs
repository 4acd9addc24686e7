//! Admission outcomes and the closed list of reason codes (seed 000, "Federation admission";
//! federation.proto's header is the reference list).
//!
//! An outcome is written as the seed writes it: `admitted`, `["quarantined", code]`,
//! `["rejected", code]` — in text (logs, `accordctl` output) and in JSON alike.
//!
//! These are protocol rules, not node internals: the receiver's node decides with them, and a
//! sender or auditor reads them back from receipts offline (`accordctl receipt verify`), so
//! they live here rather than in `accord-node` (issue 10, item 3).

use crate::pb::record::v1::AdmissionOutcome;
use serde::{Deserialize, Serialize};

/// Quarantine: a record named in `basis` (or an earlier quarantined record of the same
/// commitment) is not known here yet.
pub const MISSING_BASIS: &str = "missing_basis";
/// Quarantine: the envelope carries no proof that the sender recorded the record in its own log
/// (issue 8); closed by an operator or by `quarantine_timeout`, never released on its own.
pub const UNPROVEN: &str = "unproven";
/// A party key (key name `org/party`) signed a record of another author: a party key signs only
/// for the party it is named for; the peer's node key signs for any of its parties.
pub const KEY_NOT_FOR_AUTHOR: &str = "key_not_for_author";
/// A record (or envelope) signature does not verify against the sender's keys.
pub const BAD_SIGNATURE: &str = "bad_signature";
/// The record (or envelope) does not decode or lacks required fields.
pub const MALFORMED: &str = "malformed";
/// The author does not act for the sending organisation.
pub const UNAUTHORIZED_AUTHOR: &str = "unauthorized_author";
/// Signed by a key the sending organisation does not hold (or no longer holds).
pub const UNKNOWN_KEY: &str = "unknown_key";
/// A quarantined record's basis never arrived.
pub const QUARANTINE_TIMEOUT: &str = "quarantine_timeout";
/// Rejected by hand by an operator.
pub const OPERATOR: &str = "operator";
/// Prefix of a kernel rejection: `invalid_operation:<kernel code>`.
pub const INVALID_OPERATION: &str = "invalid_operation";

/// Envelope refusal: the sender is not a configured peer.
pub const UNKNOWN_PEER: &str = "unknown_peer";
/// Envelope refusal: the peer is configured but disabled.
pub const PEER_DISABLED: &str = "peer_disabled";
/// Envelope refusal: the TLS client certificate is not the peer's identity.
pub const WRONG_TLS_IDENTITY: &str = "wrong_tls_identity";
/// Envelope refusal: the envelope is addressed to another organisation.
pub const WRONG_RECEIVER: &str = "wrong_receiver";

/// Envelope refusal: the envelope is signed by a party key; only the peer's node key signs
/// envelopes.
pub const NOT_NODE_KEY: &str = "not_node_key";
/// Envelope refusal: the envelope's log proof does not verify (checkpoint signature or origin,
/// or an inclusion proof).
pub const BAD_LOG_PROOF: &str = "bad_log_proof";
/// Envelope refusal: the sender's checkpoint is not consistent with (or older than) the largest
/// one of that peer verified here.
pub const LOG_INCONSISTENT: &str = "log_inconsistent";
/// RESOURCE_EXHAUSTED (the message starts with this code; `accord-reason` is
/// `resource_exhausted`): the envelope would exceed the peer's budget of records rejected (or
/// quarantined `unproven`) at the door; nothing of it was written.
pub const TOO_MANY_REJECTIONS: &str = "too_many_rejections";

/// `invalid_operation:<kernel code>`.
pub fn invalid_operation(kernel_code: &str) -> String {
    format!("{INVALID_OPERATION}:{kernel_code}")
}

/// The closed list of admission codes (quarantine and rejection of one record);
/// `INVALID_OPERATION` stands for `invalid_operation:<kernel code>`.
pub const ADMISSION_CODES: &[&str] = &[
    MISSING_BASIS,
    BAD_SIGNATURE,
    MALFORMED,
    UNAUTHORIZED_AUTHOR,
    UNKNOWN_KEY,
    QUARANTINE_TIMEOUT,
    OPERATOR,
    INVALID_OPERATION,
    UNPROVEN,
    KEY_NOT_FOR_AUTHOR,
];

/// The closed list of envelope refusal codes (the whole envelope, PERMISSION_DENIED); an
/// envelope can also be refused `bad_signature`, `unknown_key` or `malformed`.
pub const REFUSAL_CODES: &[&str] = &[
    UNKNOWN_PEER,
    PEER_DISABLED,
    WRONG_TLS_IDENTITY,
    WRONG_RECEIVER,
    NOT_NODE_KEY,
    BAD_LOG_PROOF,
    LOG_INCONSISTENT,
    TOO_MANY_REJECTIONS,
];

/// One admission decision (seed 000, "Federation admission").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Linked to a local Work through an admission declaration.
    Admitted,
    /// Kept with no local effect; later closes as admitted or rejected.
    Quarantined(String),
    /// Not accepted; the reason code is kept.
    Rejected(String),
}

impl Decision {
    /// The wire outcome.
    pub fn outcome(&self) -> AdmissionOutcome {
        match self {
            Decision::Admitted => AdmissionOutcome::Admitted,
            Decision::Quarantined(_) => AdmissionOutcome::Quarantined,
            Decision::Rejected(_) => AdmissionOutcome::Rejected,
        }
    }

    /// The reason code ("" when admitted).
    pub fn code(&self) -> &str {
        match self {
            Decision::Admitted => "",
            Decision::Quarantined(c) | Decision::Rejected(c) => c,
        }
    }

    /// From a wire outcome and code; `None` for an unspecified outcome.
    pub fn from_wire(outcome: i32, code: &str) -> Option<Decision> {
        match AdmissionOutcome::try_from(outcome).ok()? {
            AdmissionOutcome::Admitted => Some(Decision::Admitted),
            AdmissionOutcome::Quarantined => Some(Decision::Quarantined(code.to_string())),
            AdmissionOutcome::Rejected => Some(Decision::Rejected(code.to_string())),
            AdmissionOutcome::Unspecified => None,
        }
    }

    /// The JSON form: `"admitted"`, `["quarantined", code]` or `["rejected", code]`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Decision::Admitted => serde_json::Value::String("admitted".into()),
            Decision::Quarantined(c) => serde_json::json!(["quarantined", c]),
            Decision::Rejected(c) => serde_json::json!(["rejected", c]),
        }
    }
}

impl std::fmt::Display for Decision {
    /// `admitted`, `["quarantined", "missing_basis"]`, `["rejected", "bad_signature"]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Admitted => f.write_str("admitted"),
            Decision::Quarantined(c) => write!(
                f,
                "[\"quarantined\", {}]",
                serde_json::Value::String(c.clone())
            ),
            Decision::Rejected(c) => write!(
                f,
                "[\"rejected\", {}]",
                serde_json::Value::String(c.clone())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_the_seed_writes_them() {
        assert_eq!(Decision::Admitted.to_string(), "admitted");
        assert_eq!(
            Decision::Quarantined(MISSING_BASIS.into()).to_string(),
            r#"["quarantined", "missing_basis"]"#
        );
        assert_eq!(
            Decision::Rejected(invalid_operation("wrong_role")).to_string(),
            r#"["rejected", "invalid_operation:wrong_role"]"#
        );
        assert_eq!(
            Decision::Rejected("x".into()).to_json(),
            serde_json::json!(["rejected", "x"])
        );
        assert_eq!(Decision::Admitted.to_json(), serde_json::json!("admitted"));
        let d = Decision::Quarantined(MISSING_BASIS.into());
        assert_eq!(Decision::from_wire(d.outcome() as i32, d.code()), Some(d));
    }
}
