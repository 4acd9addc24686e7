//! Runs and the commitments they execute (issue 12, item 6): a run's state is its executor's
//! claim on the commitment's execution axis (seed 000, "Other state axes": "Execution, control
//! and liveness come from executor or external Claims"). The node turns a transition into an
//! `observation` carrying [`execution_report`]; the commitment's axis is then derived by
//! [`claims::execution`](crate::claims::execution) like any other claim, so a stop request, a
//! contradiction or an unmapped state still shows as the kernel derives it.
//!
//! | run state | execution claim |
//! |---|---|
//! | `pending`, `queued` | `not_started` |
//! | `planning`, `running`, `recovering` | `running` |
//! | `waiting_for_user`, `awaiting_approval`, `partially_approved`, `paused` | `paused` |
//! | `completed` | `completed_reported` |
//! | `failed` | `failed` |
//! | `canceled`, `rejected`, `expired` | `cancelled_reported` |
//!
//! Waiting and approval states claim `paused`: the executor does not proceed until someone
//! else acts. `rejected` and `expired` end the work without completing it and without a fault,
//! so they claim `cancelled_reported`, keeping `failed` for faults.

use super::state::RunState;
use crate::claims::Execution;
use crate::record::ExecutionReport;

/// The execution claim (the observation's `execution`) for a run in `state`.
pub const fn execution_report(state: RunState) -> ExecutionReport {
    use RunState as S;
    match state {
        S::Pending | S::Queued => ExecutionReport::NotStarted,
        S::Planning | S::Running | S::Recovering => ExecutionReport::Running,
        S::WaitingForUser | S::AwaitingApproval | S::PartiallyApproved | S::Paused => {
            ExecutionReport::Paused
        }
        S::Completed => ExecutionReport::Completed,
        S::Failed => ExecutionReport::Failed,
        S::Canceled | S::Rejected | S::Expired => ExecutionReport::Cancelled,
    }
}

/// The execution-axis value that claim stands for when no stop, contradiction or unmapped
/// state overrides it.
pub const fn execution(state: RunState) -> Execution {
    match execution_report(state) {
        ExecutionReport::NotStarted => Execution::NotStarted,
        ExecutionReport::Running => Execution::Running,
        ExecutionReport::Paused => Execution::Paused,
        ExecutionReport::Completed => Execution::Completed,
        ExecutionReport::Failed => Execution::Failed,
        ExecutionReport::Cancelled => Execution::Cancelled,
        ExecutionReport::Stopped => Execution::Stopped,
        ExecutionReport::Unspecified | ExecutionReport::Unknown(_) => Execution::Unknown,
    }
}
