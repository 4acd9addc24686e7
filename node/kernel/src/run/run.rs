//! [`Run`]: the derived state of one run — its current state and, kept apart, the transition
//! log and the references to its actions, proposals, decisions, evidence, outputs and audit
//! events. Only [`apply_run`](super::apply_run) produces it; replaying the same records gives
//! the same value.

use serde::{Deserialize, Serialize};

use super::record::{
    Action, AuditEvent, Decision, Evidence, Output, Proposal, RunStart, TransitionContext,
};
use super::state::RunState;
use crate::record::{Party, RecordId};

/// One record of a run as kept in its derived state: which record, by whom, when, and its body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry<T> {
    /// The record.
    pub record: RecordId,
    /// Its author.
    pub by: Party,
    /// When it was applied (ledger time, Unix ms).
    pub at: i64,
    /// What it recorded.
    pub body: T,
}

/// One line of the transition log (seed 002: "prior state, next state, time, and relevant
/// context").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The prior state.
    pub prior: RunState,
    /// The next state.
    pub next: RunState,
    /// The context the transition carried.
    pub context: TransitionContext,
}

/// The derived state of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// The run id.
    pub id: String,
    /// The commitment it executes (`None`: it executes none).
    pub commitment: Option<String>,
    /// The `run_start` record.
    pub start: Entry<RunStart>,
    /// The current state.
    pub state: RunState,
    /// The transition log, oldest first.
    pub transitions: Vec<Entry<Transition>>,
    /// Actions.
    pub actions: Vec<Entry<Action>>,
    /// Proposals.
    pub proposals: Vec<Entry<Proposal>>,
    /// Signed approval decisions.
    pub decisions: Vec<Entry<Decision>>,
    /// Evidence.
    pub evidence: Vec<Entry<Evidence>>,
    /// Outputs.
    pub outputs: Vec<Entry<Output>>,
    /// Audit events.
    pub audit_events: Vec<Entry<AuditEvent>>,
    /// Every record applied, in order (duplicates are refused).
    pub history: Vec<RecordId>,
    /// Ledger time of the last record applied.
    pub updated_at: i64,
    /// Ledger time of the run's last claim on its commitment (an execution claim or a
    /// heartbeat, [`super::RunEffect`]); heartbeats are coalesced to one per half interval.
    #[serde(default)]
    pub last_claim_at: i64,
}

impl Run {
    /// The executing organisation: the organisation of the party that started the run.
    pub fn organisation(&self) -> &str {
        &self.start.by.organisation
    }

    /// The run's executor: the party that started it (seed 002's records of what the run did
    /// are its own; see [`who`](super::who)).
    pub fn executor(&self) -> &Party {
        &self.start.by
    }

    /// The parent run, if this run recovers or continues another.
    pub fn parent(&self) -> Option<&str> {
        self.start.body.parent.as_deref()
    }

    /// The first time the run entered `running`, if it ever did.
    pub fn started_at(&self) -> Option<i64> {
        self.transitions
            .iter()
            .find(|t| t.body.next == RunState::Running)
            .map(|t| t.at)
    }

    /// The time of the transition into a terminal state, if it reached one.
    pub fn ended_at(&self) -> Option<i64> {
        self.transitions
            .iter()
            .find(|t| t.body.next.is_terminal())
            .map(|t| t.at)
    }

    /// Whether `id` is a record of this run of the kind `kind` (for reference checks).
    pub(crate) fn has(&self, kind: RefKind, id: &RecordId) -> bool {
        match kind {
            RefKind::Action => self.actions.iter().any(|e| e.record == *id),
            RefKind::Proposal => self.proposals.iter().any(|e| e.record == *id),
            RefKind::Evidence => self.evidence.iter().any(|e| e.record == *id),
            RefKind::Any => self.history.contains(id),
        }
    }

    /// The approving decisions on `proposal`.
    pub fn approvals_of(&self, proposal: &RecordId) -> impl Iterator<Item = &Entry<Decision>> {
        self.decisions.iter().filter(move |d| {
            d.body.proposal.as_ref() == Some(proposal)
                && d.body.verdict == super::record::Verdict::Approve
        })
    }
}

/// What a reference must name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RefKind {
    Action,
    Proposal,
    Evidence,
    /// Any record of the run.
    Any,
}
