//! The revoke table (seed 000, "Revoke requests"): who asks, who is asked, the states each
//! request acts on and what allow and refuse do. `rules` builds its transition and role rows
//! for revoke, allow and refuse from these rows; the `revoke` module executes them.

use serde::{Deserialize, Serialize};

use super::{Outcome, Role};
use crate::record::RevokeKind;
use crate::state::{State, StateSet};

impl RevokeKind {
    /// Its row of the revoke table.
    pub const fn rule(self) -> &'static RevokeRule {
        match self {
            RevokeKind::Request => &REVOKE_REQUEST,
            RevokeKind::Promise => &REVOKE_PROMISE,
            RevokeKind::Statement => &REVOKE_STATEMENT,
            RevokeKind::Acceptance => &REVOKE_ACCEPTANCE,
        }
    }
}

/// What a refuse does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRefuse {
    /// The commitment continues unchanged.
    Continues,
    /// A dispute mark is made.
    DisputeMark,
}

/// One row of the seed's revoke table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RevokeRule {
    /// The request.
    pub kind: RevokeKind,
    /// Asked by.
    pub asked_by: &'static [Role],
    /// Asked of (who may allow or refuse).
    pub asked_of: &'static [Role],
    /// The states it acts on (for the request, and for allow/refuse).
    pub from: StateSet,
    /// On allow.
    pub on_allow: Outcome,
    /// On allow, a linked reopening commitment starts.
    pub allow_reopens: bool,
    /// On refuse.
    pub on_refuse: OnRefuse,
}

/// revoke_request: obligee -> candidate or obligor; allow: withdrawn; refuse: continues.
pub const REVOKE_REQUEST: RevokeRule = RevokeRule {
    kind: RevokeKind::Request,
    asked_by: &[Role::Obligee],
    asked_of: &[Role::CandidateObligor, Role::Obligor],
    from: StateSet::OPEN,
    on_allow: Outcome::To(State::Withdrawn),
    allow_reopens: false,
    on_refuse: OnRefuse::Continues,
};

/// revoke_promise: obligor -> obligee; allow: withdrawn (not a cancel); refuse: continues.
pub const REVOKE_PROMISE: RevokeRule = RevokeRule {
    kind: RevokeKind::Promise,
    asked_by: &[Role::Obligor],
    asked_of: &[Role::Obligee],
    from: StateSet::of(&[State::ConditionallyPromised, State::Promised]),
    on_allow: Outcome::To(State::Withdrawn),
    allow_reopens: false,
    on_refuse: OnRefuse::Continues,
};

/// revoke_statement: obligor -> acceptor; allow: promised; refuse: stays stated.
pub const REVOKE_STATEMENT: RevokeRule = RevokeRule {
    kind: RevokeKind::Statement,
    asked_by: &[Role::Obligor],
    asked_of: &[Role::Acceptor],
    from: StateSet::of(&[State::Stated]),
    on_allow: Outcome::To(State::Promised),
    allow_reopens: false,
    on_refuse: OnRefuse::Continues,
};

/// revoke_acceptance: acceptor -> obligor; allow: stays accepted, a reopening starts; refuse:
/// a dispute mark.
pub const REVOKE_ACCEPTANCE: RevokeRule = RevokeRule {
    kind: RevokeKind::Acceptance,
    asked_by: &[Role::Acceptor],
    asked_of: &[Role::Obligor],
    from: StateSet::of(&[State::Accepted]),
    on_allow: Outcome::Stay,
    allow_reopens: true,
    on_refuse: OnRefuse::DisputeMark,
};

/// The revoke table, in the seed's order.
pub const REVOKES: [&RevokeRule; 4] = [
    &REVOKE_REQUEST,
    &REVOKE_PROMISE,
    &REVOKE_STATEMENT,
    &REVOKE_ACCEPTANCE,
];
