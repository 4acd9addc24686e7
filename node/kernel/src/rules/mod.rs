//! The rule tables: one transition table (operation x from-states -> result) and one role table
//! (operation x from-states -> roles), transcribing seed 000 "Operations", "Revoke requests",
//! "Records written by the Work service" and "Assignment". `apply` consults only these tables for
//! the state and role checks; the content checks live with each concern.

use serde::{Deserialize, Serialize};

pub mod revoke;

use self::revoke::{REVOKE_ACCEPTANCE, REVOKE_PROMISE, REVOKE_REQUEST, REVOKE_STATEMENT};
use crate::record::RevokeKind;
use crate::state::{State, StateSet};

/// The key of a rule: an operation, refined where the seed gives one operation several rows
/// (the halves of delegate and assign, allow/refuse per revoke kind, the precondition of a
/// conditional promise versus any other Condition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKey {
    Promise,
    PromiseConditional,
    Decline,
    Counter,
    AcceptCounter,
    State,
    Accept,
    Reject,
    Cancel,
    Release,
    DelegateOffer,
    DelegateAcceptance,
    AssignOffer,
    AssignAcceptance,
    Dispute,
    Defer,
    Resume,
    Revoke(RevokeKind),
    Allow(RevokeKind),
    Refuse(RevokeKind),
    Amend,
    Notice,
    DeclareObsolete,
    Expire,
    AdministrativeClose,
    Claim,
    Unclaim,
    Forward,
    Nominate,
    Offer,
    Reassign,
    RenewLease,
    OpenCondition,
    WithdrawCondition,
    SatisfyCondition,
    WithdrawPrecondition,
    SatisfyPrecondition,
    ReportConsumption,
    ActedUpon,
    Admission,
    GateDecision,
    Observation,
    StopRequest,
    StopResponse,
    ResumeAfterStop,
    ControlLease,
    HandBackControl,
    Recheck,
}

impl RuleKey {
    /// A readable name: the wire name, refined in parentheses.
    pub fn name(self) -> String {
        use RuleKey::*;
        match self {
            DelegateOffer => "delegate(offer)".into(),
            DelegateAcceptance => "delegate(acceptance)".into(),
            AssignOffer => "assign(offer)".into(),
            AssignAcceptance => "assign(acceptance)".into(),
            Revoke(k) => k.wire_name().into(),
            Allow(k) => format!("allow({})", k.wire_name()),
            Refuse(k) => format!("refuse({})", k.wire_name()),
            WithdrawPrecondition => "withdraw_condition(precondition)".into(),
            SatisfyPrecondition => "satisfy_condition(precondition)".into(),
            other => {
                let s = format!("{other:?}");
                let mut out = String::new();
                for (i, ch) in s.chars().enumerate() {
                    if ch.is_ascii_uppercase() {
                        if i > 0 {
                            out.push('_');
                        }
                        out.push(ch.to_ascii_lowercase());
                    } else {
                        out.push(ch);
                    }
                }
                out
            }
        }
    }
}

/// A role an author may hold on a commitment (seed 000 "Who" columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The obligee.
    Obligee,
    /// Someone acting for the obligee's organisation (request only).
    OnBehalfOfObligee,
    /// The party offered to and the queue's candidate set; once an obligor is known, the obligor.
    CandidateObligor,
    /// The obligor.
    Obligor,
    /// The obligor who claimed it from the pool.
    ClaimingObligor,
    /// The acceptor (the obligee unless named).
    Acceptor,
    /// The principal the request names, or a holder of the Principal authority.
    Principal,
    /// A holder of the AdministrativeClose authority.
    AdministrativeAuthority,
    /// The Work service party (also the distribution policy).
    WorkService,
    /// The queue's owner (Access grant, or the declared owner when Access grants none).
    QueueOwner,
    /// A party in the queue's candidate set.
    QueueCandidate,
    /// The accountable party (the obligee unless named).
    Accountable,
    /// The party an open delegate offer (or reassign) is made to.
    DelegateTarget,
    /// The party an open assign offer is made to.
    AssignTarget,
    /// The party that opened the Condition.
    ConditionOwner,
    /// The party the Condition is addressed to.
    ConditionAddressee,
    /// A party acting for the obligor's organisation (executor reports).
    Executor,
    /// An external claimant: a party Access grants [`crate::Authority::Observer`] for the
    /// obligor's organisation (seed 000: "Execution, control and liveness come from executor
    /// or external Claims"). It may write observations only; stop responses, consumption and
    /// acts stay the executor's.
    ExternalObserver,
    /// A party of this node's organisation (Access: the Work service party's organisation).
    LocalParty,
    /// The person holding control under a control lease.
    ControlHolder,
}

/// The result column: a new state, or no state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// No state change.
    Stay,
    /// The items acted on move to this state.
    To(State),
}

use State as S;
const REQUESTED: StateSet = StateSet::of(&[S::Requested]);
const COUNTERED: StateSet = StateSet::of(&[S::Countered]);
const PROMISED: StateSet = StateSet::of(&[S::Promised]);
const STATED: StateSet = StateSet::of(&[S::Stated]);
const COND: StateSet = StateSet::of(&[S::ConditionallyPromised]);
const HELD_PROMISE: StateSet = StateSet::of(&[S::ConditionallyPromised, S::Promised]);
const CANCELLABLE: StateSet = StateSet::of(&[S::ConditionallyPromised, S::Promised, S::Stated]);
const DEFERRABLE: StateSet = StateSet::of(&[
    S::Requested,
    S::Countered,
    S::ConditionallyPromised,
    S::Promised,
]);
const EXPIRABLE: StateSet = StateSet::of(&[S::Requested, S::Countered, S::ConditionallyPromised]);
const OPEN: StateSet = StateSet::OPEN;
const ALL: StateSet = StateSet::ALL;

use Outcome::{Stay, To};
use RevokeKind as RK;
use RuleKey as K;

/// The transition table: (operation, from, result). An operation may have several rows (counter);
/// all items acted on must fall in one row.
pub const TRANSITIONS: &[(RuleKey, StateSet, Outcome)] = &[
    (K::Promise, REQUESTED, To(S::Promised)),
    (
        K::PromiseConditional,
        REQUESTED,
        To(S::ConditionallyPromised),
    ),
    (K::Decline, REQUESTED, To(S::Declined)),
    (K::Counter, REQUESTED, To(S::Countered)),
    (K::Counter, COUNTERED, To(S::Requested)),
    (K::AcceptCounter, COUNTERED, To(S::Promised)),
    (K::State, PROMISED, To(S::Stated)),
    (K::Accept, STATED, To(S::Accepted)),
    (K::Reject, STATED, To(S::Promised)),
    (K::Cancel, CANCELLABLE, To(S::Cancelled)),
    (K::Release, OPEN, To(S::Released)),
    (K::DelegateOffer, HELD_PROMISE, Stay),
    (K::DelegateAcceptance, HELD_PROMISE, Stay),
    (K::AssignOffer, OPEN, Stay),
    (K::AssignAcceptance, OPEN, Stay),
    (K::Dispute, ALL, Stay),
    (K::Defer, DEFERRABLE, Stay),
    (K::Resume, OPEN, Stay),
    (K::Revoke(RK::Request), REVOKE_REQUEST.from, Stay),
    (K::Revoke(RK::Promise), REVOKE_PROMISE.from, Stay),
    (K::Revoke(RK::Statement), REVOKE_STATEMENT.from, Stay),
    (K::Revoke(RK::Acceptance), REVOKE_ACCEPTANCE.from, Stay),
    (
        K::Allow(RK::Request),
        REVOKE_REQUEST.from,
        REVOKE_REQUEST.on_allow,
    ),
    (
        K::Allow(RK::Promise),
        REVOKE_PROMISE.from,
        REVOKE_PROMISE.on_allow,
    ),
    (
        K::Allow(RK::Statement),
        REVOKE_STATEMENT.from,
        REVOKE_STATEMENT.on_allow,
    ),
    (
        K::Allow(RK::Acceptance),
        REVOKE_ACCEPTANCE.from,
        REVOKE_ACCEPTANCE.on_allow,
    ),
    (K::Refuse(RK::Request), REVOKE_REQUEST.from, Stay),
    (K::Refuse(RK::Promise), REVOKE_PROMISE.from, Stay),
    (K::Refuse(RK::Statement), REVOKE_STATEMENT.from, Stay),
    (K::Refuse(RK::Acceptance), REVOKE_ACCEPTANCE.from, Stay),
    (K::Amend, OPEN, Stay),
    (K::Notice, OPEN, Stay),
    (K::DeclareObsolete, OPEN, To(S::Obsolete)),
    (K::Expire, EXPIRABLE, To(S::Expired)),
    (K::AdministrativeClose, OPEN, To(S::ClosedAdministratively)),
    (K::Claim, REQUESTED, To(S::Promised)),
    (K::Unclaim, PROMISED, To(S::Requested)),
    (K::Forward, OPEN, Stay),
    (K::Nominate, OPEN, Stay),
    (K::Offer, REQUESTED, Stay),
    (K::Reassign, DEFERRABLE, Stay),
    (K::RenewLease, OPEN, Stay),
    (K::OpenCondition, OPEN, Stay),
    (K::WithdrawCondition, OPEN, Stay),
    (K::SatisfyCondition, OPEN, Stay),
    (K::WithdrawPrecondition, COND, To(S::Promised)),
    (K::SatisfyPrecondition, COND, To(S::Promised)),
    (K::ReportConsumption, OPEN, Stay),
    (K::ActedUpon, OPEN, Stay),
    (K::Admission, ALL, Stay),
    (K::GateDecision, OPEN, Stay),
    (K::Observation, OPEN, Stay),
    (K::StopRequest, OPEN, Stay),
    (K::StopResponse, OPEN, Stay),
    (K::ResumeAfterStop, OPEN, Stay),
    (K::ControlLease, OPEN, Stay),
    (K::HandBackControl, OPEN, Stay),
    (K::Recheck, OPEN, Stay),
];

use Role as R;

/// The role table: (operation, from, roles). The author must hold one of the roles.
pub const ROLES: &[(RuleKey, StateSet, &[Role])] = &[
    (K::Promise, ALL, &[R::CandidateObligor]),
    (K::PromiseConditional, ALL, &[R::CandidateObligor]),
    (K::Decline, ALL, &[R::CandidateObligor]),
    (K::Counter, REQUESTED, &[R::CandidateObligor]),
    (K::Counter, COUNTERED, &[R::Obligee]),
    (K::AcceptCounter, ALL, &[R::Obligee]),
    (K::State, ALL, &[R::Obligor]),
    (K::Accept, ALL, &[R::Acceptor, R::WorkService]),
    (K::Reject, ALL, &[R::Acceptor]),
    (K::Cancel, ALL, &[R::Obligor]),
    (K::Release, ALL, &[R::Obligee]),
    (K::DelegateOffer, ALL, &[R::Obligor]),
    (K::DelegateAcceptance, ALL, &[R::DelegateTarget]),
    (K::AssignOffer, ALL, &[R::Obligee]),
    (K::AssignAcceptance, ALL, &[R::AssignTarget]),
    (K::Dispute, ALL, &[R::Obligor]),
    (K::Defer, ALL, &[R::Obligee, R::Obligor]),
    (K::Resume, ALL, &[R::Obligee, R::Obligor, R::WorkService]),
    (K::Revoke(RK::Request), ALL, REVOKE_REQUEST.asked_by),
    (K::Revoke(RK::Promise), ALL, REVOKE_PROMISE.asked_by),
    (K::Revoke(RK::Statement), ALL, REVOKE_STATEMENT.asked_by),
    (K::Revoke(RK::Acceptance), ALL, REVOKE_ACCEPTANCE.asked_by),
    (K::Allow(RK::Request), ALL, REVOKE_REQUEST.asked_of),
    (K::Allow(RK::Promise), ALL, REVOKE_PROMISE.asked_of),
    (K::Allow(RK::Statement), ALL, REVOKE_STATEMENT.asked_of),
    (K::Allow(RK::Acceptance), ALL, REVOKE_ACCEPTANCE.asked_of),
    (K::Refuse(RK::Request), ALL, REVOKE_REQUEST.asked_of),
    (K::Refuse(RK::Promise), ALL, REVOKE_PROMISE.asked_of),
    (K::Refuse(RK::Statement), ALL, REVOKE_STATEMENT.asked_of),
    (K::Refuse(RK::Acceptance), ALL, REVOKE_ACCEPTANCE.asked_of),
    (K::Amend, ALL, &[R::Obligee]),
    (K::Notice, ALL, &[R::Obligor]),
    (K::DeclareObsolete, ALL, &[R::Obligee, R::Principal]),
    (K::Expire, ALL, &[R::WorkService]),
    (K::AdministrativeClose, ALL, &[R::AdministrativeAuthority]),
    (K::Claim, ALL, &[R::QueueCandidate]),
    (K::Unclaim, ALL, &[R::ClaimingObligor, R::WorkService]),
    (K::Forward, ALL, &[R::QueueOwner, R::ClaimingObligor]),
    (
        K::Nominate,
        ALL,
        &[R::QueueOwner, R::Obligee, R::Accountable],
    ),
    (K::Offer, ALL, &[R::QueueOwner, R::WorkService]),
    (K::Reassign, ALL, &[R::QueueOwner, R::Accountable]),
    (K::RenewLease, ALL, &[R::Obligor]),
    (K::OpenCondition, ALL, &[R::Obligee, R::Obligor]),
    (K::WithdrawCondition, ALL, &[R::ConditionOwner]),
    (K::SatisfyCondition, ALL, &[R::ConditionAddressee]),
    (K::WithdrawPrecondition, ALL, &[R::ConditionOwner]),
    (K::SatisfyPrecondition, ALL, &[R::ConditionAddressee]),
    (K::ReportConsumption, ALL, &[R::Executor]),
    (K::ActedUpon, ALL, &[R::Executor]),
    // Seed 000 names no role for admission ("Access decides"): any party of this node.
    (K::Admission, ALL, &[R::LocalParty]),
    (
        K::GateDecision,
        ALL,
        &[R::ConditionAddressee, R::WorkService],
    ),
    // "Execution, control and liveness come from executor or external Claims" (seed 000,
    // "Other state axes"): the executor, or an external party Access names as observer.
    (K::Observation, ALL, &[R::Executor, R::ExternalObserver]),
    (
        K::StopRequest,
        ALL,
        &[R::Accountable, R::Obligee, R::Principal],
    ),
    (K::StopResponse, ALL, &[R::Executor]),
    (
        K::ResumeAfterStop,
        ALL,
        &[R::Accountable, R::Obligee, R::Principal],
    ),
    (K::ControlLease, ALL, &[R::Accountable, R::Obligee]),
    (K::HandBackControl, ALL, &[R::ControlHolder]),
    (K::Recheck, ALL, &[R::Accountable, R::Obligee, R::Obligor]),
];

/// The roles that may write a `request` (it has no from-state): "Obligee, or someone on its
/// behalf".
pub const REQUEST_ROLES: &[Role] = &[R::Obligee, R::OnBehalfOfObligee];

/// The transition row of `key` whose from-set contains `state`.
pub fn transition(key: RuleKey, state: State) -> Option<(StateSet, Outcome)> {
    TRANSITIONS
        .iter()
        .find(|(k, from, _)| *k == key && from.contains(state))
        .map(|(_, from, out)| (*from, *out))
}

/// The union of the from-sets of `key`.
pub fn from_states(key: RuleKey) -> StateSet {
    let states: Vec<State> = TRANSITIONS
        .iter()
        .filter(|(k, _, _)| *k == key)
        .flat_map(|(_, from, _)| from.states())
        .collect();
    StateSet::of(&states)
}

/// The roles that may perform `key` from `state`.
pub fn roles(key: RuleKey, state: State) -> &'static [Role] {
    ROLES
        .iter()
        .find(|(k, from, _)| *k == key && from.contains(state))
        .map(|(_, _, roles)| *roles)
        .unwrap_or(&[])
}

/// Every rule key, in table order (each once).
pub fn keys() -> Vec<RuleKey> {
    let mut out: Vec<RuleKey> = Vec::new();
    for (k, _, _) in TRANSITIONS {
        if !out.contains(k) {
            out.push(*k);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_roles_for_every_from_state() {
        for key in keys() {
            for s in from_states(key).states() {
                assert!(
                    !roles(key, s).is_empty(),
                    "{} from {s} has no role row",
                    key.name()
                );
            }
        }
    }

    #[test]
    fn rows_of_one_key_do_not_overlap() {
        for key in keys() {
            for s in State::ALL {
                let n = TRANSITIONS
                    .iter()
                    .filter(|(k, f, _)| *k == key && f.contains(s))
                    .count();
                assert!(n <= 1, "{} has {n} rows from {s}", key.name());
            }
        }
    }

    #[test]
    fn terminal_states_change_by_no_rule() {
        for (key, from, out) in TRANSITIONS {
            for s in from.states() {
                if s.is_terminal() {
                    assert_eq!(*out, Outcome::Stay, "{} moves terminal {s}", key.name());
                }
            }
        }
    }

    #[test]
    fn names() {
        assert_eq!(RuleKey::PromiseConditional.name(), "promise_conditional");
        assert_eq!(
            RuleKey::Allow(RevokeKind::Acceptance).name(),
            "allow(revoke_acceptance)"
        );
        assert_eq!(
            RuleKey::Revoke(RevokeKind::Request).name(),
            "revoke_request"
        );
    }
}
