//! The run transition table: the one place where the moves between run states are declared
//! (seed 002, "Transitions": "Allowed transitions are declared by the state machine and invalid
//! moves return explicit errors"). The seed names the states and the rules about terminal and
//! approval states but lists no arrows; the arrows below are Accord's, written out in
//! ARCHITECTURE.md ("Runs: the transition table").
//!
//! | from | allowed next states |
//! |---|---|
//! | `pending` | `queued`, `planning`, `running`, `canceled`, `expired` |
//! | `queued` | `planning`, `running`, `paused`, `canceled`, `expired` |
//! | `planning` | `running`, `waiting_for_user`, `awaiting_approval`, `paused`, `failed`, `canceled` |
//! | `running` | `waiting_for_user`, `awaiting_approval`, `paused`, `recovering`, `completed`, `failed`, `canceled` |
//! | `waiting_for_user` | `planning`, `running`, `awaiting_approval`, `paused`, `failed`, `canceled`, `expired` |
//! | `awaiting_approval` | `partially_approved`, `running`, `rejected`, `paused`, `canceled`, `expired` |
//! | `partially_approved` | `awaiting_approval`, `running`, `rejected`, `paused`, `canceled`, `expired` |
//! | `paused` | `queued`, `planning`, `running`, `recovering`, `failed`, `canceled`, `expired` |
//! | `recovering` | `planning`, `running`, `paused`, `failed`, `canceled` |
//! | `completed` | — (terminal) |
//! | `failed` | — (terminal) |
//! | `rejected` | — (terminal) |
//! | `canceled` | — (terminal) |
//! | `expired` | — (terminal) |
//!
//! A move into `awaiting_approval` or `partially_approved` also needs review context: a
//! proposal, evidence or metadata ([`needs_approval_context`]). A move to the same state is no
//! move and is refused like any undeclared one.

use super::state::RunState;
use RunState as S;

/// One row of the table: a state and the states a transition may move it to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunRow {
    /// The prior state.
    pub from: RunState,
    /// The allowed next states (empty for a terminal state).
    pub to: &'static [RunState],
}

/// The run transition table, one row per state in the seed's order.
pub const RUN_TRANSITIONS: [RunRow; 14] = [
    RunRow {
        from: S::Pending,
        to: &[S::Queued, S::Planning, S::Running, S::Canceled, S::Expired],
    },
    RunRow {
        from: S::Queued,
        to: &[S::Planning, S::Running, S::Paused, S::Canceled, S::Expired],
    },
    RunRow {
        from: S::Planning,
        to: &[
            S::Running,
            S::WaitingForUser,
            S::AwaitingApproval,
            S::Paused,
            S::Failed,
            S::Canceled,
        ],
    },
    RunRow {
        from: S::Running,
        to: &[
            S::WaitingForUser,
            S::AwaitingApproval,
            S::Paused,
            S::Recovering,
            S::Completed,
            S::Failed,
            S::Canceled,
        ],
    },
    RunRow {
        from: S::WaitingForUser,
        to: &[
            S::Planning,
            S::Running,
            S::AwaitingApproval,
            S::Paused,
            S::Failed,
            S::Canceled,
            S::Expired,
        ],
    },
    RunRow {
        from: S::AwaitingApproval,
        to: &[
            S::PartiallyApproved,
            S::Running,
            S::Rejected,
            S::Paused,
            S::Canceled,
            S::Expired,
        ],
    },
    RunRow {
        from: S::PartiallyApproved,
        to: &[
            S::AwaitingApproval,
            S::Running,
            S::Rejected,
            S::Paused,
            S::Canceled,
            S::Expired,
        ],
    },
    RunRow {
        from: S::Paused,
        to: &[
            S::Queued,
            S::Planning,
            S::Running,
            S::Recovering,
            S::Failed,
            S::Canceled,
            S::Expired,
        ],
    },
    RunRow {
        from: S::Recovering,
        to: &[S::Planning, S::Running, S::Paused, S::Failed, S::Canceled],
    },
    RunRow {
        from: S::Completed,
        to: &[],
    },
    RunRow {
        from: S::Failed,
        to: &[],
    },
    RunRow {
        from: S::Rejected,
        to: &[],
    },
    RunRow {
        from: S::Canceled,
        to: &[],
    },
    RunRow {
        from: S::Expired,
        to: &[],
    },
];

/// The row of `from`.
pub fn row(from: RunState) -> &'static RunRow {
    // The table is in `RunState::ALL` order; `run_table_rows_in_order` keeps it so.
    &RUN_TRANSITIONS[from as usize]
}

/// Whether the table declares `from -> to`.
pub fn allowed(from: RunState, to: RunState) -> bool {
    row(from).to.contains(&to)
}

/// Whether a move into `to` needs review context (seed 002: "A move into awaiting_approval
/// without a proposal, evidence, or required metadata should fail").
pub const fn needs_approval_context(to: RunState) -> bool {
    to.is_approval()
}

/// The table as Markdown (the form in ARCHITECTURE.md and the doc comment above).
pub fn markdown() -> String {
    let mut s = String::from("| from | allowed next states |\n|---|---|\n");
    for r in &RUN_TRANSITIONS {
        let to = if r.to.is_empty() {
            "— (terminal)".to_string()
        } else {
            r.to.iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        s.push_str(&format!("| `{}` | {to} |\n", r.from));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_table_rows_in_order() {
        for (i, s) in RunState::ALL.iter().enumerate() {
            assert_eq!(RUN_TRANSITIONS[i].from, *s);
            assert_eq!(RUN_TRANSITIONS[i].to.is_empty(), s.is_terminal(), "{s}");
            assert!(!RUN_TRANSITIONS[i].to.contains(s), "{s} moves to itself");
        }
    }
}
