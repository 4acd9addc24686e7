//! Typed Declarations (seed 000, "Operations": "Every operation is a typed Declaration
//! (https://suiss.app/ns/work/declaration/<wire name>). The list is closed.").
//!
//! A record whose operation is one of the seed's Declarations is signed under the payload type
//! `https://suiss.app/ns/work/declaration/<wire name>`, so the type a signature covers names the
//! operation, and the record id (`SHA-256(PAE(payload_type, payload))`) binds it. Records that are
//! not Declarations keep [`RECORD_PAYLOAD_TYPE`]: the executor's Claims (seed 000: "Execution,
//! control and liveness come from executor or external Claims" — `observation`, `acted_upon`,
//! `report_consumption`), seed 002's run records and seed 003's envelope records and ticks.
//!
//! Records signed under the older generic type, [`RECORD_PAYLOAD_TYPE`], are still read,
//! whatever their operation: every ledger written before typed Declarations holds them, and a
//! client may still sign them. A typed payload type must name exactly the decoded operation
//! ([`check_matches`]); a type outside the closed list is refused before anything is decoded
//! ([`check_payload_type`]).

use crate::pb::record::v1 as pb;
use crate::signing::RECORD_PAYLOAD_TYPE;
use pb::record::Operation as O;

/// The namespace of the seed's typed Declarations.
pub const DECLARATION_TYPE_PREFIX: &str = "https://suiss.app/ns/work/declaration/";

/// What a record's operation is, for its payload type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of the seed's Declarations, with its wire name.
    Declaration(&'static str),
    /// Anything else (a Claim, a run record, an envelope record): the generic record type.
    Other,
}

/// The kind of `op`. Exhaustive on purpose: a new operation must be classified here.
///
/// Declarations are seed 000's Operations table, its Assignment operations, its Conditions and
/// gates (`open_condition`, `withdraw_condition`, `gate_decision`), its Stop requests and
/// Control handover (`stop_request`, `stop_response`, `resume_after_stop` — "a separate
/// resume_after_stop Declaration" — `control_lease`, `hand_back_control`, `recheck`), and the
/// admission Declaration of "Federation admission". `satisfy_condition` is the seed's "The
/// addressed party (by satisfying)" (category table, waiting row), which the seed names no wire
/// name for: Accord names it and types it as a Declaration (ARCHITECTURE.md, departures).
pub fn kind(op: &O) -> Kind {
    let d = Kind::Declaration;
    match op {
        O::Request(_) => d("request"),
        O::Promise(_) => d("promise"),
        O::PromiseConditional(_) => d("promise_conditional"),
        O::Decline(_) => d("decline"),
        O::Counter(_) => d("counter"),
        O::AcceptCounter(_) => d("accept_counter"),
        O::State(_) => d("state"),
        O::Accept(_) => d("accept"),
        O::Reject(_) => d("reject"),
        O::Cancel(_) => d("cancel"),
        O::Release(_) => d("release"),
        O::Delegate(_) => d("delegate"),
        O::Assign(_) => d("assign"),
        O::Dispute(_) => d("dispute"),
        O::Defer(_) => d("defer"),
        O::Resume(_) => d("resume"),
        O::RevokeRequest(_) => d("revoke_request"),
        O::RevokePromise(_) => d("revoke_promise"),
        O::RevokeStatement(_) => d("revoke_statement"),
        O::RevokeAcceptance(_) => d("revoke_acceptance"),
        O::Allow(_) => d("allow"),
        O::Refuse(_) => d("refuse"),
        O::Amend(_) => d("amend"),
        O::Notice(_) => d("notice"),
        O::DeclareObsolete(_) => d("declare_obsolete"),
        O::Expire(_) => d("expire"),
        O::AdministrativeClose(_) => d("administrative_close"),
        O::Claim(_) => d("claim"),
        O::Unclaim(_) => d("unclaim"),
        O::Forward(_) => d("forward"),
        O::Nominate(_) => d("nominate"),
        O::Offer(_) => d("offer"),
        O::Reassign(_) => d("reassign"),
        O::RenewLease(_) => d("renew_lease"),
        O::OpenCondition(_) => d("open_condition"),
        O::WithdrawCondition(_) => d("withdraw_condition"),
        O::SatisfyCondition(_) => d("satisfy_condition"),
        O::GateDecision(_) => d("gate_decision"),
        O::StopRequest(_) => d("stop_request"),
        O::StopResponse(_) => d("stop_response"),
        O::ResumeAfterStop(_) => d("resume_after_stop"),
        O::ControlLease(_) => d("control_lease"),
        O::HandBackControl(_) => d("hand_back_control"),
        O::Recheck(_) => d("recheck"),
        O::Admission(_) => d("admission"),
        // Claims: what an executor reports, not what a party declares.
        O::Observation(_) | O::ActedUpon(_) | O::ReportConsumption(_) => Kind::Other,
        // Seed 002 and seed 003 records.
        O::RunStart(_)
        | O::RunTransition(_)
        | O::RunAction(_)
        | O::RunProposal(_)
        | O::RunDecision(_)
        | O::RunEvidence(_)
        | O::RunOutput(_)
        | O::RunAuditEvent(_)
        | O::Envelope(_)
        | O::Tick(_) => Kind::Other,
    }
}

/// Every Declaration's wire name, in the order of [`kind`] (the closed list).
pub const DECLARATIONS: [&str; 45] = [
    "request",
    "promise",
    "promise_conditional",
    "decline",
    "counter",
    "accept_counter",
    "state",
    "accept",
    "reject",
    "cancel",
    "release",
    "delegate",
    "assign",
    "dispute",
    "defer",
    "resume",
    "revoke_request",
    "revoke_promise",
    "revoke_statement",
    "revoke_acceptance",
    "allow",
    "refuse",
    "amend",
    "notice",
    "declare_obsolete",
    "expire",
    "administrative_close",
    "claim",
    "unclaim",
    "forward",
    "nominate",
    "offer",
    "reassign",
    "renew_lease",
    "open_condition",
    "withdraw_condition",
    "satisfy_condition",
    "gate_decision",
    "stop_request",
    "stop_response",
    "resume_after_stop",
    "control_lease",
    "hand_back_control",
    "recheck",
    "admission",
];

/// The payload type `record` is signed under: its Declaration type, or [`RECORD_PAYLOAD_TYPE`].
pub fn payload_type(record: &pb::Record) -> String {
    match record.operation.as_ref().map(kind) {
        Some(Kind::Declaration(wire)) => format!("{DECLARATION_TYPE_PREFIX}{wire}"),
        _ => RECORD_PAYLOAD_TYPE.to_owned(),
    }
}

/// Checks a received record's payload type before its payload is decoded: the generic record
/// type, or a Declaration type of the closed list. The error says what is wrong.
pub fn check_payload_type(payload_type: &str) -> Result<(), String> {
    if payload_type == RECORD_PAYLOAD_TYPE {
        return Ok(());
    }
    match payload_type.strip_prefix(DECLARATION_TYPE_PREFIX) {
        Some(wire) if DECLARATIONS.contains(&wire) => Ok(()),
        Some(wire) => Err(format!(
            "{wire:?} is not a Declaration of seed 000 (the list is closed)"
        )),
        None => Err(format!(
            "{payload_type:?} is neither {RECORD_PAYLOAD_TYPE:?} nor {DECLARATION_TYPE_PREFIX}<wire name>"
        )),
    }
}

/// Checks, after decoding, that a typed payload type names the record's own operation (the
/// generic type goes with any operation: older records are still read).
pub fn check_matches(payload_type: &str, record: &pb::Record) -> Result<(), String> {
    let Some(named) = payload_type.strip_prefix(DECLARATION_TYPE_PREFIX) else {
        return Ok(());
    };
    match record.operation.as_ref().map(kind) {
        Some(Kind::Declaration(wire)) if wire == named => Ok(()),
        Some(Kind::Declaration(wire)) => Err(format!(
            "names {named:?} but the record is a {wire:?} Declaration"
        )),
        _ => Err(format!(
            "names the Declaration {named:?} but the record is not a Declaration"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's operations, its assignment operations and its condition, gate, stop and
    /// handover Declarations, read from seed 000's text (not from [`DECLARATIONS`]).
    const FROM_THE_SEED: &[&str] = &[
        // "Operations" table, first column.
        "request",
        "promise",
        "promise_conditional",
        "decline",
        "counter",
        "accept_counter",
        "state",
        "accept",
        "reject",
        "cancel",
        "release",
        "delegate",
        "assign",
        "dispute",
        "defer",
        "resume",
        "revoke_request",
        "revoke_promise",
        "revoke_statement",
        "revoke_acceptance",
        "allow",
        "refuse",
        "amend",
        "notice",
        "declare_obsolete",
        "expire",
        "administrative_close",
        // "Assignment" operations.
        "claim",
        "unclaim",
        "forward",
        "nominate",
        "offer",
        "reassign",
        "renew_lease",
        // "Conditions and gates": "opened with open_condition and withdrawn with
        // withdraw_condition. A gate closes with gate_decision".
        "open_condition",
        "withdraw_condition",
        "gate_decision",
        // "Stop requests", "Control handover".
        "stop_request",
        "stop_response",
        "resume_after_stop",
        "control_lease",
        "hand_back_control",
        "recheck",
        // "Federation admission": "an admission Declaration".
        "admission",
    ];

    #[test]
    fn the_closed_list_is_the_seeds_plus_satisfy_condition() {
        let mut ours: Vec<&str> = DECLARATIONS.to_vec();
        let mut seed: Vec<&str> = FROM_THE_SEED.to_vec();
        seed.push("satisfy_condition");
        ours.sort_unstable();
        seed.sort_unstable();
        assert_eq!(ours, seed);
    }

    #[test]
    fn payload_types_are_checked_before_and_after_decoding() {
        assert!(check_payload_type(RECORD_PAYLOAD_TYPE).is_ok());
        assert!(check_payload_type("https://suiss.app/ns/work/declaration/promise").is_ok());
        assert!(check_payload_type("https://suiss.app/ns/work/declaration/observation").is_err());
        assert!(check_payload_type("https://suiss.app/ns/work/declaration/").is_err());
        assert!(check_payload_type("application/json").is_err());

        let promise = pb::Record {
            operation: Some(O::Promise(pb::Promise {})),
            ..Default::default()
        };
        assert_eq!(
            payload_type(&promise),
            "https://suiss.app/ns/work/declaration/promise"
        );
        assert!(check_matches("https://suiss.app/ns/work/declaration/promise", &promise).is_ok());
        assert!(check_matches("https://suiss.app/ns/work/declaration/decline", &promise).is_err());
        assert!(check_matches(RECORD_PAYLOAD_TYPE, &promise).is_ok());

        let observation = pb::Record {
            operation: Some(O::Observation(pb::Observation::default())),
            ..Default::default()
        };
        assert_eq!(payload_type(&observation), RECORD_PAYLOAD_TYPE);
        assert!(
            check_matches(
                "https://suiss.app/ns/work/declaration/promise",
                &observation
            )
            .is_err()
        );
    }
}
