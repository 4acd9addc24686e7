//! `apply_run`: one run record against the run's derived state. The order of the checks is
//! fixed, so every rejection has one code:
//!
//! 1. the machine (`wrong_machine`) and the run id (`missing_field`);
//! 2. Access: `not_authorized`;
//! 3. existence and who ([`super::who`]), answered alike for what does not exist and for what
//!    the author may not act on, so a refusal says nothing about what exists: a `run_start`
//!    for a commitment that is unknown or that the author is not the obligor of is
//!    `unknown_commitment`; a `parent` that is unknown or not the author's to continue, and any
//!    later record on a run that is unknown or whose record of that kind the author may not
//!    write (the executor's records; decisions by [`APPROVERS`](super::who::APPROVERS)), are
//!    `unknown_run`. A taken run id is `run_exists`;
//! 4. `wrong_commitment` (the detail does not name the commitment), `duplicate_record`,
//!    `run_full` (the run holds [`MAX_RUN_RECORDS`] records);
//! 5. state: a transition must be in the table (`terminal_state` / `invalid_state`); actions,
//!    proposals and decisions are refused once the run is terminal (`terminal_state`);
//!    evidence, outputs and audit events may still arrive for review;
//! 6. content: required fields (`missing_field`), references to records of this run
//!    (`unknown_reference`), approval context (`missing_approval_context`), the replay
//!    confirmation (`replay_not_confirmed`).
//!
//! A rejected record changes nothing; the caller records it with its rejection (seed 002: "an
//! invalid transition returns an explicit error rather than silently changing the run").

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::claim::execution_report;
use super::record::{EvidenceKind, RunBody, RunOperation, Verdict};
use super::recovery::replay_needs_confirmation;
use super::run::{Entry, RefKind, Run, Transition};
use super::state::RunState;
use super::table;
use super::who::{executes, may_continue, may_execute, may_write};
use crate::access::Access;
use crate::directory::Directory;
use crate::record::{ExecutionReport, Operation, Party, Record, RecordId, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};

/// The most records one run holds, its `run_start` included (issue 27: a run's derived state,
/// cached and stored whole, grows with its records, so a party could otherwise grow one run
/// without end). Seed 002 lets a run continue in another: a `run_start` naming it as `parent`.
/// A protocol constant, not a node setting, so every node decides a run's records alike.
pub const MAX_RUN_RECORDS: usize = 1024;

/// The runs the node knows (for `parent` links and existence).
pub trait RunDirectory {
    /// The derived state of run `id`, if it exists.
    fn run(&self, id: &str) -> Option<&Run>;
}

impl RunDirectory for HashMap<String, Run> {
    fn run(&self, id: &str) -> Option<&Run> {
        self.get(id)
    }
}

impl RunDirectory for BTreeMap<String, Run> {
    fn run(&self, id: &str) -> Option<&Run> {
        self.get(id)
    }
}

/// What the node must do after a run record was applied (the kernel does no I/O).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEffect {
    /// The run executes `commitment` and started, or its state now maps to another
    /// execution-axis value, or its executor wrote a record after half its heartbeat interval
    /// (seed 000, "Other state axes": "Execution, control and liveness come from executor or
    /// external Claims"): the node writes an `observation` authored by the run's executor,
    /// with `record` in basis, claiming `execution` (`None`: a heartbeat only), declaring
    /// `heartbeat_interval_ms`, and `left_cleanly` once the run reached a terminal state.
    ExecutionClaim {
        /// The commitment executed.
        commitment: String,
        /// The run.
        run: String,
        /// The run's executor: the observation's author.
        executor: Party,
        /// The run record the claim rests on.
        record: RecordId,
        /// The claim; `None` for a heartbeat.
        execution: Option<ExecutionReport>,
        /// The run's heartbeat interval.
        heartbeat_interval_ms: i64,
        /// The run ended (a terminal state): its executor left cleanly.
        left_cleanly: bool,
    },
    /// An action acts upon a record of the executed commitment: the node writes `acted_upon`
    /// for it (seed 000: an executor's act claim advances the record to acted upon).
    ActedUpon {
        /// The commitment executed.
        commitment: String,
        /// The run.
        run: String,
        /// The `run_action` record.
        action: RecordId,
        /// The commitment record acted upon.
        record: RecordId,
        /// What was done (the action's tool).
        act: String,
    },
}

/// The heartbeat interval of a run whose `run_start` declares none: a run executing a commitment
/// that writes no record for this long shows its commitment's liveness `stale` (seed 000:
/// "unknown — Liveness stale or unknown"). A protocol constant, so every node derives the same.
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: i64 = 60 * 60 * 1000;

/// The result of [`apply_run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunApplied {
    /// The run's new derived state.
    pub next: Run,
    /// The effects to act on.
    pub effects: Vec<RunEffect>,
}

/// Applies a run record at ledger time `now`. `dir` holds the runs the node knows (the run
/// itself, and the parent a `run_start` names); `commitments` holds the commitment the run
/// executes (for a `run_start`, the record's), as derived before this record.
pub fn apply_run(
    dir: &dyn RunDirectory,
    commitments: &dyn Directory,
    record: &Record,
    access: &Access,
    now: i64,
) -> Result<RunApplied, Rejection> {
    let Operation::Run(op) = &record.op else {
        return reject(
            C::WrongMachine,
            format!("{} is not a run record", record.op.wire_name()),
        );
    };
    let RunOperation { run: id, body } = op.as_ref();
    ensure(
        !id.trim().is_empty(),
        C::MissingField,
        "a run record needs the run id",
    )?;
    ensure(
        access.acts_for(&record.author),
        C::NotAuthorized,
        format!(
            "{} does not act for {:?}",
            record.author, record.author.organisation
        ),
    )?;
    if let RunBody::Start(start) = body {
        ensure(
            dir.run(id).is_none(),
            C::RunExists,
            format!("run {id:?} exists"),
        )?;
        if !record.commitment.is_empty() {
            ensure(
                commitments
                    .commitment(&record.commitment)
                    .is_some_and(|c| may_execute(c, access, &record.author)),
                C::UnknownCommitment,
                format!("commitment {:?} is unknown", record.commitment),
            )?;
        }
        if let Some(p) = &start.parent {
            let Some(parent) = dir
                .run(p)
                .filter(|parent| may_continue(parent, &record.commitment, &record.author))
            else {
                return reject(C::UnknownRun, format!("parent run {p:?} is unknown"));
            };
            ensure(
                start.replay_confirmed || !replay_needs_confirmation(parent),
                C::ReplayNotConfirmed,
                format!("parent run {p:?} has non-idempotent actions; confirm the replay"),
            )?;
        }
        let run = Run {
            id: id.clone(),
            commitment: (!record.commitment.is_empty()).then(|| record.commitment.clone()),
            start: entry(record, now, start.clone()),
            state: RunState::Pending,
            transitions: Vec::new(),
            actions: Vec::new(),
            proposals: Vec::new(),
            decisions: Vec::new(),
            evidence: Vec::new(),
            outputs: Vec::new(),
            audit_events: Vec::new(),
            history: vec![record.id],
            updated_at: now,
            last_claim_at: now,
        };
        // The run claims its commitment's execution from its start (`not_started` until it
        // moves), so liveness follows it from then on.
        let effects = match &run.commitment {
            Some(c) => vec![RunEffect::ExecutionClaim {
                commitment: c.clone(),
                run: id.clone(),
                executor: record.author.clone(),
                record: record.id,
                execution: Some(execution_report(RunState::Pending)),
                heartbeat_interval_ms: heartbeat_interval(&run),
                left_cleanly: false,
            }],
            None => Vec::new(),
        };
        return Ok(RunApplied { next: run, effects });
    }
    let executed = |run: &Run| {
        run.commitment
            .as_deref()
            .and_then(|c| commitments.commitment(c))
    };
    let Some(run) = dir
        .run(id)
        .filter(|run| may_write(run, executed(run), access, &record.author, body))
    else {
        return reject(C::UnknownRun, format!("run {id:?} is unknown"));
    };
    ensure(
        run.commitment.as_deref().unwrap_or("") == record.commitment,
        C::WrongCommitment,
        format!("run {id:?} executes another commitment"),
    )?;
    ensure(
        !run.history.contains(&record.id),
        C::DuplicateRecord,
        hex_id(&record.id),
    )?;
    ensure(
        run.history.len() < MAX_RUN_RECORDS,
        C::RunFull,
        format!("run {id:?} holds {MAX_RUN_RECORDS} records; continue in a child run"),
    )?;
    // The run's claims on its commitment, only while its executor may make them.
    let claims = executed(run).is_some_and(|c| executes(run, c, access));
    let mut next = run.clone();
    let mut effects = Vec::new();
    match body {
        RunBody::Start(_) => unreachable!("handled above"),
        RunBody::Transition { to, context } => {
            transition(run, record, *to, context, now, &mut next)?;
            if let Some(c) = run.commitment.as_ref().filter(|_| claims) {
                let (before, after) = (execution_report(run.state), execution_report(*to));
                if before != after || to.is_terminal() {
                    effects.push(RunEffect::ExecutionClaim {
                        commitment: c.clone(),
                        run: id.clone(),
                        executor: run.executor().clone(),
                        record: record.id,
                        execution: Some(after),
                        heartbeat_interval_ms: heartbeat_interval(run),
                        left_cleanly: to.is_terminal(),
                    });
                }
            }
        }
        RunBody::Action(a) => {
            open(run, body)?;
            ensure(
                !a.tool.trim().is_empty(),
                C::MissingField,
                "run_action needs its tool",
            )?;
            known(run, RefKind::Proposal, a.proposal.as_ref(), "proposal")?;
            if let (Some(target), Some(c), true) = (a.acts_on, &run.commitment, claims) {
                effects.push(RunEffect::ActedUpon {
                    commitment: c.clone(),
                    run: id.clone(),
                    action: record.id,
                    record: target,
                    act: a.tool.clone(),
                });
            }
            next.actions.push(entry(record, now, a.clone()));
        }
        RunBody::Proposal(p) => {
            open(run, body)?;
            ensure(
                !p.summary.trim().is_empty(),
                C::MissingField,
                "run_proposal needs a summary",
            )?;
            known(run, RefKind::Action, p.action.as_ref(), "action")?;
            next.proposals.push(entry(record, now, p.clone()));
        }
        RunBody::Decision(d) => {
            open(run, body)?;
            let Some(proposal) = &d.proposal else {
                return reject(
                    C::MissingField,
                    "run_decision needs the proposal it decides",
                );
            };
            known(run, RefKind::Proposal, Some(proposal), "proposal")?;
            ensure(
                d.verdict != Verdict::Unspecified,
                C::MissingField,
                "run_decision needs a verdict",
            )?;
            next.decisions.push(entry(record, now, d.clone()));
        }
        RunBody::Evidence(e) => {
            match e.kind {
                EvidenceKind::Unspecified => {
                    return reject(C::MissingField, "run_evidence needs its kind");
                }
                EvidenceKind::Unknown(n) => {
                    return reject(C::Malformed, format!("evidence kind {n}"));
                }
                _ => {}
            }
            known(run, RefKind::Action, e.action.as_ref(), "action")?;
            known(run, RefKind::Any, e.supports.as_ref(), "supports")?;
            next.evidence.push(entry(record, now, e.clone()));
        }
        RunBody::Output(o) => {
            known(run, RefKind::Action, o.action.as_ref(), "action")?;
            next.outputs.push(entry(record, now, o.clone()));
        }
        RunBody::AuditEvent(a) => {
            ensure(
                !a.kind.trim().is_empty(),
                C::MissingField,
                "run_audit_event needs a kind",
            )?;
            next.audit_events.push(entry(record, now, a.clone()));
        }
    }
    next.history.push(record.id);
    next.updated_at = now;
    let claimed = effects
        .iter()
        .any(|e| matches!(e, RunEffect::ExecutionClaim { .. }));
    if claimed {
        next.last_claim_at = now;
    } else if let Some(c) = run.commitment.as_ref().filter(|_| claims)
        && record.author == *run.executor()
        && !run.state.is_terminal()
        && now - run.last_claim_at >= heartbeat_interval(run) / 2
    {
        // A heartbeat: any record the executor writes is a sign of life, one claim per half
        // interval at most, so a busy run does not double its records.
        effects.push(RunEffect::ExecutionClaim {
            commitment: c.clone(),
            run: id.clone(),
            executor: run.executor().clone(),
            record: record.id,
            execution: None,
            heartbeat_interval_ms: heartbeat_interval(run),
            left_cleanly: false,
        });
        next.last_claim_at = now;
    }
    Ok(RunApplied { next, effects })
}

/// The run's heartbeat interval: declared in its `run_start`, or the default.
fn heartbeat_interval(run: &Run) -> i64 {
    run.start
        .body
        .heartbeat_interval_ms
        .filter(|i| *i > 0)
        .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL_MS)
}

fn entry<T>(record: &Record, now: i64, body: T) -> Entry<T> {
    Entry {
        record: record.id,
        by: record.author.clone(),
        at: now,
        body,
    }
}

/// Actions, proposals and decisions only while the run is not terminal.
fn open(run: &Run, body: &RunBody) -> Result<(), Rejection> {
    ensure(
        !run.state.is_terminal(),
        C::TerminalState,
        format!("{} on a {} run", body.wire_name(), run.state),
    )
}

/// A reference, when given, must name a record of this run of the right kind.
fn known(run: &Run, kind: RefKind, id: Option<&RecordId>, field: &str) -> Result<(), Rejection> {
    match id {
        Some(id) if !run.has(kind, id) => reject(
            C::UnknownReference,
            format!(
                "{field} {} is no such record of run {:?}",
                hex_id(id),
                run.id
            ),
        ),
        _ => Ok(()),
    }
}

fn transition(
    run: &Run,
    record: &Record,
    to: RunState,
    context: &super::record::TransitionContext,
    now: i64,
    next: &mut Run,
) -> Result<(), Rejection> {
    let from = run.state;
    if !table::allowed(from, to) {
        let code = if from.is_terminal() {
            C::TerminalState
        } else {
            C::InvalidState
        };
        return reject(code, format!("{from} -> {to} is not a declared transition"));
    }
    known(
        run,
        RefKind::Proposal,
        context.proposal.as_ref(),
        "context.proposal",
    )?;
    for e in &context.evidence {
        known(run, RefKind::Evidence, Some(e), "context.evidence")?;
    }
    ensure(
        !table::needs_approval_context(to) || context.has_review_context(),
        C::MissingApprovalContext,
        format!("a move into {to} needs a proposal, evidence or metadata"),
    )?;
    next.state = to;
    next.transitions.push(entry(
        record,
        now,
        Transition {
            prior: from,
            next: to,
            context: context.clone(),
        },
    ));
    Ok(())
}
