//! Rejections: an invalid operation is rejected with a machine-readable reason and recorded by
//! the caller; the commitment does not change (seed 000, "Operations").

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal),+ $(,)?) => {
        /// Why a record was rejected. A closed list; `as_str` gives the snake_case code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum RejectionCode {
            $($(#[$doc])* $variant,)+
        }

        impl RejectionCode {
            /// Every code.
            pub const ALL: &'static [RejectionCode] = &[$(RejectionCode::$variant),+];

            /// The snake_case code.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(RejectionCode::$variant => $wire,)+
                }
            }

            /// From the snake_case code.
            pub fn from_str_code(s: &str) -> Option<Self> {
                match s {
                    $($wire => Some(RejectionCode::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// The node could not convert the wire record (e.g. a reference that is not 32 bytes).
    Malformed => "malformed",
    /// The record acts on a commitment that does not exist (and is not a request).
    UnknownCommitment => "unknown_commitment",
    /// A request names a commitment that already exists.
    CommitmentExists => "commitment_exists",
    /// The record names another commitment than the state it was applied to.
    WrongCommitment => "wrong_commitment",
    /// The record was already applied to this commitment.
    DuplicateRecord => "duplicate_record",
    /// Access does not let the author act for the organisation it claims.
    NotAuthorized => "not_authorized",
    /// The author holds none of the roles the operation needs (including Access authorities).
    WrongRole => "wrong_role",
    /// The state of an item acted on does not allow the operation.
    InvalidState => "invalid_state",
    /// An item acted on is in a terminal state, which never changes.
    TerminalState => "terminal_state",
    /// A named line item does not exist.
    UnknownItem => "unknown_item",
    /// A line item is named twice.
    DuplicateItem => "duplicate_item",
    /// The operation acts on fixed items (those of the revoke or precondition) and names others.
    ItemMismatch => "item_mismatch",
    /// New terms change the set of line item ids.
    ItemSetChanged => "item_set_changed",
    /// A required field is missing (request minimum fields, a party, an id, an amount).
    MissingField => "missing_field",
    /// Counter or amend without terms.
    MissingTerms => "missing_terms",
    /// A counter whose terms equal the current ones.
    UnchangedTerms => "unchanged_terms",
    /// A reason (or reason code) is required and missing.
    MissingReason => "missing_reason",
    /// A reason code outside the closed list.
    UnknownReasonCode => "unknown_reason_code",
    /// A notice without a notice type.
    MissingNoticeType => "missing_notice_type",
    /// A notice type outside the closed list.
    UnknownNoticeType => "unknown_notice_type",
    /// promise_conditional / open_condition without a complete Condition.
    MissingCondition => "missing_condition",
    /// promise_conditional without a deadline.
    MissingDeadline => "missing_deadline",
    /// A deadline that is not in the future.
    InvalidDeadline => "invalid_deadline",
    /// accept_counter without a digest.
    MissingDigest => "missing_digest",
    /// accept_counter naming a counter version that is not the current one.
    StaleCounterDigest => "stale_counter_digest",
    /// state without fulfilment references.
    MissingFulfillmentRefs => "missing_fulfillment_refs",
    /// The acceptance criterion requires evidence and there is none.
    MissingEvidence => "missing_evidence",
    /// The four-eyes rule blocks the acceptance.
    FourEyes => "four_eyes",
    /// Step-up is required for the acceptance.
    StepUpRequired => "step_up_required",
    /// A delegate offer without a handover note.
    MissingHandoverNote => "missing_handover_note",
    /// A delegate/assign acceptance naming no open offer.
    UnknownOffer => "unknown_offer",
    /// The record does not name, in basis, the record it must rest on.
    MissingBasis => "missing_basis",
    /// A Work service record before its time (or without the declared behaviour to rest on).
    NotDue => "not_due",
    /// An implicit accept on a commitment without implicit acceptance terms.
    NoImplicitAcceptance => "no_implicit_acceptance",
    /// defer while a defer is open.
    AlreadyDeferred => "already_deferred",
    /// resume without an open defer.
    NoOpenDefer => "no_open_defer",
    /// resume naming an event that is not the deferral's return event.
    EventMismatch => "event_mismatch",
    /// A Work service offer naming another party than the queue's distribution policy picks, or
    /// made when the policy finds no candidate.
    PolicyMismatch => "policy_mismatch",
    /// A revoke request while another is open.
    RevokePending => "revoke_pending",
    /// allow/refuse without an open revoke request.
    NoOpenRevoke => "no_open_revoke",
    /// dispute of a record that is neither a reject nor an open revoke_acceptance.
    NotDisputable => "not_disputable",
    /// dispute of a record already disputed.
    AlreadyDisputed => "already_disputed",
    /// amend without `supersedes`.
    MissingSupersedes => "missing_supersedes",
    /// amend superseding a version that is not the current one.
    StaleVersion => "stale_version",
    /// declare_obsolete without the parent reference.
    MissingParentRef => "missing_parent_ref",
    /// renew_lease (or a service unclaim) without a lease.
    NoLease => "no_lease",
    /// claim while another party holds the commitment.
    AlreadyHeld => "already_held",
    /// withdraw/satisfy naming no open condition.
    NoOpenCondition => "no_open_condition",
    /// A gate kind outside the closed list.
    UnknownGateKind => "unknown_gate_kind",
    /// A gate's aggregation policy that cannot work (K outside 1..=N, p outside 1..=100).
    InvalidAggregation => "invalid_aggregation",
    /// A participant named twice.
    DuplicateParticipant => "duplicate_participant",
    /// Sequential: the participant's request is not open yet.
    NotYourTurn => "not_your_turn",
    /// The gate's deadline passed.
    DeadlinePassed => "deadline_passed",
    /// The participant (or stop request) already has an answer that still counts.
    AlreadyAnswered => "already_answered",
    /// stop_response / resume_after_stop / control_lease without a stop request that holds.
    NoOpenStop => "no_open_stop",
    /// stop_request while another still holds.
    StopPending => "stop_pending",
    /// control_lease before the executor confirmed the pause or reported a checkpoint.
    NotPaused => "not_paused",
    /// hand_back_control without a held control lease.
    NoControlLease => "no_control_lease",
    /// recheck before control was handed back.
    NoHandBack => "no_hand_back",
    /// The record belongs to another machine: a run, envelope or tick record given to the
    /// commitment machine, or the reverse.
    WrongMachine => "wrong_machine",
    /// A run record names a run (or parent run) that does not exist.
    UnknownRun => "unknown_run",
    /// A run_start names a run that already exists.
    RunExists => "run_exists",
    /// A run holds [`MAX_RUN_RECORDS`](crate::run::MAX_RUN_RECORDS) records; the work goes on
    /// in a child run (a `run_start` naming it as `parent`).
    RunFull => "run_full",
    /// A move into awaiting_approval or partially_approved without a proposal, evidence or
    /// metadata.
    MissingApprovalContext => "missing_approval_context",
    /// A run record references a record that is not one of this run's (of the kind needed).
    UnknownReference => "unknown_reference",
    /// A run replaying a parent with non-idempotent actions, without the operator's confirmation.
    ReplayNotConfirmed => "replay_not_confirmed",
    /// An envelope record names an envelope that does not exist.
    UnknownEnvelope => "unknown_envelope",
    /// An envelope_start names an envelope that already exists.
    EnvelopeExists => "envelope_exists",
    /// An envelope_start names an envelope type that is not declared.
    UnknownEnvelopeType => "unknown_envelope_type",
    /// A lifecycle record whose event name is not the declared one.
    UndeclaredEvent => "undeclared_event",
    /// A vote by an organisation that is not a participant of the envelope.
    NotParticipant => "not_participant",
    /// A participant answering differently from its recorded answer.
    VoteChanged => "vote_changed",
    /// A commit at a participant whose own ACK is not recorded.
    NotPrepared => "not_prepared",
    /// A record of this organisation's party on a commitment that an open commit envelope holds
    /// (its staged records are the only ones this node writes on it until the envelope ends).
    EnvelopeHold => "envelope_hold",
}

impl fmt::Display for RejectionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rejection: the code and a human-readable detail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct Rejection {
    /// The machine-readable code.
    pub code: RejectionCode,
    /// Human-readable detail.
    pub detail: String,
}

impl Rejection {
    /// A rejection with `code` and `detail`.
    pub fn new(code: RejectionCode, detail: impl Into<String>) -> Self {
        Rejection {
            code,
            detail: detail.into(),
        }
    }

    /// For the node: a wire record that could not be converted.
    pub fn malformed(detail: impl Into<String>) -> Self {
        Rejection::new(RejectionCode::Malformed, detail)
    }
}

/// Shorthand: `Err(Rejection)`.
pub(crate) fn reject<T>(code: RejectionCode, detail: impl Into<String>) -> Result<T, Rejection> {
    Err(Rejection::new(code, detail))
}

/// Shorthand: reject with `code` unless `ok`.
pub(crate) fn ensure(
    ok: bool,
    code: RejectionCode,
    detail: impl Into<String>,
) -> Result<(), Rejection> {
    if ok { Ok(()) } else { reject(code, detail) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_roundtrip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for c in RejectionCode::ALL {
            assert!(seen.insert(c.as_str()), "duplicate {c}");
            assert_eq!(RejectionCode::from_str_code(c.as_str()), Some(*c));
        }
    }
}
