//! Recovery (seed 002, "Failure recovery"; issue 12 item 7). A terminal run is never reopened:
//! recovery is a new run whose `run_start` names the first as `parent`. Before the node replays
//! or starts that run it shows the operator what the first run already did, because "if a
//! failed run already produced an external side effect, creating another run can repeat that
//! effect even when the state machine permits a recovery path". A replay of a run with an
//! action whose tool contract is not idempotent needs `replay_confirmed` on the new run's
//! `run_start` ([`replay_needs_confirmation`]; `apply_run` refuses it otherwise with
//! `replay_not_confirmed`).

use serde::{Deserialize, Serialize};

use super::run::Run;
use super::state::RunState;
use crate::record::RecordId;

/// What a run already did, for the operator deciding on a replay or a recovery run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorWork {
    /// The run.
    pub run: String,
    /// Its state now.
    pub state: RunState,
    /// Every action.
    pub actions: Vec<RecordId>,
    /// Actions with an output record.
    pub actions_with_output: Vec<RecordId>,
    /// Actions with a side effect outside the run.
    pub side_effects: Vec<RecordId>,
    /// Actions whose tool contract is not idempotent.
    pub not_idempotent: Vec<RecordId>,
    /// Signed decisions (approvals and rejections) already given.
    pub decisions: Vec<RecordId>,
    /// Outputs produced.
    pub outputs: Vec<RecordId>,
    /// Child runs already linked to it (recoveries started before).
    pub child_runs: usize,
    /// The persistence mode, as recorded.
    pub persistence_mode: Option<String>,
    /// Whether a replay needs the operator's explicit confirmation.
    pub needs_confirmation: bool,
}

/// Whether replaying `run` needs an explicit confirmation: it has an action whose tool contract
/// is not idempotent.
pub fn replay_needs_confirmation(run: &Run) -> bool {
    run.actions.iter().any(|a| !a.body.idempotent)
}

/// What `run` already did (`child_runs`: how many runs name it as parent).
pub fn prior_work(run: &Run, child_runs: usize) -> PriorWork {
    let ids = |pred: &dyn Fn(&super::run::Entry<super::record::Action>) -> bool| {
        run.actions
            .iter()
            .filter(|a| pred(a))
            .map(|a| a.record)
            .collect::<Vec<_>>()
    };
    PriorWork {
        run: run.id.clone(),
        state: run.state,
        actions: ids(&|_| true),
        actions_with_output: ids(&|a| run.outputs.iter().any(|o| o.body.action == Some(a.record))),
        side_effects: ids(&|a| a.body.side_effect),
        not_idempotent: ids(&|a| !a.body.idempotent),
        decisions: run.decisions.iter().map(|d| d.record).collect(),
        outputs: run.outputs.iter().map(|o| o.record).collect(),
        child_runs,
        persistence_mode: (!run.start.body.persistence.trim().is_empty())
            .then(|| run.start.body.persistence.clone()),
        needs_confirmation: replay_needs_confirmation(run),
    }
}
