//! Who may write which run record (issue 27, item 1): the seed's roles and the kernel's, never
//! "any party of the executing organisation".
//!
//! * **The executor.** A run that executes a commitment is started by the party that may make
//!   the executor's claims on it: its **obligor** (seed 000, "Whose move it is": `promised` —
//!   the obligor; "Summary category": `ready` is changed by the "Doer (starting)"). The seed's
//!   way for an obligor to hand the execution to someone else is `delegate` (the obligor's offer
//!   and the new obligor's acceptance: "Same state, new obligor, on acceptance"; "The old party
//!   stays in place until acceptance"), after which the new party *is* the obligor; the kernel
//!   knows no other delegation of execution. A run that executes no commitment may be started
//!   by any party of the node; it is its starter's alone. The executor of a run is the author of
//!   its `run_start` ([`Run::executor`]).
//! * **The executor's records.** Transitions, actions, proposals, evidence, outputs and audit
//!   events are the executor's (seed 002: the transition log, actions and evidence are the
//!   runtime's records of what it did; "audit events record runtime activity").
//! * **Decisions** (seed 002: "signed decisions remain the source for approval") are signed by
//!   the parties seed 000 gives a say over the work of the executed commitment: its obligee,
//!   acceptor (who answers the delivery), accountable party and principal (who may stop,
//!   resume and take control of it), and the participants of its open gates (who answer them,
//!   "Conditions and gates") — [`APPROVERS`]. A run that executes no commitment has no one in
//!   those roles, so none of its proposals can be decided by a record.
//! * **Claims on the commitment.** A run's execution claims and `acted_upon` are asked for
//!   ([`RunEffect`](super::RunEffect)) only while its executor is the commitment's obligor
//!   ([`executes`]): an executor that handed the obligation on keeps its run, not its claims.
//! * **A parent.** A recovery run may name as `parent` a run its author executes, or a run that
//!   executes the same commitment (the new obligor continuing its predecessor's run).
//!
//! Writing a record grants no reading; reading is the node's (the executor, and whoever may
//! read the executed commitment).

use super::record::RunBody;
use super::run::Run;
use crate::access::Access;
use crate::commitment::Commitment;
use crate::record::Party;
use crate::roles::holds_role;
use crate::rules::Role;

/// The roles on the executed commitment whose holders may sign a `run_decision`.
pub const APPROVERS: [Role; 5] = [
    Role::Obligee,
    Role::Acceptor,
    Role::Accountable,
    Role::Principal,
    Role::ConditionAddressee,
];

/// Whether `who` may execute `c`: start a run for it, and make the executor's claims from it.
pub fn may_execute(c: &Commitment, access: &Access, who: &Party) -> bool {
    holds_role(c, access, who, Role::Obligor, None)
}

/// Whether the executor of `run` may make its claims on `c` now (the run executes `c`).
pub fn executes(run: &Run, c: &Commitment, access: &Access) -> bool {
    run.commitment.as_deref() == Some(c.id.as_str()) && may_execute(c, access, run.executor())
}

/// Who writes a kind of run record on an existing run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// The run's executor: transitions, actions, proposals, evidence, outputs, audit events.
    Executor,
    /// A holder of one of the [`APPROVERS`] roles on the executed commitment: decisions.
    Approver,
}

/// Who writes a record with `body`; `None` for a `run_start` (never written on an existing run).
pub const fn writer(body: &RunBody) -> Option<Writer> {
    match body {
        RunBody::Start(_) => None,
        RunBody::Decision(_) => Some(Writer::Approver),
        _ => Some(Writer::Executor),
    }
}

/// Whether `who` may write a record with `body` on `run`; `c` is the commitment the run
/// executes, as derived now (`None`: it executes none, or it is not known here).
pub fn may_write(
    run: &Run,
    c: Option<&Commitment>,
    access: &Access,
    who: &Party,
    body: &RunBody,
) -> bool {
    writer(body).is_some_and(|w| may_write_as(run, c, access, who, w))
}

/// [`may_write`] for a kind of writer.
pub fn may_write_as(
    run: &Run,
    c: Option<&Commitment>,
    access: &Access,
    who: &Party,
    writer: Writer,
) -> bool {
    match writer {
        Writer::Approver => c.is_some_and(|c| {
            run.commitment.as_deref() == Some(c.id.as_str())
                && APPROVERS
                    .iter()
                    .any(|r| holds_role(c, access, who, *r, None))
        }),
        Writer::Executor => who == run.executor(),
    }
}

/// Whether `who` may name `parent` as the parent of a run executing `commitment` (empty:
/// none): it executes the parent, or both runs execute the same commitment (whose executor
/// `who` must be for the new run anyway).
pub fn may_continue(parent: &Run, commitment: &str, who: &Party) -> bool {
    who == parent.executor()
        || (!commitment.is_empty() && parent.commitment.as_deref() == Some(commitment))
}
