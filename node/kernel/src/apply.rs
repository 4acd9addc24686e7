//! `apply`: one record against the derived state of its commitment. The order of the checks is
//! fixed, so every rejection has one code:
//!
//! 1. existence: `unknown_commitment`, `commitment_exists`, `wrong_commitment`, `duplicate_record`;
//! 2. Access: `not_authorized` (the author does not act for the organisation it claims);
//! 3. the subject the operation needs (`no_open_revoke`, `no_open_condition`, `unknown_offer`, the
//!    basis naming it: `missing_basis`) and the items (`unknown_item`, `duplicate_item`,
//!    `item_mismatch`);
//! 4. the transition table: `terminal_state` / `invalid_state`;
//! 5. the role table: `wrong_role`;
//! 6. the operation's required content and the Work service party's timing.

use serde::{Deserialize, Serialize};

use crate::access::Access;
use crate::commitment::{Commitment, OpenCondition, ReopenLink};
use crate::directory::Single;
pub use crate::directory::{Applied, Directory};
use crate::record::{NoticeType, Operation, Party, Record, RecordId, StopMode, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::revoke::{self, RevokeKind};
use crate::roles;
use crate::rules::{self, Outcome, RuleKey};
use crate::state::State;
use crate::{assignment, claims, deferral, gates, marks, ops, request, service, stop};

/// What the caller must do after a record was applied (the kernel does no I/O).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Notify these parties (attention): everything the node needs to deliver it.
    Notify {
        /// The commitment.
        commitment: String,
        /// The record that caused it.
        record: RecordId,
        /// Recipients (never the author).
        to: Vec<Party>,
        /// About what.
        about: Notification,
    },
    /// A claim produced a promise (seed 000, "Assignment": "a promise record is produced"): the
    /// commitment is already promised by `obligor` in the derived state; the node writes the
    /// promise record of it, authored by `obligor`'s organisation's node, with `claim` in basis.
    PromiseProduced {
        /// The commitment.
        commitment: String,
        /// The claim record the promise rests on.
        claim: RecordId,
        /// The claiming obligor.
        obligor: Party,
        /// The obligee the promise is made to.
        obligee: Party,
        /// The items promised (empty = the whole commitment).
        items: Vec<String>,
        /// The terms version promised.
        terms_version: RecordId,
    },
    /// An allowed revoke_acceptance starts a linked reopening commitment. The node stores
    /// `commitment` under `link.reopening` (the allow record created it; a replay of the allow
    /// gives the same value). The node must refuse the allow if that id is taken.
    StartReopening {
        /// The link (also in both commitments).
        link: ReopenLink,
        /// The reopening commitment's initial derived state.
        commitment: Box<Commitment>,
    },
}

/// What a notification is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notification {
    /// A notice from the obligor.
    Notice {
        /// Its type.
        notice_type: NoticeType,
        /// Its text.
        text: String,
    },
    /// The commitment was closed administratively.
    AdministrativelyClosed {
        /// Why.
        reason: String,
    },
    /// A revoke request was opened and waits for the recipients.
    RevokeRequested {
        /// Which.
        kind: RevokeKind,
    },
    /// A dispute mark was made.
    DisputeMarked {
        /// The disputed record.
        disputed: RecordId,
    },
    /// A stop (or pause) was requested of the executor.
    StopRequested {
        /// How.
        mode: StopMode,
    },
    /// The executor refused a stop request.
    StopRefused {
        /// Why.
        reason: String,
    },
    /// A person took control.
    ControlTaken {
        /// Who holds control.
        holder: Party,
    },
}

/// The context of one `apply`.
pub(crate) struct Ctx<'a> {
    pub c: &'a Commitment,
    pub r: &'a Record,
    pub access: &'a Access,
    pub now: i64,
    /// The open condition a withdraw/satisfy names.
    pub condition: Option<&'a OpenCondition>,
    /// The commitments the node knows.
    pub dir: &'a dyn Directory,
}

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
    let targets = targets(&ctx, key)?;
    let outcome = check_state(c, key, &targets)?;
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
                item.state = to;
            }
        }
    }
    revoke::lapse(&mut next);
    next.history.push(record.id);
    next.updated_at = now;
    Ok((next, effects))
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

/// The items acted on: the items named (validated), or those the subject fixes (the revoke's,
/// the precondition's), or by default every open item; from a fixed or default set, the open
/// ones, or all of them when none is open (so a closed commitment meets `terminal_state`).
fn targets(ctx: &Ctx, key: RuleKey) -> Result<Vec<String>, Rejection> {
    let c = ctx.c;
    let mut named: Vec<String> = Vec::new();
    for i in &ctx.r.items {
        ensure(
            !i.is_empty() && c.has_line_items() && c.items.contains_key(i),
            C::UnknownItem,
            format!("no line item {i:?}"),
        )?;
        ensure(
            !named.contains(i),
            C::DuplicateItem,
            format!("line item {i:?} named twice"),
        )?;
        named.push(i.clone());
    }
    let fixed: Option<Vec<String>> = match key {
        RuleKey::Allow(_) | RuleKey::Refuse(_) => c.revoke.as_ref().map(|o| o.items.clone()),
        RuleKey::WithdrawPrecondition | RuleKey::SatisfyPrecondition => {
            ctx.condition.map(|oc| oc.precondition_items.clone())
        }
        _ => None,
    };
    let pool = match fixed {
        Some(f) => {
            let same =
                named.is_empty() || (named.len() == f.len() && named.iter().all(|n| f.contains(n)));
            ensure(
                same,
                C::ItemMismatch,
                format!("{} acts on its own items {f:?}", key.name()),
            )?;
            f
        }
        None if !named.is_empty() => return Ok(named),
        None => c.items.keys().cloned().collect(),
    };
    let open: Vec<String> = pool
        .iter()
        .filter(|i| c.items.get(*i).is_some_and(|it| !it.state.is_terminal()))
        .cloned()
        .collect();
    Ok(if open.is_empty() { pool } else { open })
}

/// The transition table check: every item acted on must fall in one row of `key`.
fn check_state(c: &Commitment, key: RuleKey, targets: &[String]) -> Result<Outcome, Rejection> {
    let state_of = |t: &String| c.items[t].state;
    let refuse = |s: State| {
        let code = if s.is_terminal() {
            C::TerminalState
        } else {
            C::InvalidState
        };
        Rejection::new(code, format!("{} is not allowed from {s}", key.name()))
    };
    let first = state_of(&targets[0]);
    let (from, outcome) = rules::transition(key, first).ok_or_else(|| refuse(first))?;
    for t in targets {
        let s = state_of(t);
        if !from.contains(s) {
            return Err(refuse(s));
        }
    }
    Ok(outcome)
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
        K::Defer => deferral::defer(ctx, next),
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
