//! Records and operations: the kernel's own form of `accord.record.v1.Record` (seed 000,
//! "Operations"). The node converts the protobuf form into these types at its edge; the kernel
//! knows no generated types.
//!
//! Conversion conventions for the node: an empty `PartyRef` becomes `None`; a `0` time or length
//! becomes `None`; a missing `Terms` becomes `Terms::default()`; an empty digest or reference
//! (`bytes`) becomes `None`, and one that is not 32 bytes long is rejected by the node with
//! [`RejectionCode::Malformed`](crate::RejectionCode::Malformed). Enum numbers are carried as
//! read (`from_wire`), so the kernel itself tells a missing code from an unknown one.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::envelope::{EnvelopeOperation, Tick};
use crate::run::RunOperation;

pub use crate::terms::{AcceptanceCriterion, Budget, LineItem, Queue, Request, Terms};

pub use crate::content::{Aggregation, Condition, GateParticipants, Observation};
pub use crate::reasons::{
    AdmissionOutcome, AggregationRule, CancelReason, ControlReport, DeclineReason, Distribution,
    ExecutionReport, GateAnswer, GateKind, NoticeType, RecheckOutcome, StopAnswer, StopMode,
};

/// A record id: SHA-256 of the record's signed bytes (DESIGN.md, "Records and signing").
pub type RecordId = [u8; 32];

/// A party: a person or system acting for one organisation.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Party {
    /// The organisation the party acts for (the federation peer name).
    pub organisation: String,
    /// The party's name inside its organisation.
    pub name: String,
}

impl Party {
    /// A party `name` acting for `organisation`.
    pub fn new(organisation: impl Into<String>, name: impl Into<String>) -> Self {
        Party {
            organisation: organisation.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.organisation, self.name)
    }
}

/// Which revoke request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevokeKind {
    /// revoke_request
    Request,
    /// revoke_promise
    Promise,
    /// revoke_statement
    Statement,
    /// revoke_acceptance
    Acceptance,
}

impl RevokeKind {
    /// The four kinds.
    pub const ALL: [RevokeKind; 4] = [
        RevokeKind::Request,
        RevokeKind::Promise,
        RevokeKind::Statement,
        RevokeKind::Acceptance,
    ];

    /// The wire name.
    pub const fn wire_name(self) -> &'static str {
        match self {
            RevokeKind::Request => "revoke_request",
            RevokeKind::Promise => "revoke_promise",
            RevokeKind::Statement => "revoke_statement",
            RevokeKind::Acceptance => "revoke_acceptance",
        }
    }
}

/// One record as the kernel sees it: an authenticated author, the commitment it acts on, the
/// records it rests on, the line items it acts on, and the operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The record's id (SHA-256 of its signed bytes).
    pub id: RecordId,
    /// The author, as authenticated by the node (signature key -> party).
    pub author: Party,
    /// The commitment id this record acts on.
    pub commitment: String,
    /// Record ids this record rests on.
    pub basis: Vec<RecordId>,
    /// Line items acted on; empty = every item that is still open (or every item, if none is).
    pub items: Vec<String>,
    /// The operation.
    pub op: Operation,
}

/// The closed list of operations (seed 000, "Operations" and "Assignment"; record.proto's
/// `oneof operation`). `delegate` and `assign` are two records each, so they are two variants each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Creates the commitment.
    Request(Box<Request>),
    /// The candidate obligor promises.
    Promise,
    /// A promise under a precondition with a deadline.
    PromiseConditional {
        /// The precondition.
        condition: Condition,
        /// Its deadline; also the validity statement of the conditional promise.
        deadline: Option<i64>,
    },
    /// The candidate obligor declines.
    Decline {
        /// Required reason code.
        reason: DeclineReason,
        /// Optional text.
        text: String,
    },
    /// Changed terms.
    Counter {
        /// The whole new terms.
        terms: Option<Terms>,
    },
    /// The obligee accepts the current counter version.
    AcceptCounter {
        /// The id of the counter record accepted.
        counter_digest: Option<RecordId>,
    },
    /// The obligor states fulfilment.
    State {
        /// Fulfilment references (at least one).
        fulfillment_refs: Vec<String>,
    },
    /// The acceptor (or, marked implicit, the Work service party) accepts.
    Accept {
        /// Evidence reference.
        evidence_ref: String,
        /// True only on the Work service party's implicit accept.
        implicit: bool,
        /// The author passed step-up authentication.
        step_up: bool,
    },
    /// The acceptor rejects the statement.
    Reject {
        /// Required reason.
        reason: String,
    },
    /// The obligor cancels.
    Cancel {
        /// Required reason code.
        reason: CancelReason,
        /// Optional text.
        text: String,
    },
    /// The obligee releases the obligor.
    Release {
        /// Optional reason.
        reason: String,
    },
    /// delegate, first record: the obligor's offer.
    DelegateOffer {
        /// The proposed new obligor.
        to: Option<Party>,
        /// Required handover note.
        handover_note: String,
    },
    /// delegate, second record: the new obligor's acceptance.
    DelegateAcceptance {
        /// The offer accepted.
        offer_id: Option<RecordId>,
    },
    /// assign, first record: the obligee's offer.
    AssignOffer {
        /// The proposed new obligee.
        to: Option<Party>,
    },
    /// assign, second record: the new obligee's acceptance.
    AssignAcceptance {
        /// The offer accepted.
        offer_id: Option<RecordId>,
    },
    /// The obligor disputes a reject or an open revoke_acceptance.
    Dispute {
        /// The disputed record.
        disputed_record: Option<RecordId>,
        /// Required reason.
        reason: String,
    },
    /// Defers the commitment.
    Defer {
        /// Required reason.
        reason: String,
        /// Optional return date.
        return_at: Option<i64>,
        /// Optional return event.
        return_event: String,
    },
    /// Closes an open defer (named in basis).
    Resume {
        /// The return event that occurred, if resuming on one.
        event: String,
    },
    /// Asks to revoke the request.
    RevokeRequest {
        /// Required reason.
        reason: String,
    },
    /// Asks to revoke the promise.
    RevokePromise {
        /// Required reason.
        reason: String,
    },
    /// Asks to revoke the statement.
    RevokeStatement {
        /// Required reason.
        reason: String,
    },
    /// Asks to revoke the acceptance.
    RevokeAcceptance {
        /// Required reason.
        reason: String,
    },
    /// Allows the open revoke request named in basis.
    Allow {
        /// Optional reason.
        reason: String,
        /// For revoke_acceptance: the reopening commitment's id (derived if empty).
        reopening_commitment_id: String,
    },
    /// Refuses the open revoke request named in basis.
    Refuse {
        /// Required reason.
        reason: String,
    },
    /// A new version of the terms (and, optionally, new participant sets of gates).
    Amend {
        /// The version superseded (required).
        supersedes: Option<RecordId>,
        /// The new terms.
        terms: Option<Terms>,
        /// New participant sets of open gates.
        participants: Vec<GateParticipants>,
    },
    /// Attention and notification, no state change.
    Notice {
        /// Required notice type.
        notice_type: NoticeType,
        /// Optional text.
        text: String,
    },
    /// The parent aim or commitment went away.
    DeclareObsolete {
        /// Required reference to the parent.
        parent_ref: String,
    },
    /// Written by the Work service party on a due validity statement.
    Expire,
    /// By a party with that authority in Access.
    AdministrativeClose {
        /// Required reason.
        reason: String,
    },
    /// A party in the candidate set claims the commitment.
    Claim,
    /// Returns the commitment to the pool.
    Unclaim {
        /// Optional reason.
        reason: String,
    },
    /// Moves the commitment to another queue.
    Forward {
        /// The new queue.
        to: Option<Queue>,
    },
    /// Proposes a candidate.
    Nominate {
        /// The nominee.
        candidate: Option<Party>,
    },
    /// Offers the commitment to a specific party.
    Offer {
        /// The party offered to.
        to: Option<Party>,
    },
    /// An offer opens to a new party.
    Reassign {
        /// The new party.
        to: Option<Party>,
    },
    /// The obligor extends its lease.
    RenewLease {
        /// New lease length from now; `None` = the queue's lease length.
        lease_ms: Option<i64>,
    },
    /// Opens a Condition on the commitment.
    OpenCondition {
        /// The condition.
        condition: Condition,
    },
    /// The Condition owner withdraws the condition named in basis.
    WithdrawCondition,
    /// The addressed party satisfies the condition named in basis.
    SatisfyCondition,
    /// Consumption reported against the budget.
    ReportConsumption {
        /// Amount consumed by this report.
        amount: u64,
    },
    /// The local admission declaration about a peer's record.
    Admission {
        /// The peer record's id.
        record_id: Option<RecordId>,
        /// The peer it came from.
        peer: String,
        /// The outcome.
        outcome: AdmissionOutcome,
        /// Reason code for quarantined or rejected.
        code: String,
        /// For a quarantine that closes: the admission record that opened it.
        closes: Option<RecordId>,
        /// The declaration's declared time: for a decision of a commitment's home, the time
        /// the home applied the record (issue 26: every other holder applies it with this
        /// `now`, so a check against time has one answer).
        at: i64,
    },
    /// An executor reports an Act based on a record.
    ActedUpon {
        /// The record acted on.
        record_id: Option<RecordId>,
        /// What was done.
        act: String,
    },
    /// A participant answers the gate named in basis; the Work service party closes an open
    /// participant request as obsolete after an early decision (naming `participant`).
    GateDecision {
        /// The answer.
        answer: GateAnswer,
        /// The terms version (record id) the answer was given on; must be the current one.
        content_digest: Option<RecordId>,
        /// For the Work service party's obsolete closing: the participant closed.
        participant: Option<Party>,
        /// Optional reason.
        reason: String,
    },
    /// An executor's observation claim.
    Observation(Box<Observation>),
    /// Asks the executor to stop or pause.
    StopRequest {
        /// How.
        mode: StopMode,
        /// Optional reason.
        reason: String,
    },
    /// The executor answers the open stop request (named in basis).
    StopResponse {
        /// The answer.
        answer: StopAnswer,
        /// Required for refuse.
        reason: String,
    },
    /// Continuing after a stop (basis names the stop request); never automatic.
    ResumeAfterStop {
        /// Optional reason.
        reason: String,
    },
    /// A person takes control (the control axis shows manual with the holder).
    ControlLease {
        /// The holder (required).
        holder: Option<Party>,
        /// Optional end of the lease.
        until: Option<i64>,
    },
    /// The holder hands control back (basis names the control_lease).
    HandBackControl {
        /// Required handoff note.
        handoff_note: String,
    },
    /// The re-check after control was handed back: continue or re-plan.
    Recheck {
        /// The outcome.
        outcome: RecheckOutcome,
        /// Optional note.
        note: String,
    },
    /// A run record (seed 002): applied by [`apply_run`](crate::run::apply_run), never by
    /// `apply` (`wrong_machine`).
    Run(Box<RunOperation>),
    /// A commit-envelope record (seed 003): applied by
    /// [`apply_envelope`](crate::envelope::apply_envelope).
    Envelope(Box<EnvelopeOperation>),
    /// The scheduler's tick (seed 003, `kind: system`): applied to each open envelope by
    /// [`apply_tick`](crate::envelope::apply_tick).
    Tick(Tick),
}

impl Operation {
    /// The seed's wire name (the `oneof` field name in record.proto).
    pub fn wire_name(&self) -> &'static str {
        use Operation::*;
        match self {
            Request(_) => "request",
            Promise => "promise",
            PromiseConditional { .. } => "promise_conditional",
            Decline { .. } => "decline",
            Counter { .. } => "counter",
            AcceptCounter { .. } => "accept_counter",
            State { .. } => "state",
            Accept { .. } => "accept",
            Reject { .. } => "reject",
            Cancel { .. } => "cancel",
            Release { .. } => "release",
            DelegateOffer { .. } | DelegateAcceptance { .. } => "delegate",
            AssignOffer { .. } | AssignAcceptance { .. } => "assign",
            Dispute { .. } => "dispute",
            Defer { .. } => "defer",
            Resume { .. } => "resume",
            RevokeRequest { .. } => RevokeKind::Request.wire_name(),
            RevokePromise { .. } => RevokeKind::Promise.wire_name(),
            RevokeStatement { .. } => RevokeKind::Statement.wire_name(),
            RevokeAcceptance { .. } => RevokeKind::Acceptance.wire_name(),
            Allow { .. } => "allow",
            Refuse { .. } => "refuse",
            Amend { .. } => "amend",
            Notice { .. } => "notice",
            DeclareObsolete { .. } => "declare_obsolete",
            Expire => "expire",
            AdministrativeClose { .. } => "administrative_close",
            Claim => "claim",
            Unclaim { .. } => "unclaim",
            Forward { .. } => "forward",
            Nominate { .. } => "nominate",
            Offer { .. } => "offer",
            Reassign { .. } => "reassign",
            RenewLease { .. } => "renew_lease",
            OpenCondition { .. } => "open_condition",
            WithdrawCondition => "withdraw_condition",
            SatisfyCondition => "satisfy_condition",
            ReportConsumption { .. } => "report_consumption",
            Admission { .. } => "admission",
            ActedUpon { .. } => "acted_upon",
            GateDecision { .. } => "gate_decision",
            Operation::Observation(_) => "observation",
            StopRequest { .. } => "stop_request",
            StopResponse { .. } => "stop_response",
            ResumeAfterStop { .. } => "resume_after_stop",
            ControlLease { .. } => "control_lease",
            HandBackControl { .. } => "hand_back_control",
            Recheck { .. } => "recheck",
            Run(r) => r.body.wire_name(),
            Envelope(e) => e.step.wire_name(),
            Tick(_) => "tick",
        }
    }

    /// The declaration type URI (seed 000: `https://suiss.app/ns/work/declaration/<wire name>`).
    pub fn declaration_type(&self) -> String {
        format!("https://suiss.app/ns/work/declaration/{}", self.wire_name())
    }
}

/// Lower-case hex of a record id (for details and derived ids).
pub fn hex_id(id: &RecordId) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in id {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 0x0f) as usize] as char);
    }
    s
}
