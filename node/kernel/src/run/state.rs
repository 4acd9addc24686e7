//! The fourteen run states (seed 002, "Run states": "The runtime uses fourteen exact states").
//! The names are the seed's, used as they are in APIs, logs and documents; no synonyms.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where one run is in its lifecycle. A state says nothing about the run's actions, evidence,
/// decisions or output: those are separate records (seed 002).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// pending: created, not yet scheduled.
    Pending,
    /// queued: scheduled, waiting for an executor.
    Queued,
    /// planning: the executor plans its actions.
    Planning,
    /// running: the executor acts.
    Running,
    /// waiting_for_user: blocked on input from a person.
    WaitingForUser,
    /// awaiting_approval: a proposal waits for signed decisions.
    AwaitingApproval,
    /// partially_approved: some of the required decisions approve, others are still due.
    PartiallyApproved,
    /// paused: halted on purpose; not terminal.
    Paused,
    /// recovering: recovering from a fault; not terminal.
    Recovering,
    /// completed (terminal).
    Completed,
    /// failed (terminal).
    Failed,
    /// rejected (terminal): an approval was refused.
    Rejected,
    /// canceled (terminal).
    Canceled,
    /// expired (terminal).
    Expired,
}

/// The operator obligation a state communicates (seed 002: "Active, waiting, approval,
/// recovery, and terminal states communicate different operator obligations").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunClass {
    /// pending, queued, planning, running.
    Active,
    /// waiting_for_user.
    Waiting,
    /// awaiting_approval, partially_approved.
    Approval,
    /// paused, recovering.
    Recovery,
    /// completed, failed, rejected, canceled, expired.
    Terminal,
}

impl RunState {
    /// All fourteen, in the seed's order.
    pub const ALL: [RunState; 14] = [
        RunState::Pending,
        RunState::Queued,
        RunState::Planning,
        RunState::Running,
        RunState::WaitingForUser,
        RunState::AwaitingApproval,
        RunState::PartiallyApproved,
        RunState::Paused,
        RunState::Recovering,
        RunState::Completed,
        RunState::Failed,
        RunState::Rejected,
        RunState::Canceled,
        RunState::Expired,
    ];

    /// The seed's name.
    pub const fn wire_name(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Queued => "queued",
            RunState::Planning => "planning",
            RunState::Running => "running",
            RunState::WaitingForUser => "waiting_for_user",
            RunState::AwaitingApproval => "awaiting_approval",
            RunState::PartiallyApproved => "partially_approved",
            RunState::Paused => "paused",
            RunState::Recovering => "recovering",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Rejected => "rejected",
            RunState::Canceled => "canceled",
            RunState::Expired => "expired",
        }
    }

    /// From the seed's name (and only from it: `done`, `stopped`, … are not states).
    pub fn from_wire_name(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|st| st.wire_name() == s)
    }

    /// Its class.
    pub const fn class(self) -> RunClass {
        match self {
            RunState::Pending | RunState::Queued | RunState::Planning | RunState::Running => {
                RunClass::Active
            }
            RunState::WaitingForUser => RunClass::Waiting,
            RunState::AwaitingApproval | RunState::PartiallyApproved => RunClass::Approval,
            RunState::Paused | RunState::Recovering => RunClass::Recovery,
            RunState::Completed
            | RunState::Failed
            | RunState::Rejected
            | RunState::Canceled
            | RunState::Expired => RunClass::Terminal,
        }
    }

    /// completed, failed, rejected, canceled and expired: no move leaves them.
    pub const fn is_terminal(self) -> bool {
        matches!(self.class(), RunClass::Terminal)
    }

    /// awaiting_approval and partially_approved: a move into them needs review context.
    pub const fn is_approval(self) -> bool {
        matches!(self.class(), RunClass::Approval)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}
