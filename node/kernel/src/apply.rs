//! `apply`: one record against the derived state of its commitment. The order of the checks is
//! fixed, so every rejection has one code:
//!
//! 0. the machine: a run, envelope or tick record is `wrong_machine` (they have their own);
//! 1. existence: `unknown_commitment`, `commitment_exists`, `wrong_commitment`, `duplicate_record`;
//! 2. Access: `not_authorized` (the author does not act for the organisation it claims);
//! 3. the subject the operation needs (`no_open_revoke`, `no_open_condition`, `unknown_offer`, the
//!    basis naming it: `missing_basis`) and the items (`unknown_item`, `duplicate_item`,
//!    `item_mismatch`);
//! 4. the transition table: `terminal_state` / `invalid_state`;
//! 5. the role table: `wrong_role`;
//! 6. the operation's required content and the Work service party's timing.

use crate::access::Access;
use crate::commitment::{Commitment, OpenCondition, WorkPhase};
use crate::ctx::Ctx;
use crate::directory::{Applied, Directory, Single};
use crate::effect::Effect;
use crate::record::{Operation, Record, RecordId, RevokeKind, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::revoke;
use crate::roles;
use crate::rules::{self, Outcome, RuleKey};
use crate::state::State;
use crate::{assignment, claims, deferral, gates, items, marks, ops, request, service, stop};

/// Applies `record` to `state` (the commitment's derived state, `None` before its request) at
/// ledger time `now`. On success returns the new state and the effects; on rejection the caller
/// records the record with the rejection, and the state is unchanged.
///
/// `apply` knows only `state`: an allowed revoke_acceptance cannot see whether its reopening id
/// is taken, and an admission about no known commitment is `unknown_commitment`. The node uses
/// [`apply_with`], which knows every commitment.
pub fn apply(
    state: Option<&Commitment>,
    record: &Record,
    access: &Access,
    now: i64,
) -> Result<(Commitment, Vec<Effect>), Rejection> {
    apply_in(state, record, access, now, &Single(state))
}

/// Applies `record` to its commitment in `dir` (the node's projection) at `now`. Unlike
/// [`apply`], it rejects an allowed revoke_acceptance whose reopening commitment id is taken
/// (`commitment_exists`), and applies an admission declaration about a record of a commitment
/// the node does not know (`next` is `None`: the declaration is recorded, nothing is derived).
pub fn apply_with(
    dir: &dyn Directory,
    record: &Record,
    access: &Access,
    now: i64,
) -> Result<Applied, Rejection> {
    let state = dir.commitment(&record.commitment);
    if state.is_none() && matches!(record.op, Operation::Admission { .. }) {
        marks::detached_admission(record, access)?;
        return Ok(Applied {
            next: None,
            effects: Vec::new(),
        });
    }
    let (next, effects) = apply_in(state, record, access, now, dir)?;
    Ok(Applied {
        next: Some(next),
        effects,
    })
}

fn apply_in(
    state: Option<&Commitment>,
    record: &Record,
    access: &Access,
    now: i64,
    dir: &dyn Directory,
) -> Result<(Commitment, Vec<Effect>), Rejection> {
    if matches!(
        record.op,
        Operation::Run(_) | Operation::Envelope(_) | Operation::Tick(_)
    ) {
        return reject(
            C::WrongMachine,
            format!("{} is not a commitment record", record.op.wire_name()),
        );
    }
    let c = match (state, &record.op) {
        (None, Operation::Request(req)) => return request::create(record, req, access, now),
        (None, op) => {
            return reject(
                C::UnknownCommitment,
                format!(
                    "{} on unknown commitment {:?}",
                    op.wire_name(),
                    record.commitment
                ),
            );
        }
        (Some(c), Operation::Request(_)) => {
            return reject(C::CommitmentExists, format!("commitment {:?} exists", c.id));
        }
        (Some(c), _) => c,
    };
    ensure(
        record.commitment == c.id,
        C::WrongCommitment,
        format!("record is for {:?}, state is {:?}", record.commitment, c.id),
    )?;
    ensure(
        !c.history.contains(&record.id),
        C::DuplicateRecord,
        hex_id(&record.id),
    )?;
    ensure(
        access.acts_for(&record.author),
        C::NotAuthorized,
        format!(
            "{} does not act for {:?}",
            record.author, record.author.organisation
        ),
    )?;

    if let Some(done) = service::produced_promise(c, record, access, now)? {
        return Ok((done, Vec::new()));
    }
    let (key, condition) = resolve(c, record)?;
    let ctx = Ctx {
        c,
        r: record,
        access,
        now,
        condition,
        dir,
    };
    let targets = items::targets(&ctx, key)?;
    let outcome = items::check_state(c, key, &targets)?;
    let first = c.items[&targets[0]].state;
    let allowed = rules::roles(key, first);
    ensure(
        allowed.iter().any(|role| roles::holds(&ctx, *role)),
        C::WrongRole,
        format!(
            "{} needs {:?}; {} holds none",
            key.name(),
            allowed,
            record.author
        ),
    )?;

    let mut next = c.clone();
    let mut effects = Vec::new();
    execute(&ctx, key, &targets, &mut next, &mut effects)?;
    if let Outcome::To(to) = outcome {
        for t in &targets {
            if let Some(item) = next.items.get_mut(t) {
                item.work = work_phase(item.state, to, item.work, c.history.len());
                item.state = to;
            }
        }
    }
    revoke::lapse(&mut next);
    next.history.push(record.id);
    next.updated_at = now;
    Ok((next, effects))
}

/// An item's work phase after it moves `from` → `to` by the record at history position `seq`
/// ([`WorkPhase`]): a promise (promise, promise_conditional, claim, accept_counter) begins it
/// not started; a statement sent back to the doer (reject, an allowed revoke_statement) begins
/// it again, begun; a precondition met or withdrawn keeps it; any other move ends it.
fn work_phase(from: State, to: State, was: Option<WorkPhase>, seq: usize) -> Option<WorkPhase> {
    match (from, to) {
        (State::ConditionallyPromised, State::Promised) => was,
        (State::Stated, State::Promised) => Some(WorkPhase {
            since: seq,
            begun: true,
        }),
        (_, State::Promised | State::ConditionallyPromised) => Some(WorkPhase {
            since: seq,
            begun: false,
        }),
        _ => None,
    }
}

/// Maps the operation to its rule key, resolving the subject it acts on.
fn resolve<'a>(
    c: &'a Commitment,
    r: &Record,
) -> Result<(RuleKey, Option<&'a OpenCondition>), Rejection> {
    use Operation as O;
    let key = match &r.op {
        O::Request(_) => unreachable!("request is handled by create"),
        O::Promise => RuleKey::Promise,
        O::PromiseConditional { .. } => RuleKey::PromiseConditional,
        O::Decline { .. } => RuleKey::Decline,
        O::Counter { .. } => RuleKey::Counter,
        O::AcceptCounter { .. } => RuleKey::AcceptCounter,
        O::State { .. } => RuleKey::State,
        O::Accept { .. } => RuleKey::Accept,
        O::Reject { .. } => RuleKey::Reject,
        O::Cancel { .. } => RuleKey::Cancel,
        O::Release { .. } => RuleKey::Release,
        O::DelegateOffer { .. } => RuleKey::DelegateOffer,
        O::DelegateAcceptance { offer_id } => {
            offer_named(
                c.delegate_offer.as_ref().map(|o| o.record),
                *offer_id,
                "delegate",
            )?;
            RuleKey::DelegateAcceptance
        }
        O::AssignOffer { .. } => RuleKey::AssignOffer,
        O::AssignAcceptance { offer_id } => {
            offer_named(
                c.assign_offer.as_ref().map(|o| o.record),
                *offer_id,
                "assign",
            )?;
            RuleKey::AssignAcceptance
        }
        O::Dispute { .. } => RuleKey::Dispute,
        O::Defer { .. } => RuleKey::Defer,
        O::Resume { .. } => RuleKey::Resume,
        O::RevokeRequest { .. } => RuleKey::Revoke(RevokeKind::Request),
        O::RevokePromise { .. } => RuleKey::Revoke(RevokeKind::Promise),
        O::RevokeStatement { .. } => RuleKey::Revoke(RevokeKind::Statement),
        O::RevokeAcceptance { .. } => RuleKey::Revoke(RevokeKind::Acceptance),
        O::Allow { .. } | O::Refuse { .. } => {
            let Some(open) = &c.revoke else {
                return reject(C::NoOpenRevoke, "no revoke request is open");
            };
            ensure(
                r.basis.contains(&open.record),
                C::MissingBasis,
                format!("basis must name the open {}", open.kind.wire_name()),
            )?;
            if matches!(r.op, O::Allow { .. }) {
                RuleKey::Allow(open.kind)
            } else {
                RuleKey::Refuse(open.kind)
            }
        }
        O::Amend { .. } => RuleKey::Amend,
        O::Notice { .. } => RuleKey::Notice,
        O::DeclareObsolete { .. } => RuleKey::DeclareObsolete,
        O::Expire => RuleKey::Expire,
        O::AdministrativeClose { .. } => RuleKey::AdministrativeClose,
        O::Claim => RuleKey::Claim,
        O::Unclaim { .. } => RuleKey::Unclaim,
        O::Forward { .. } => RuleKey::Forward,
        O::Nominate { .. } => RuleKey::Nominate,
        O::Offer { .. } => RuleKey::Offer,
        O::Reassign { .. } => RuleKey::Reassign,
        O::RenewLease { .. } => RuleKey::RenewLease,
        O::OpenCondition { .. } => RuleKey::OpenCondition,
        O::GateDecision { .. } => {
            let Some(cond) = c.conditions.iter().find(|oc| r.basis.contains(&oc.record)) else {
                return reject(C::NoOpenCondition, "basis names no open gate");
            };
            return Ok((RuleKey::GateDecision, Some(cond)));
        }
        O::Observation(_) => RuleKey::Observation,
        O::StopRequest { .. } => RuleKey::StopRequest,
        O::StopResponse { .. } => RuleKey::StopResponse,
        O::ResumeAfterStop { .. } => RuleKey::ResumeAfterStop,
        O::ControlLease { .. } => RuleKey::ControlLease,
        O::HandBackControl { .. } => RuleKey::HandBackControl,
        O::Recheck { .. } => RuleKey::Recheck,
        O::WithdrawCondition | O::SatisfyCondition => {
            let Some(cond) = c.conditions.iter().find(|oc| r.basis.contains(&oc.record)) else {
                return reject(C::NoOpenCondition, "basis names no open condition");
            };
            let withdraw = matches!(r.op, O::WithdrawCondition);
            let key = match (withdraw, cond.is_precondition()) {
                (true, false) => RuleKey::WithdrawCondition,
                (true, true) => RuleKey::WithdrawPrecondition,
                (false, false) => RuleKey::SatisfyCondition,
                (false, true) => RuleKey::SatisfyPrecondition,
            };
            return Ok((key, Some(cond)));
        }
        O::ReportConsumption { .. } => RuleKey::ReportConsumption,
        O::Admission { .. } => RuleKey::Admission,
        O::ActedUpon { .. } => RuleKey::ActedUpon,
        O::Run(_) | O::Envelope(_) | O::Tick(_) => unreachable!("refused by apply_in"),
    };
    Ok((key, None))
}

fn offer_named(
    open: Option<RecordId>,
    named: Option<RecordId>,
    what: &str,
) -> Result<(), Rejection> {
    let Some(named) = named else {
        return reject(C::MissingField, format!("{what} acceptance needs offer_id"));
    };
    ensure(
        open == Some(named),
        C::UnknownOffer,
        format!("no open {what} offer {}", hex_id(&named)),
    )
}

fn execute(
    ctx: &Ctx,
    key: RuleKey,
    targets: &[String],
    next: &mut Commitment,
    fx: &mut Vec<Effect>,
) -> Result<(), Rejection> {
    use RuleKey as K;
    match key {
        K::Promise => ops::promise(ctx, targets, next),
        K::PromiseConditional => ops::promise_conditional(ctx, targets, next),
        K::Decline => ops::decline(ctx),
        K::Counter => ops::counter(ctx, targets, next),
        K::AcceptCounter => ops::accept_counter(ctx, targets, next),
        K::State => ops::state(ctx, targets, next),
        K::Accept => ops::accept(ctx, targets, next),
        K::Reject => ops::reject_statement(ctx, targets, next),
        K::Cancel => ops::cancel(ctx),
        K::Release | K::Amend | K::Notice | K::DeclareObsolete | K::AdministrativeClose => {
            ops::closing_and_notes(ctx, key, next, fx)
        }
        K::DelegateOffer
        | K::DelegateAcceptance
        | K::AssignOffer
        | K::AssignAcceptance
        | K::Claim
        | K::Unclaim
        | K::Forward
        | K::Nominate
        | K::Offer
        | K::Reassign
        | K::RenewLease => assignment::execute(ctx, key, targets, next, fx),
        K::Dispute => revoke::dispute(ctx, next, fx),
        K::Defer => deferral::defer(ctx, targets, next),
        K::Resume => deferral::resume(ctx, next),
        K::Revoke(kind) => revoke::open(ctx, kind, targets, next, fx),
        K::Allow(kind) => revoke::allow(ctx, kind, targets, next, fx),
        K::Refuse(kind) => revoke::refuse(ctx, kind, next, fx),
        K::Expire => service::check_expire(ctx, targets),
        K::OpenCondition
        | K::WithdrawCondition
        | K::SatisfyCondition
        | K::WithdrawPrecondition
        | K::SatisfyPrecondition
        | K::ReportConsumption
        | K::ActedUpon
        | K::Admission => marks::execute(ctx, key, targets, next),
        K::GateDecision => gates::decide(ctx, next),
        K::Observation => claims::observe(ctx, next),
        K::StopRequest => stop::stop_request(ctx, next, fx),
        K::StopResponse => stop::stop_response(ctx, next, fx),
        K::ResumeAfterStop => stop::resume_after_stop(ctx, next),
        K::ControlLease => stop::control_lease(ctx, next, fx),
        K::HandBackControl => stop::hand_back(ctx, next),
        K::Recheck => stop::recheck(ctx, next),
    }
}
