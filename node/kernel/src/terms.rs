//! The content of a `request` and of new terms (seed 000, "Commitment" and "Operations"):
//! terms, line items, budget, acceptance criterion, queue; re-exported from [`crate::record`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{Distribution, Party};

/// The terms of a commitment. A counter or an amend carries a whole new `Terms`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    /// Short human title (required on a request).
    pub title: String,
    /// What is to be done.
    pub description: String,
    /// Due date (Unix ms); missing it raises the `overdue` flag, never a state change.
    pub due: Option<i64>,
    /// Line items; each derives its own state. Empty = a single-item commitment.
    pub items: Vec<LineItem>,
    /// Optional budget.
    pub budget: Option<Budget>,
    /// Free-form parameters bound to the terms.
    pub parameters: BTreeMap<String, String>,
}

/// One line item.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineItem {
    /// Item id, unique within the commitment.
    pub id: String,
    /// What the item is.
    pub description: String,
}

/// A budget; once the consumption reported reaches `amount`, the move is the accountable party's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The amount available.
    pub amount: u64,
    /// The unit.
    pub unit: String,
}

/// How delivery is accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptanceCriterion {
    /// Acceptance must cite an evidence reference.
    pub requires_evidence: bool,
    /// Four-eyes rule: the acceptor must differ from the party that stated fulfilment.
    pub four_eyes: bool,
    /// Step-up authentication is required to accept.
    pub step_up: bool,
}

/// A queue a pooled commitment waits in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queue {
    /// Queue name (required).
    pub name: String,
    /// The declared queue owner.
    pub owner: Option<Party>,
    /// The candidate set: parties that may claim.
    pub candidates: Vec<Party>,
    /// Ownership lease length after a claim, in ms.
    pub lease_ms: Option<i64>,
    /// When a lease ends: true = return to the pool (the Work service party writes unclaim).
    pub return_to_pool_on_lease_end: bool,
    /// If nobody holds the commitment by then, assignment becomes `failed_to_assign`.
    pub start_deadline: Option<i64>,
    /// The distribution policy: when the commitment is in this queue with nobody holding it
    /// and no open offer, the Work service party writes the `offer` it picks (seed 000,
    /// "Assignment": offer — "Queue owner or distribution policy"). `Unspecified` = none.
    #[serde(default)]
    pub distribution: Distribution,
}

/// `request`: the obligee (or someone on its behalf) asks for a commitment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The obligee; `None` = the author.
    pub obligee: Option<Party>,
    /// The candidate obligor, when the request is addressed to one party.
    pub candidate: Option<Party>,
    /// The queue, when the request is pooled.
    pub queue: Option<Queue>,
    /// The acceptor; `None` = the obligee (follows an assign).
    pub acceptor: Option<Party>,
    /// The accountable party; `None` = the obligee (follows an assign).
    pub accountable: Option<Party>,
    /// A principal who may declare the commitment obsolete.
    pub principal: Option<Party>,
    /// The terms.
    pub terms: Terms,
    /// Validity statement: the Work service party expires the request after this time.
    pub valid_until: Option<i64>,
    /// How delivery is accepted.
    pub acceptance: AcceptanceCriterion,
    /// Implicit acceptance window after `state`, in ms.
    pub implicit_acceptance_window_ms: Option<i64>,
}
