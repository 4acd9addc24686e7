//! The run records (seed 002): each kind stays its own record — "Run state, transition history,
//! actions, decisions, evidence, output, audit events, and persistence are separate
//! authoritative records". They travel as kernel [`Record`](crate::Record)s with
//! [`Operation::Run`](crate::Operation::Run): signed, in the ledger and the Merkle log like any
//! other record. The record's `commitment` is the commitment the run executes (empty when it
//! executes none) and is the same on every record of one run, so federation can route a run's
//! records to the organisations that hold that commitment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::RunState;
use crate::record::{Party, RecordId};

/// One run record: the run it belongs to and what it records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOperation {
    /// The run id (chosen by the run's creator; unique on the node).
    pub run: String,
    /// What the record records.
    pub body: RunBody,
}

/// The closed list of run record kinds, each with its wire name ([`RunBody::wire_name`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunBody {
    /// `run_start`: creates the run in `pending`.
    Start(RunStart),
    /// `run_transition`: a requested move to another state.
    Transition {
        /// The next state.
        to: RunState,
        /// Why, and what a reviewer needs to understand the move.
        context: TransitionContext,
    },
    /// `run_action`: an action the executor takes.
    Action(Action),
    /// `run_proposal`: a proposed action or outcome put up for approval.
    Proposal(Proposal),
    /// `run_decision`: a signed approval decision on a proposal (the record's signature is the
    /// decision's signature).
    Decision(Decision),
    /// `run_evidence`: review material supporting a proposal, action or outcome.
    Evidence(Evidence),
    /// `run_output`: produced material.
    Output(Output),
    /// `run_audit_event`: runtime activity, its own chronology entry.
    AuditEvent(AuditEvent),
}

impl RunBody {
    /// The wire name (record.proto's operation name).
    pub const fn wire_name(&self) -> &'static str {
        match self {
            RunBody::Start(_) => "run_start",
            RunBody::Transition { .. } => "run_transition",
            RunBody::Action(_) => "run_action",
            RunBody::Proposal(_) => "run_proposal",
            RunBody::Decision(_) => "run_decision",
            RunBody::Evidence(_) => "run_evidence",
            RunBody::Output(_) => "run_output",
            RunBody::AuditEvent(_) => "run_audit_event",
        }
    }
}

/// `run_start`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStart {
    /// What triggered the run (a schedule, a request id, …); empty = not recorded.
    pub trigger: String,
    /// Who initiated it; `None` = not recorded (the receipt then shows none; the author is not
    /// assumed to be the initiator).
    pub initiator: Option<Party>,
    /// The run this one recovers or continues (seed 002: "recovery requires a separate
    /// supported run"); must exist.
    pub parent: Option<String>,
    /// The persistence mode the runtime declares for the run; empty = not recorded.
    pub persistence: String,
    /// The operator confirmed replaying the parent's non-idempotent actions (seed 002,
    /// "Failure recovery"); needed when the parent has any.
    pub replay_confirmed: bool,
    /// How often the executor promises a sign of life while it executes a commitment (seed 000:
    /// liveness "stale" is a missed heartbeat); `None` = [`super::DEFAULT_HEARTBEAT_INTERVAL_MS`].
    /// Every record the executor writes on the run is a heartbeat ([`super::RunEffect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval_ms: Option<i64>,
}

/// The context a transition carries (seed 002: "The transition log should preserve prior
/// state, next state, time, and relevant context").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionContext {
    /// Free text: why.
    pub reason: String,
    /// The proposal the move is about (a `run_proposal` of this run).
    pub proposal: Option<RecordId>,
    /// Evidence the move rests on (`run_evidence` records of this run).
    pub evidence: Vec<RecordId>,
    /// Further metadata a reviewer needs.
    pub metadata: BTreeMap<String, String>,
}

impl TransitionContext {
    /// Whether it holds review context: a proposal, evidence or metadata.
    pub fn has_review_context(&self) -> bool {
        self.proposal.is_some() || !self.evidence.is_empty() || !self.metadata.is_empty()
    }
}

/// `run_action`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// The tool or step invoked (required).
    pub tool: String,
    /// What it does.
    pub description: String,
    /// The tool contract says repeating it is harmless.
    pub idempotent: bool,
    /// It changes something outside the run (a side effect).
    pub side_effect: bool,
    /// It may only run after an approving decision.
    pub approval_gated: bool,
    /// The proposal it carries out (a `run_proposal` of this run).
    pub proposal: Option<RecordId>,
    /// A record of the executed commitment this action acts upon: the node writes the
    /// `acted_upon` claim for it ([`RunEffect::ActedUpon`](super::RunEffect::ActedUpon)).
    pub acts_on: Option<RecordId>,
}

/// `run_proposal`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// What is proposed (required).
    pub summary: String,
    /// The action proposed, when it is already recorded.
    pub action: Option<RecordId>,
}

/// A decision's verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Missing on the wire.
    #[default]
    Unspecified,
    /// approve
    Approve,
    /// reject
    Reject,
}

/// `run_decision`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The proposal decided (required; a `run_proposal` of this run).
    pub proposal: Option<RecordId>,
    /// The verdict (required).
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
}

/// Evidence types (seed 002, "Evidence").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// Missing on the wire.
    #[default]
    Unspecified,
    /// source_data
    SourceData,
    /// screenshot
    Screenshot,
    /// report
    Report,
    /// log
    Log,
    /// diff
    Diff,
    /// export
    Export,
    /// audit_snapshot
    AuditSnapshot,
    /// A number outside the closed list (carried as read; rejected).
    Unknown(i32),
}

impl EvidenceKind {
    /// The seven declared kinds, in the seed's order.
    pub const ALL: [EvidenceKind; 7] = [
        EvidenceKind::SourceData,
        EvidenceKind::Screenshot,
        EvidenceKind::Report,
        EvidenceKind::Log,
        EvidenceKind::Diff,
        EvidenceKind::Export,
        EvidenceKind::AuditSnapshot,
    ];

    /// The seed's name (`None` for unspecified or unknown).
    pub const fn wire_name(self) -> Option<&'static str> {
        Some(match self {
            EvidenceKind::SourceData => "source_data",
            EvidenceKind::Screenshot => "screenshot",
            EvidenceKind::Report => "report",
            EvidenceKind::Log => "log",
            EvidenceKind::Diff => "diff",
            EvidenceKind::Export => "export",
            EvidenceKind::AuditSnapshot => "audit_snapshot",
            EvidenceKind::Unspecified | EvidenceKind::Unknown(_) => return None,
        })
    }
}

/// An artifact, by reference: its digest and size. The kernel never holds its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// SHA-256 of the content.
    pub digest: [u8; 32],
    /// Size in bytes.
    pub size: u64,
}

/// `run_evidence`. It supports a claim; it is not verified truth (seed 002).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Its kind (required).
    pub kind: EvidenceKind,
    /// The action it is about (a `run_action` of this run).
    pub action: Option<RecordId>,
    /// What it supports: a proposal, action, output or transition record of this run.
    pub supports: Option<RecordId>,
    /// The artifact, when there is one.
    pub artifact: Option<Artifact>,
    /// What it shows.
    pub description: String,
}

/// `run_output`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// The action that produced it (a `run_action` of this run).
    pub action: Option<RecordId>,
    /// The produced artifact, when there is one.
    pub artifact: Option<Artifact>,
    /// What it is.
    pub summary: String,
}

/// `run_audit_event`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// What happened (required), e.g. `tool_timeout`.
    pub kind: String,
    /// Detail.
    pub detail: String,
}
