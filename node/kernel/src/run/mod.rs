//! # Runs (seed 002, "Run states and execution receipts")
//!
//! A run is one execution, with its own records kept apart: the transition log, actions,
//! proposals, signed approval decisions, evidence, outputs and audit events ("Run state,
//! transition history, actions, decisions, evidence, output, audit events, and persistence are
//! separate authoritative records"). Pure, like the rest of the kernel: records and time in,
//! derived state out.
//!
//! ## Using it (the node)
//!
//! * Run records are kernel [`Record`](crate::Record)s with
//!   [`Operation::Run`](crate::Operation::Run) ([`RunOperation`]: the run id and a [`RunBody`]);
//!   their wire names are `run_start`, `run_transition`, `run_action`, `run_proposal`,
//!   `run_decision`, `run_evidence`, `run_output`, `run_audit_event`. The record's
//!   `commitment` is the commitment the run executes (empty for none), the same on every record
//!   of the run.
//! * [`apply_run`]`(runs, commitments, record, access, now)` → `Ok(`[`RunApplied`]`)`: store
//!   `next`, act on the [`RunEffect`]s (an execution claim, a heartbeat or an `acted_upon` for
//!   the executed commitment, asked for only while the run's executor is its obligor; the node
//!   keeps the claims as owed records until written, so they do not depend on which service
//!   recorded the run record, nor on the process surviving); `Err(Rejection)`:
//!   record the record with its rejection, the run is unchanged. `commitments` holds the
//!   commitment the run executes (who may do what is decided on it: [`who`]).
//! * [`may_execute`], [`may_write`]: the same rules for a door that refuses before writing.
//! * [`receipt`]`(run, child_runs)`: the receipt, an index of references ([`Receipt`]).
//! * [`prior_work`]`(run, child_runs)`: what the run already did, before a replay or recovery
//!   run; [`replay_needs_confirmation`].
//! * [`execution_report`]: the execution-axis claim a run state stands for.
//!
//! ## The machine
//!
//! Fourteen [`RunState`]s; the transitions are the one table [`RUN_TRANSITIONS`] (written out
//! in [`table`] and ARCHITECTURE.md). An undeclared move is `invalid_state`, any move out of a
//! terminal state `terminal_state`; a move into `awaiting_approval` or `partially_approved`
//! without a proposal, evidence or metadata is `missing_approval_context`. Recovery is a new run
//! whose `run_start` names the first as `parent`.

mod apply;
mod claim;
mod receipt;
mod record;
mod recovery;
#[allow(clippy::module_inception)]
mod run;
mod state;
pub mod table;
pub mod who;

pub use apply::{
    DEFAULT_HEARTBEAT_INTERVAL_MS, MAX_RUN_RECORDS, RunApplied, RunDirectory, RunEffect, apply_run,
};
pub use claim::{execution, execution_report};
pub use receipt::{GatedAction, Receipt, child_count, receipt};
pub use record::{
    Action, Artifact, AuditEvent, Decision, Evidence, EvidenceKind, Output, Proposal, RunBody,
    RunOperation, RunStart, TransitionContext, Verdict,
};
pub use recovery::{PriorWork, prior_work, replay_needs_confirmation};
pub use run::{Entry, Run, Transition};
pub use state::{RunClass, RunState};
pub use table::{RUN_TRANSITIONS, RunRow};
pub use who::{
    APPROVERS, Writer, executes, may_continue, may_execute, may_write, may_write_as, writer,
};
