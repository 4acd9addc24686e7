//! The receipt (seed 002, "Receipts"; issue 12 item 5): a derived view assembled as an index of
//! references to a run's records — never a second copy of them, never a field that no record
//! supports. A field with no underlying record is `None` (absent in JSON), not filled in from
//! the final state: "Missing references should remain missing rather than being reconstructed
//! from a final state."
//!
//! The seed defines no canonical receipt schema; this is Accord's. It guarantees references to
//! the authoritative records (the node adds their inclusion proofs); it promises no retention,
//! immutability or export format.

use serde::{Deserialize, Serialize};

use super::run::Run;
use super::state::RunState;
use crate::record::{Party, RecordId};

/// An approval-gated action and the signed decisions that approve it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatedAction {
    /// The `run_action` record.
    pub action: RecordId,
    /// The approving `run_decision` records on the action's proposal; empty = the run has no
    /// signed decision authorizing it, and the receipt says so.
    pub approvals: Vec<RecordId>,
}

/// A run's receipt: references only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Run identity.
    pub run: String,
    /// The `run_start` record.
    pub run_record: RecordId,
    /// The commitment executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commitment: Option<String>,
    /// The trigger, as the run_start recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// The initiator, as the run_start recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<Party>,
    /// The parent run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// When the run was created (the run_start record).
    pub created_at: i64,
    /// When it first entered `running` (a transition record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When it entered a terminal state (a transition record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// The current or terminal state.
    pub state: RunState,
    /// Whether `state` is terminal.
    pub terminal: bool,
    /// Transition records, oldest first.
    pub transitions: Vec<RecordId>,
    /// Action records.
    pub actions: Vec<RecordId>,
    /// Proposal records.
    pub proposals: Vec<RecordId>,
    /// Signed decision records.
    pub decisions: Vec<RecordId>,
    /// Evidence records.
    pub evidence: Vec<RecordId>,
    /// Output records.
    pub outputs: Vec<RecordId>,
    /// Whether any output record exists.
    pub output_present: bool,
    /// Audit event records.
    pub audit_events: Vec<RecordId>,
    /// Approval-gated actions, each with the decisions that approve it (or none).
    pub gated_actions: Vec<GatedAction>,
    /// How many runs name this one as their parent.
    pub child_runs: usize,
    /// The persistence mode, as the run_start recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<String>,
}

impl Receipt {
    /// Every record the receipt references (for the node's inclusion proofs), each once.
    pub fn references(&self) -> Vec<RecordId> {
        let mut all = vec![self.run_record];
        for list in [
            &self.transitions,
            &self.actions,
            &self.proposals,
            &self.decisions,
            &self.evidence,
            &self.outputs,
            &self.audit_events,
        ] {
            for id in list {
                if !all.contains(id) {
                    all.push(*id);
                }
            }
        }
        all
    }

    /// Approval-gated actions without an approving signed decision.
    pub fn unapproved_gated_actions(&self) -> impl Iterator<Item = &RecordId> {
        self.gated_actions
            .iter()
            .filter(|g| g.approvals.is_empty())
            .map(|g| &g.action)
    }
}

fn text(s: &str) -> Option<String> {
    (!s.trim().is_empty()).then(|| s.to_string())
}

/// The receipt of `run`; `child_runs` = how many runs the node knows with `run` as parent
/// ([`child_count`]).
pub fn receipt(run: &Run, child_runs: usize) -> Receipt {
    let start = &run.start.body;
    let gated_actions = run
        .actions
        .iter()
        .filter(|a| a.body.approval_gated)
        .map(|a| GatedAction {
            action: a.record,
            approvals: a
                .body
                .proposal
                .map(|p| run.approvals_of(&p).map(|d| d.record).collect())
                .unwrap_or_default(),
        })
        .collect();
    Receipt {
        run: run.id.clone(),
        run_record: run.start.record,
        commitment: run.commitment.clone(),
        trigger: text(&start.trigger),
        initiator: start.initiator.clone(),
        parent: start.parent.clone(),
        created_at: run.start.at,
        started_at: run.started_at(),
        ended_at: run.ended_at(),
        state: run.state,
        terminal: run.state.is_terminal(),
        transitions: run.transitions.iter().map(|e| e.record).collect(),
        actions: run.actions.iter().map(|e| e.record).collect(),
        proposals: run.proposals.iter().map(|e| e.record).collect(),
        decisions: run.decisions.iter().map(|e| e.record).collect(),
        evidence: run.evidence.iter().map(|e| e.record).collect(),
        outputs: run.outputs.iter().map(|e| e.record).collect(),
        output_present: !run.outputs.is_empty(),
        audit_events: run.audit_events.iter().map(|e| e.record).collect(),
        gated_actions,
        child_runs,
        persistence_mode: text(&start.persistence),
    }
}

/// How many of `runs` name `id` as their parent.
pub fn child_count<'a>(runs: impl IntoIterator<Item = &'a Run>, id: &str) -> usize {
    runs.into_iter().filter(|r| r.parent() == Some(id)).count()
}
