//! The derived read model of a commitment at a time (seed 000, "Whose move it is", "Summary
//! category", "Other state axes", "Assignment", line item "mixed" summary).

use serde::{Deserialize, Serialize};

use crate::access::Access;
use crate::assignment::{Assignment, assignment};
use crate::claims::{self, contradiction};
pub use crate::claims::{Control, Execution, Liveness};
use crate::commitment::{
    AnswerMark, AttentionMark, Commitment, Deferral, DisputeMark, Handover, HandoverOffer,
    NoticeMark, OpenCondition, OpenRevoke, ReopenLink, StopState, WorkPhase,
};
use crate::gates::{self, GateStatus, Participation};
use crate::record::{Budget, Condition, NoticeType, Party, RecheckOutcome, RecordId};
use crate::revoke::other_side;
use crate::service::{ImplicitBlock, implicit_block};
use crate::state::State;

macro_rules! wire {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $v:ident => $w:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $v,)+ }
        impl $name {
            /// Every value, in the seed's order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The wire name.
            pub const fn wire_name(self) -> &'static str {
                match self { $($name::$v => $w,)+ }
            }
        }
    };
}

wire!(
    /// The summary category (seed 000, "Summary category"). `ALL`, the declaration order, is
    /// the seed's precedence order (the first row that applies wins); [`holds`] is the "Derived
    /// from" column, row by row.
    Category {
        /// The item reached a terminal state.
        Closed => "closed",
        /// An open defer holds the item.
        Deferred => "deferred",
        /// The item is in the request phase (requested or countered), whatever the assignment.
        Triage => "triage",
        /// The item is stated as done.
        AwaitingAcceptance => "awaiting_acceptance",
        /// An open Condition record waits: the item's own precondition (conditionally
        /// promised), or a Condition or gate that is not satisfied.
        Waiting => "waiting",
        /// Begun work whose liveness is stale or unknown, or whose execution cannot be known
        /// (an external state that cannot be mapped, contradicting claims, a stop not yet
        /// confirmed).
        Unknown => "unknown",
        /// Work whose execution has begun (running, paused, completed, failed, cancelled or
        /// stopped reported, or sent back after its statement).
        Active => "active",
        /// Promised; execution not started.
        Ready => "ready",
    }
);

wire!(
    /// Flags: they never change the category.
    Flag {
        /// The due date passed before the statement.
        Overdue => "overdue",
        /// The obligor gave an at_risk or cannot_complete notice.
        AtRisk => "at_risk",
        /// Two claims about the same work that cannot both hold.
        Contradiction => "contradiction",
        /// An executor missed its heartbeat interval.
        Stale => "stale",
        /// A person took over control (control manual or intervened).
        TakenOver => "taken_over",
        /// Stated, and no evidence recorded.
        Unevidenced => "unevidenced",
    }
);

wire!(
    /// The row of the seed's "Whose move it is" table.
    MoveRow {
        /// requested: candidate obligor, or queue owner.
        Requested => "requested",
        /// countered: obligee.
        Countered => "countered",
        /// conditionally_promised: whoever the precondition is addressed to.
        ConditionallyPromised => "conditionally_promised",
        /// promised: obligor.
        Promised => "promised",
        /// stated: acceptor.
        Stated => "stated",
        /// Open revoke request: the other side.
        OpenRevokeRequest => "open_revoke_request",
        /// Budget exhausted: accountable party.
        BudgetExhausted => "budget_exhausted",
    }
);

/// One "whose move" entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// Which row of the table.
    pub row: MoveRow,
    /// Whose move it is.
    pub parties: Vec<Party>,
    /// The items concerned.
    pub items: Vec<String>,
}

/// One line item in the per-item breakdown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemView {
    /// Item id (empty for a commitment without line items).
    pub id: String,
    /// Description.
    pub description: String,
    /// Its state.
    pub state: State,
    /// Accepted implicitly.
    pub accepted_implicitly: bool,
    /// While stated: why the Work service party will not accept implicitly.
    pub implicit_acceptance_blocked: Option<ImplicitBlock>,
}

/// The derived read model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// The commitment id.
    pub commitment: String,
    /// The state, when every item is in the same one.
    pub state: Option<State>,
    /// The state's wire name, or `mixed`.
    pub summary: String,
    /// Per-item breakdown.
    pub items: Vec<ItemView>,
    /// Every item is terminal.
    pub terminal: bool,
    /// The summary category.
    pub category: Category,
    /// Flags.
    pub flags: Vec<Flag>,
    /// Whose move it is.
    pub whose_move: Vec<Move>,
    /// The assignment axis.
    pub assignment: Assignment,
    /// The execution axis.
    pub execution: Execution,
    /// The control axis.
    pub control: Control,
    /// The liveness axis.
    pub liveness: Liveness,
    /// Obligee.
    pub obligee: Party,
    /// Obligor.
    pub obligor: Option<Party>,
    /// Acceptor.
    pub acceptor: Party,
    /// Accountable party.
    pub accountable: Party,
    /// Offered to.
    pub offered_to: Option<Party>,
    /// Nominees.
    pub nominees: Vec<Party>,
    /// Open revoke requests.
    pub open_revokes: Vec<OpenRevoke>,
    /// Dispute marks.
    pub disputes: Vec<DisputeMark>,
    /// The open deferral.
    pub deferral: Option<Deferral>,
    /// Open conditions.
    pub open_conditions: Vec<OpenCondition>,
    /// Open delegate offer.
    pub pending_delegate: Option<HandoverOffer>,
    /// Open assign offer.
    pub pending_assign: Option<HandoverOffer>,
    /// Terms version number.
    pub version: u32,
    /// Record id of the current terms version.
    pub terms_version: RecordId,
    /// The current counter version, while countered.
    pub counter_version: Option<RecordId>,
    /// Forward count.
    pub forward_count: u32,
    /// Lease end, while claimed with a lease.
    pub lease_until: Option<i64>,
    /// Consumption reported.
    pub consumed: u64,
    /// Budget exhausted.
    pub budget_exhausted: bool,
    /// Some item ended `cancelled` (a revoke_promise allowed ends `withdrawn`, not counted).
    pub counts_as_cancel: bool,
    /// Notices (attention).
    pub attention: Vec<NoticeMark>,
    /// This commitment reopens another.
    pub reopens: Option<ReopenLink>,
    /// Reopenings of this commitment.
    pub reopened_by: Vec<ReopenLink>,
    /// Number of records applied.
    pub records: usize,
    /// The control lease holder, while a person holds control.
    pub control_holder: Option<Party>,
    /// Every Condition and gate (open or answered), with its answers and status.
    pub gates: Vec<GateView>,
    /// Open revoke requests with every party they are asked of.
    pub revokes: Vec<RevokeView>,
    /// The candidate obligors (the obligor once known).
    pub candidates: Vec<Party>,
    /// The principal named by the request.
    pub principal: Option<Party>,
    /// The budget, if the terms carry one.
    pub budget: Option<Budget>,
    /// The latest stop request and what followed it.
    pub stop: Option<StopState>,
    /// The control handover under way.
    pub handover: Option<Handover>,
    /// The outcome of the last handover re-check.
    pub last_recheck: Option<RecheckOutcome>,
    /// Attention raised for parties (a refused stop request).
    pub attention_marks: Vec<AttentionMark>,
}

/// An open revoke request and the other side it is asked of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeView {
    /// The revoke request.
    pub revoke: OpenRevoke,
    /// Every party it is asked of.
    pub asked_of: Vec<Party>,
}

/// One answer and whether it still counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerView {
    /// The answer.
    pub answer: AnswerMark,
    /// It still counts: the content it answered is the content now.
    pub valid: bool,
}

/// A Condition or gate at `now`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateView {
    /// The record that opened it.
    pub record: RecordId,
    /// Who opened it.
    pub owner: Party,
    /// The condition: kind, participants, aggregation, deadline.
    pub condition: Condition,
    /// For a precondition: the items it holds back.
    pub precondition_items: Vec<String>,
    /// Its status.
    pub status: GateStatus,
    /// Each participant's standing, in order.
    pub participants: Vec<(Party, Participation)>,
    /// Every answer given.
    pub answers: Vec<AnswerView>,
}

fn push_unique(out: &mut Vec<Party>, p: &Party) {
    if !out.contains(p) {
        out.push(p.clone());
    }
}

/// Whose move it is (seed 000 table): open revoke request first, then budget exhausted, then
/// one entry per open state, in the seed's order.
///
/// The queue owner of the `requested` row ("Candidate obligor, or queue owner") is whoever
/// `access` lets act as the queue's owner ([`Access::queue_owners`]): its grantees when Access
/// grants ownership of that queue, the declared owner otherwise — the party named is the party
/// whose `offer`, `forward`, `nominate` or `reassign` `apply` accepts.
pub fn whose_move(c: &Commitment, access: &Access) -> Vec<Move> {
    let mut moves = Vec::new();
    if let Some(rv) = &c.revoke {
        moves.push(Move {
            row: MoveRow::OpenRevokeRequest,
            parties: other_side(c, rv.kind),
            items: rv.items.clone(),
        });
    }
    let open = c.open_items();
    if c.budget_exhausted() && !open.is_empty() {
        moves.push(Move {
            row: MoveRow::BudgetExhausted,
            parties: vec![c.accountable().clone()],
            items: open.clone(),
        });
    }
    let rows = [
        (State::Requested, MoveRow::Requested),
        (State::Countered, MoveRow::Countered),
        (State::ConditionallyPromised, MoveRow::ConditionallyPromised),
        (State::Promised, MoveRow::Promised),
        (State::Stated, MoveRow::Stated),
    ];
    for (state, row) in rows {
        let items: Vec<String> = open
            .iter()
            .filter(|i| c.items[*i].state == state)
            .cloned()
            .collect();
        if items.is_empty() {
            continue;
        }
        let mut parties = Vec::new();
        match state {
            State::Requested => {
                for p in c.candidate_obligors() {
                    push_unique(&mut parties, &p);
                }
                if let Some(q) = &c.queue {
                    for owner in access.queue_owners(&q.queue) {
                        push_unique(&mut parties, &owner);
                    }
                }
            }
            State::Countered => push_unique(&mut parties, &c.obligee),
            State::ConditionallyPromised => {
                for oc in c.conditions.iter().filter(|oc| oc.is_precondition()) {
                    if oc.precondition_items.iter().any(|i| items.contains(i))
                        && let Some(p) = &oc.condition.addressed_to
                    {
                        push_unique(&mut parties, p);
                    }
                }
            }
            State::Promised => parties.extend(c.obligor.iter().cloned()),
            _ => push_unique(&mut parties, c.acceptor()),
        }
        moves.push(Move {
            row,
            parties,
            items,
        });
    }
    moves
}

/// Whether the "Derived from" of row `row` of seed 000's summary category table holds for
/// item `id` of `c` at `now`. The choices where the seed's text leaves room (a request that is
/// offered or failed to assign; begun work that is paused, completed, failed, cancelled or
/// stopped; rework after a reject; a stale executor before the work began) are argued in
/// ARCHITECTURE.md, "Seed 000's summary category".
pub fn holds(row: Category, c: &Commitment, id: &str, now: i64) -> bool {
    let item = &c.items[id];
    let s = item.state;
    if s.is_terminal() {
        return row == Category::Closed;
    }
    // The work phase of a promised or conditionally promised item: since when, and whether an
    // executor reported it begun (every such item has one; a hand-made state without it reads
    // as not begun, every claim counting).
    let work = matches!(s, State::Promised | State::ConditionallyPromised).then(|| {
        item.work.unwrap_or(WorkPhase {
            since: 0,
            begun: false,
        })
    });
    let begun = work.filter(|w| w.begun);
    match row {
        Category::Closed => false,
        Category::Deferred => c
            .deferral
            .as_ref()
            .is_some_and(|d| d.items.is_empty() || d.items.iter().any(|i| i == id)),
        Category::Triage => matches!(s, State::Requested | State::Countered),
        Category::AwaitingAcceptance => s == State::Stated,
        Category::Waiting => {
            s == State::ConditionallyPromised
                || c.conditions.iter().any(|oc| {
                    !oc.is_precondition() && gates::status(c, oc, now) != GateStatus::Satisfied
                })
        }
        Category::Unknown => begun.is_some_and(|w| {
            matches!(
                claims::liveness_since(c, Some(w.since), now),
                Liveness::Stale | Liveness::Unknown
            ) || claims::execution_since(c, Some(w.since)) == Execution::Unknown
        }),
        Category::Active => begun.is_some(),
        Category::Ready => work.is_some_and(|w| !w.begun),
    }
}

/// The rows of the summary category table that hold for item `id` at `now`, in precedence
/// order: the first is the item's category.
pub fn item_rows(c: &Commitment, id: &str, now: i64) -> Vec<Category> {
    Category::ALL
        .iter()
        .copied()
        .filter(|row| holds(*row, c, id, now))
        .collect()
}

/// The summary category of item `id` at `now`: the first row of the table that holds.
pub fn item_category(c: &Commitment, id: &str, now: i64) -> Category {
    Category::ALL
        .iter()
        .copied()
        .find(|row| holds(*row, c, id, now))
        .expect(
            "every open item is requested, countered, promised, conditionally promised or stated",
        )
}

/// The summary category (seed 000: "One category is derived from the five state axes. When
/// several apply, the first in this order wins"): closed once every item is, otherwise the
/// first, in the seed's precedence order, of the open items' categories ("A commitment with
/// line items derives state per item").
pub fn category(c: &Commitment, now: i64) -> Category {
    // `Category`'s order is its declaration order, `ALL`'s.
    c.items
        .iter()
        .filter(|(_, i)| !i.state.is_terminal())
        .map(|(id, _)| item_category(c, id, now))
        .min()
        .unwrap_or(Category::Closed)
}

/// The flags at `now`.
pub fn flags(c: &Commitment, now: i64) -> Vec<Flag> {
    let mut out = Vec::new();
    let before_statement = c.items.values().any(|i| {
        matches!(
            i.state,
            State::Requested | State::Countered | State::ConditionallyPromised | State::Promised
        )
    });
    if c.terms.due.is_some_and(|d| now > d) && before_statement {
        out.push(Flag::Overdue);
    }
    let risk = c.notices.iter().any(|n| {
        matches!(
            n.notice_type,
            NoticeType::AtRisk | NoticeType::CannotComplete
        )
    });
    if risk && !c.is_closed() {
        out.push(Flag::AtRisk);
    }
    if c.items.values().any(|i| i.state == State::Stated) && c.evidence.is_empty() {
        out.push(Flag::Unevidenced);
    }
    if contradiction(c) {
        out.push(Flag::Contradiction);
    }
    if claims::liveness(c, now) == Liveness::Stale {
        out.push(Flag::Stale);
    }
    if matches!(claims::control(c).0, Control::Manual | Control::Intervened) {
        out.push(Flag::TakenOver);
    }
    out.sort();
    out
}

/// The read model of `c` at `now`, under the node's `access` (who owns the queue).
pub fn view(c: &Commitment, now: i64, access: &Access) -> View {
    let state = c.state();
    let items = c
        .items
        .iter()
        .map(|(id, it)| ItemView {
            id: id.clone(),
            description: it.description.clone(),
            state: it.state,
            accepted_implicitly: it.accepted_implicitly,
            implicit_acceptance_blocked: match (&it.statement, it.state) {
                (Some(s), State::Stated) if c.implicit_window_ms.is_some() => implicit_block(c, s),
                _ => None,
            },
        })
        .collect();
    View {
        commitment: c.id.clone(),
        state,
        summary: state.map_or_else(|| "mixed".to_string(), |s| s.wire_name().to_string()),
        items,
        terminal: c.is_closed(),
        category: category(c, now),
        flags: flags(c, now),
        whose_move: whose_move(c, access),
        assignment: assignment(c, now),
        execution: claims::execution(c),
        control: claims::control(c).0,
        liveness: claims::liveness(c, now),
        obligee: c.obligee.clone(),
        obligor: c.obligor.clone(),
        acceptor: c.acceptor().clone(),
        accountable: c.accountable().clone(),
        offered_to: c.offered_to.clone(),
        nominees: c.nominees.clone(),
        open_revokes: c.revoke.iter().cloned().collect(),
        disputes: c.disputes.clone(),
        deferral: c.deferral.clone(),
        open_conditions: c
            .conditions
            .iter()
            .filter(|oc| gates::status(c, oc, now) != GateStatus::Satisfied)
            .cloned()
            .collect(),
        pending_delegate: c.delegate_offer.clone(),
        pending_assign: c.assign_offer.clone(),
        version: c.version,
        terms_version: c.terms_version,
        counter_version: c.counter.as_ref().map(|cv| cv.record),
        forward_count: c.forward_count,
        lease_until: c.claim.as_ref().and_then(|cl| cl.lease_until),
        consumed: c.consumed,
        budget_exhausted: c.budget_exhausted(),
        counts_as_cancel: c.items.values().any(|i| i.state == State::Cancelled),
        attention: c.notices.clone(),
        reopens: c.reopens.clone(),
        reopened_by: c.reopened_by.clone(),
        records: c.history.len(),
        control_holder: claims::control(c).1,
        gates: c
            .conditions
            .iter()
            .map(|oc| GateView {
                record: oc.record,
                owner: oc.owner.clone(),
                condition: oc.condition.clone(),
                precondition_items: oc.precondition_items.clone(),
                status: gates::status(c, oc, now),
                participants: gates::participation(c, oc, now),
                answers: oc
                    .answers
                    .iter()
                    .map(|a| AnswerView {
                        answer: a.clone(),
                        valid: gates::answer_valid(c, a),
                    })
                    .collect(),
            })
            .collect(),
        revokes: c
            .revoke
            .iter()
            .map(|r| RevokeView {
                revoke: r.clone(),
                asked_of: other_side(c, r.kind),
            })
            .collect(),
        candidates: c.candidate_obligors(),
        principal: c.principal.clone(),
        budget: c.terms.budget.clone(),
        stop: c.stop.clone(),
        handover: c.handover.clone(),
        last_recheck: c.last_recheck.map(|(_, o)| o),
        attention_marks: c.attention.clone(),
    }
}
