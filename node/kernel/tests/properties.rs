//! Property tests over random runs of 2–4 commitments, each created one of the ways seed 000
//! allows (a request to a named candidate, a pooled request written on the obligee's behalf, a
//! request offered to a party out of a queue, a queue with no candidates that its owner must
//! offer or forward; a reopening started by an allowed revoke_acceptance), with different
//! parties in the roles. Most steps are an operation plausible in the commitment's current state
//! (seed 000 "Operations", From column) by a party holding its role; a minority are deliberately
//! wrong (a party without the role, a second request, a party Access does not list, a record for
//! a commitment that does not exist, any operation by anyone), and some are Work service ticks.
//!
//! Oracles that do not come from the kernel: a second request is `commitment_exists`; anything
//! from an organisation Access does not list is `not_authorized`; a record for a commitment never
//! requested is `unknown_commitment`; a state in the seed's terminal column never changes, and on
//! a commitment whose items are all terminal only the seed's after-terminal operations apply; the
//! obligor changes only by the new obligor's delegate acceptance (or goes by an unclaim) and the
//! obligee only by the new obligee's assign acceptance; an applied operation from the seed's
//! table was in its From states and moves the items it acts on to its Result; replaying the
//! applied records from scratch gives the same commitments and the same effects. Kernel-derived
//! checks too: a rejected record changes nothing, every record `due_work` proposes is accepted,
//! the view is consistent with the state.
//!
//! `the_generator_reaches_every_state_and_mostly_applies` measures the mix over a fixed RNG seed.
//!
//! Each seed oracle was seen failing against a mutation of the kernel (then reverted): release
//! allowed from every state (a terminal state left); notice allowed from every state (an
//! operation applied on a closed commitment); a delegate offer that sets the obligor, an assign
//! offer that sets the obligee; reject moving to requested (Result); state allowed from
//! conditionally_promised (From); named items ignored, acting on every item (an item moved that
//! the record does not name); `unknown_commitment` answered `invalid_state`; no expire from
//! `due_work` (the mix test: no run reaches expired); supplier, pool and qa parties refused by
//! Access (the mix test: 0.281 of the steps apply).

mod common;
mod seed_tables;

use std::collections::{BTreeMap, BTreeSet};

use accord_kernel::*;
use common::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

/// Seed 000, "Commitment" / "States": (wire name, terminal), read once from the seed's table as
/// `seed_tables/000_operations.txt` quotes it.
static SEED_STATES: std::sync::LazyLock<Vec<(String, bool)>> =
    std::sync::LazyLock::new(seed_tables::states);

/// Whether the seed's table marks `s` terminal ("A terminal state never changes").
fn seed_terminal(s: State) -> bool {
    SEED_STATES
        .iter()
        .any(|(name, terminal)| *terminal && name == s.wire_name())
}

/// What may still apply on a commitment whose items are all terminal: the seed's operations
/// whose From is a terminal state or no state (revoke_acceptance "accepted"; allow/refuse "an
/// open revoke request"; dispute "after a reject or an open revoke_acceptance"), and admission,
/// the federation's record (seed 000, "Federation admission"), which acts on no state.
const AFTER_TERMINAL: [&str; 5] = [
    "revoke_acceptance",
    "allow",
    "refuse",
    "dispute",
    "admission",
];

/// The From column of a row of the seed's "Operations" table.
#[derive(Clone, Copy)]
enum From {
    States(&'static [&'static str]),
    AnyOpen,
    /// No state constraint (an open revoke request, a reject).
    Any,
}

/// The Result column.
#[derive(Clone, Copy)]
enum Res {
    To(&'static str),
    /// "No state change", "Same state", "Continues", "A revoke request opens", "A new version".
    Stay,
    /// counter: "Candidate's counter: countered. Obligee's counter: requested".
    Counter,
    /// allow: the revoke table's "On allow" column for the open revoke request.
    Allow,
}

/// Seed 000 "Operations" and "Assignment", the rows with a From and a Result (transcribed).
const SEED_ROWS: &[(&str, From, Res)] = &[
    ("promise", From::States(&["requested"]), Res::To("promised")),
    (
        "promise_conditional",
        From::States(&["requested"]),
        Res::To("conditionally_promised"),
    ),
    ("decline", From::States(&["requested"]), Res::To("declined")),
    (
        "counter",
        From::States(&["requested", "countered"]),
        Res::Counter,
    ),
    (
        "accept_counter",
        From::States(&["countered"]),
        Res::To("promised"),
    ),
    ("state", From::States(&["promised"]), Res::To("stated")),
    ("accept", From::States(&["stated"]), Res::To("accepted")),
    ("reject", From::States(&["stated"]), Res::To("promised")),
    (
        "cancel",
        From::States(&["conditionally_promised", "promised", "stated"]),
        Res::To("cancelled"),
    ),
    ("release", From::AnyOpen, Res::To("released")),
    (
        "delegate",
        From::States(&["promised", "conditionally_promised"]),
        Res::Stay,
    ),
    ("assign", From::AnyOpen, Res::Stay),
    ("dispute", From::Any, Res::Stay),
    (
        "defer",
        From::States(&[
            "requested",
            "countered",
            "conditionally_promised",
            "promised",
        ]),
        Res::Stay,
    ),
    ("allow", From::Any, Res::Allow),
    ("refuse", From::Any, Res::Stay),
    ("amend", From::AnyOpen, Res::Stay),
    ("notice", From::AnyOpen, Res::Stay),
    ("declare_obsolete", From::AnyOpen, Res::To("obsolete")),
    (
        "expire",
        From::States(&["requested", "countered", "conditionally_promised"]),
        Res::To("expired"),
    ),
    (
        "administrative_close",
        From::AnyOpen,
        Res::To("closed_administratively"),
    ),
    ("claim", From::States(&["requested"]), Res::To("promised")),
    ("unclaim", From::States(&["promised"]), Res::To("requested")),
    ("forward", From::Any, Res::Stay),
    ("nominate", From::Any, Res::Stay),
    ("offer", From::Any, Res::Stay),
    ("reassign", From::Any, Res::Stay),
    ("renew_lease", From::Any, Res::Stay),
];

/// Seed 000 "Revoke requests", the "On allow" column (`None`: the terminal outcome stays).
fn allow_result(kind: RevokeKind) -> Option<&'static str> {
    match kind {
        RevokeKind::Request | RevokeKind::Promise => Some("withdrawn"),
        RevokeKind::Statement => Some("promised"),
        RevokeKind::Acceptance => None,
    }
}

/// How a commitment is created (seed 000 "Operations": request; "Assignment": pooled, offered).
#[derive(Clone, Copy, Debug)]
enum Form {
    /// The obligee requests of a named candidate that is also in a queue (the original case).
    Candidate,
    /// Someone on the obligee's behalf requests into a pool; whole item, acceptor = obligee.
    PooledOnBehalf,
    /// Another obligee offers to a party outside the queue it also pools in; three items.
    OfferedFromQueue,
    /// A queue with no candidates (failed_to_assign) that its owner must offer or forward.
    UnassignedQueue,
}

const FORMS: [Form; 4] = [
    Form::Candidate,
    Form::PooledOnBehalf,
    Form::OfferedFromQueue,
    Form::UnassignedQueue,
];

fn queue(name: &str, candidates: Vec<Party>, lease: Option<i64>, deadline: Option<i64>) -> Queue {
    Queue {
        name: name.into(),
        owner: Some(Cast::q()),
        candidates,
        lease_ms: lease,
        return_to_pool_on_lease_end: lease.is_some(),
        start_deadline: deadline,
        distribution: Distribution::Unspecified,
    }
}

/// The author and the request of a commitment created in `form`.
fn creation(form: Form, crit: AcceptanceCriterion) -> (Party, Request) {
    match form {
        Form::Candidate => (
            Cast::o(),
            Request {
                candidate: Some(Cast::c()),
                queue: Some(queue(
                    "q",
                    vec![Cast::k(), Cast::c()],
                    Some(150),
                    Some(T0 + 2_000),
                )),
                acceptor: Some(Cast::a()),
                terms: Terms {
                    budget: Some(Budget {
                        amount: 10,
                        unit: "h".into(),
                    }),
                    due: Some(T0 + 1_000),
                    ..terms_items("t", &["a", "b"])
                },
                valid_until: Some(T0 + 4_000),
                acceptance: crit,
                implicit_acceptance_window_ms: Some(30),
                ..basic_request()
            },
        ),
        Form::PooledOnBehalf => (
            Cast::o2(),
            Request {
                obligee: Some(Cast::o()),
                candidate: None,
                queue: Some(queue(
                    "pool",
                    vec![Cast::k(), Cast::c()],
                    Some(150),
                    Some(T0 + 2_500),
                )),
                acceptor: None,
                accountable: None,
                principal: None,
                terms: terms("pooled"),
                valid_until: Some(T0 + 900),
                ..Request::default()
            },
        ),
        Form::OfferedFromQueue => (
            Cast::w(),
            Request {
                candidate: Some(Cast::n1()),
                queue: Some(queue("q2", vec![Cast::k()], None, None)),
                acceptor: Some(Cast::y()),
                accountable: Some(Cast::pr()),
                principal: Some(Cast::x()),
                terms: terms_items("offered", &["a", "b", "c"]),
                acceptance: AcceptanceCriterion {
                    four_eyes: true,
                    ..crit
                },
                ..Request::default()
            },
        ),
        Form::UnassignedQueue => (
            Cast::x(),
            Request {
                queue: Some(queue("empty", vec![], None, None)),
                acceptor: None,
                principal: Some(Cast::pr()),
                terms: terms("unassigned"),
                valid_until: Some(T0 + 1_500),
                acceptance: AcceptanceCriterion {
                    requires_evidence: true,
                    ..AcceptanceCriterion::default()
                },
                implicit_acceptance_window_ms: Some(25),
                ..Request::default()
            },
        ),
    }
}

/// Share of steps, out of 100: Work service ticks, deliberately wrong steps; the rest plausible.
const TICK: u8 = 8;
const WRONG: u8 = 12;

#[derive(Clone, Debug)]
struct Step {
    /// < TICK: a tick; < TICK + WRONG: a deliberately wrong step; otherwise a plausible one.
    kind: u8,
    /// Which commitment (mostly an open one).
    target: u8,
    /// Which plausible operation (weighted), or which kind of wrong step.
    pick: u16,
    author: u8,
    /// The author holds the operation's role (otherwise: any party of the cast).
    role_author: bool,
    items: u8,
    basis: u8,
    /// For a wrong step: any operation.
    op: u8,
    dt: u16,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0u8..100,
        any::<u8>(),
        any::<u16>(),
        any::<u8>(),
        proptest::bool::weighted(0.9),
        any::<u8>(),
        any::<u8>(),
        0u8..57,
        0u16..80,
    )
        .prop_map(
            |(kind, target, pick, author, role_author, items, basis, op, dt)| Step {
                kind,
                target,
                pick,
                author,
                role_author,
                items,
                basis,
                op,
                dt,
            },
        )
}

/// The operations plausible on `c` for items in state `st` (`None`: the commitment is closed),
/// with weights: the seed's From column, and the open subjects (a revoke request, a defer, an
/// offer, a condition, a stop, a handover) the answering operations need. On a closed commitment,
/// the after-terminal operations and (lighter) late attempts of open-state ones, which must be
/// refused.
fn menu(c: &Commitment, st: Option<State>) -> Vec<(u8, u32)> {
    use State as S;
    let mut m: Vec<(u8, u32)> = Vec::new();
    let pooled = c
        .queue
        .as_ref()
        .is_some_and(|q| !q.queue.candidates.is_empty());
    let accept = if c.acceptance.requires_evidence || c.acceptance.step_up {
        7
    } else {
        6
    };
    match st {
        Some(S::Requested) => {
            m.extend([(0, 24), (1, 8), (2, 1), (3, 8), (35, 2), (37, 2)]);
            if c.queue.is_some() {
                m.extend([(36, 4), (34, 2)]);
            }
            if pooled && c.obligor.is_none() {
                m.push((32, 24));
            }
        }
        Some(S::Countered) => m.extend([(4, 24), (3, 8)]),
        Some(S::ConditionallyPromised) => {
            m.extend([(41, 16), (40, 5), (10, 1), (12, 5), (22, 2), (28, 2)])
        }
        Some(S::Promised) => {
            m.extend([
                (5, 30),
                (12, 5),
                (10, 1),
                (22, 2),
                (28, 2),
                (48, 4),
                (49, 2),
                (51, 2),
                (42, 2),
                (43, 4),
                (37, 2),
            ]);
            if c.claim.is_some() {
                m.extend([(33, 4), (38, 2), (55, 4)]);
            }
        }
        Some(S::Stated) => m.extend([(accept, 24), (9, 10), (23, 2), (10, 1), (43, 4)]),
        Some(_) => {}
        None => {
            if c.items.values().any(|i| i.state == S::Accepted) && c.revoke.is_none() {
                m.push((24, 6));
            }
            // Late attempts: each must be refused.
            m.extend([
                (5, 1),
                (accept, 1),
                (11, 1),
                (10, 1),
                (28, 1),
                (0, 1),
                (27, 1),
            ]);
        }
    }
    // Out-of-state attempts by the role holders (the neighbouring states' moves): each must be
    // refused unless the seed's From column lists the state.
    if st.is_some() {
        for n in [0, 4, 5, accept, 9, 33] {
            if !m.iter().any(|(x, _)| *x == n) {
                m.push((n, 1));
            }
        }
    }
    if let Some(s) = st {
        if !seed_terminal(s) {
            m.extend([(11, 1), (29, 1), (31, 1), (27, 2), (39, 2), (44, 1)]);
            if c.revoke.is_none() {
                m.push((21, 2));
            }
            if c.assign_offer.is_none() {
                m.push((14, 2));
            }
            if c.deferral.is_none() && s != S::Stated {
                m.extend([(17, 2), (18, 2)]);
            }
        }
    } else {
        m.push((44, 1));
    }
    if c.revoke.is_some() {
        m.extend([(25, 12), (26, 6)]);
    }
    if let Some(d) = &c.deferral {
        m.push((if d.return_event.is_some() { 20 } else { 19 }, 8));
    }
    if c.delegate_offer.is_some() {
        m.push((13, 12));
    }
    if c.assign_offer.is_some() {
        m.push((15, 8));
    }
    if !c.rejects.is_empty() || c.revoke.is_some() {
        m.push((16, 2));
    }
    if st.is_some() {
        if c.conditions.iter().any(|x| !x.is_precondition()) {
            m.extend([(40, 2), (41, 4), (47, 2)]);
        }
        if c.stop.is_some() {
            m.extend([(50, 4), (52, 2)]);
        }
        if c.handover.is_some() {
            m.extend([(53, 4), (54, 2)]);
        }
    }
    m
}

/// The parties of the cast acting for `p`'s organisation (an executor of `p`'s work).
fn org_of(p: &Party) -> Vec<Party> {
    cast()
        .into_iter()
        .filter(|x| x.organisation == p.organisation)
        .collect()
}

/// The parties holding the role operation `n` needs on `c` (items in state `st`), and its basis.
fn roles_for(n: u8, c: &Commitment, st: Option<State>) -> (Vec<Party>, Vec<RecordId>) {
    let one = |id: Option<RecordId>| id.into_iter().collect::<Vec<_>>();
    let obligee = c.obligee.clone();
    let obligor: Vec<Party> = c.obligor.iter().cloned().collect();
    let acceptor = c.acceptor().clone();
    let accountable = c.accountable().clone();
    let owner: Vec<Party> = c
        .queue
        .as_ref()
        .and_then(|q| q.queue.owner.clone())
        .into_iter()
        .collect();
    let executors: Vec<Party> = c.obligor.iter().flat_map(org_of).collect();
    let with = |mut v: Vec<Party>, more: &[Party]| {
        for p in more {
            if !v.contains(p) {
                v.push(p.clone());
            }
        }
        v
    };
    let a = c.items.values().find(|i| !seed_terminal(i.state));
    match n {
        0..=2 => (c.candidate_obligors(), vec![]),
        3 if st == Some(State::Countered) => (vec![obligee], vec![]),
        3 => (c.candidate_obligors(), vec![]),
        4 => (vec![obligee], one(c.counter.as_ref().map(|x| x.record))),
        5 | 10 | 12 | 22 | 23 | 28 | 38 => (obligor, vec![]),
        6 | 7 | 9 | 24 => (vec![acceptor], vec![]),
        8 => {
            let st = a.and_then(|i| i.statement.as_ref()).map(|s| s.record);
            (
                vec![Cast::s()],
                [Some(c.origin), st].into_iter().flatten().collect(),
            )
        }
        11 | 14 | 21 | 27 => (vec![obligee], one(Some(c.terms_version))),
        13 => (
            c.delegate_offer.iter().map(|x| x.to.clone()).collect(),
            one(c.delegate_offer.as_ref().map(|x| x.record)),
        ),
        15 => (
            c.assign_offer.iter().map(|x| x.to.clone()).collect(),
            one(c.assign_offer.as_ref().map(|x| x.record)),
        ),
        16 => (
            obligor,
            one(c
                .revoke
                .as_ref()
                .filter(|x| x.kind == RevokeKind::Acceptance)
                .map(|x| x.record)
                .or(c.rejects.last().copied())),
        ),
        17 | 18 => (with(vec![obligee], &obligor), vec![]),
        19 | 20 => (
            with(vec![obligee], &obligor),
            one(c.deferral.as_ref().map(|x| x.record)),
        ),
        25 | 26 => (
            c.revoke
                .as_ref()
                .map(|rv| accord_kernel::revoke::other_side(c, rv.kind))
                .unwrap_or_default(),
            one(c.revoke.as_ref().map(|x| x.record)),
        ),
        29 => (
            with(
                vec![obligee],
                &c.principal.iter().cloned().collect::<Vec<_>>(),
            ),
            vec![],
        ),
        30 => (
            vec![Cast::s()],
            one(a.and_then(|i| i.validity).map(|v| v.record)),
        ),
        31 => (vec![Cast::d()], vec![]),
        32 => (
            c.queue
                .as_ref()
                .map(|q| q.queue.candidates.clone())
                .unwrap_or_default(),
            vec![],
        ),
        33 => (obligor, one(c.queue.as_ref().map(|q| q.declared_by))),
        34 => (with(owner, &obligor), vec![]),
        35 => (with(owner, &[obligee, accountable]), vec![]),
        36 => (with(owner, &[Cast::s()]), vec![]),
        37 => (with(owner, &[accountable]), vec![]),
        39 => (with(vec![obligee], &obligor), vec![]),
        40 => {
            let oc = c.conditions.first();
            (
                oc.map(|x| vec![x.owner.clone()]).unwrap_or_default(),
                one(oc.map(|x| x.record)),
            )
        }
        41 => {
            let oc = c.conditions.last();
            (
                oc.map(|x| x.condition.participant_list())
                    .unwrap_or_default(),
                one(oc.map(|x| x.record)),
            )
        }
        42 | 43 | 48 => (executors, one(c.history.last().copied())),
        44 => (vec![Cast::s()], one(c.history.first().copied())),
        47 => {
            let g = c.conditions.iter().find(|x| !x.is_precondition());
            (
                g.map(|x| x.condition.participant_list())
                    .unwrap_or_default(),
                one(g.map(|x| x.record)),
            )
        }
        49 | 51 | 52 => (
            with(vec![accountable], &[obligee]),
            one(c.stop.as_ref().map(|x| x.record)),
        ),
        50 => (executors, one(c.stop.as_ref().map(|x| x.record))),
        53 => (
            c.handover.iter().map(|h| h.holder.clone()).collect(),
            one(c.handover.as_ref().map(|h| h.lease)),
        ),
        54 => (with(vec![accountable], &obligor), vec![]),
        55 => (vec![Cast::s()], one(c.claim.as_ref().map(|x| x.record))),
        _ => (vec![], vec![]),
    }
}

fn cast() -> [Party; 17] {
    [
        Cast::o(),
        Cast::o2(),
        Cast::c(),
        Cast::e(),
        Cast::k(),
        Cast::q(),
        Cast::a(),
        Cast::x(),
        Cast::pr(),
        Cast::d(),
        Cast::s(),
        Cast::n1(),
        Cast::n2(),
        Cast::y(),
        Cast::w(),
        Cast::z(),
        Cast::u(),
    ]
}

/// Ids a record might rest on, picked from the commitment (and one stale id).
fn basis_pick(c: &Commitment, pick: u8) -> Vec<RecordId> {
    let a = c.items.values().next();
    let candidates: Vec<Option<RecordId>> = vec![
        None,
        Some(c.origin),
        Some(c.terms_version),
        c.counter.as_ref().map(|x| x.record),
        c.delegate_offer.as_ref().map(|x| x.record),
        c.assign_offer.as_ref().map(|x| x.record),
        c.deferral.as_ref().map(|x| x.record),
        c.revoke.as_ref().map(|x| x.record),
        c.conditions.first().map(|x| x.record),
        c.conditions.last().map(|x| x.record),
        c.rejects.last().copied(),
        a.and_then(|i| i.validity).map(|v| v.record),
        a.and_then(|i| i.statement.as_ref()).map(|s| s.record),
        c.queue.as_ref().map(|q| q.declared_by),
        c.history.get(c.history.len() / 2).copied(),
        Some(rid(424_242)),
    ];
    candidates[pick as usize % candidates.len()]
        .into_iter()
        .collect()
}

fn op_for(n: u8, c: &Commitment, basis: &[RecordId], now: i64) -> Operation {
    use Operation as O;
    let any = basis.first().copied();
    let cond = || Condition {
        description: "c".into(),
        addressed_to: Some(Cast::w()),
        ..Condition::default()
    };
    let r = || "r".to_string();
    let t = |title: &str| Terms {
        title: title.into(),
        ..c.terms.clone()
    };
    let other = |p: Party, or: Party| {
        if c.obligor.as_ref() == Some(&p) {
            or
        } else {
            p
        }
    };
    match n {
        0 | 55 => O::Promise,
        1 => O::PromiseConditional {
            condition: cond(),
            deadline: Some(now + 200),
        },
        2 => O::Decline {
            reason: DeclineReason::NoCapacity,
            text: r(),
        },
        3 => O::Counter {
            terms: Some(t(&format!("v{}", c.history.len()))),
        },
        4 => O::AcceptCounter {
            counter_digest: any,
        },
        5 => O::State {
            fulfillment_refs: vec![r()],
        },
        6 => O::Accept {
            evidence_ref: String::new(),
            implicit: false,
            step_up: false,
        },
        7 => O::Accept {
            evidence_ref: "ev".into(),
            implicit: false,
            step_up: true,
        },
        8 => O::Accept {
            evidence_ref: String::new(),
            implicit: true,
            step_up: false,
        },
        9 => O::Reject { reason: r() },
        10 => O::Cancel {
            reason: CancelReason::Failed,
            text: r(),
        },
        11 => O::Release {
            reason: String::new(),
        },
        12 => O::DelegateOffer {
            to: Some(other(Cast::n1(), Cast::e())),
            handover_note: r(),
        },
        13 => O::DelegateAcceptance { offer_id: any },
        14 => O::AssignOffer {
            to: Some(if c.obligee == Cast::n2() {
                Cast::o2()
            } else {
                Cast::n2()
            }),
        },
        15 => O::AssignAcceptance { offer_id: any },
        16 => O::Dispute {
            disputed_record: any,
            reason: r(),
        },
        17 => O::Defer {
            reason: r(),
            return_at: Some(now + 50),
            return_event: String::new(),
        },
        // A return event from the kernel's closed list: the first open Condition closes
        // (none open: a defer with neither date nor event).
        18 => O::Defer {
            reason: r(),
            return_at: None,
            return_event: c
                .conditions
                .first()
                .map(|oc| format!("condition_closed:{}", hex_id(&oc.record)))
                .unwrap_or_default(),
        },
        19 => O::Resume {
            event: String::new(),
        },
        20 => O::Resume {
            event: c
                .deferral
                .as_ref()
                .and_then(|d| d.return_event.clone())
                .unwrap_or_default(),
        },
        21 => O::RevokeRequest { reason: r() },
        22 => O::RevokePromise { reason: r() },
        23 => O::RevokeStatement { reason: r() },
        24 => O::RevokeAcceptance { reason: r() },
        25 => O::Allow {
            reason: String::new(),
            reopening_commitment_id: String::new(),
        },
        26 => O::Refuse { reason: r() },
        27 => O::Amend {
            supersedes: any,
            terms: Some(t("amended")),
            participants: vec![],
        },
        28 => O::Notice {
            notice_type: NoticeType::AtRisk,
            text: String::new(),
        },
        29 => O::DeclareObsolete {
            parent_ref: "aim".into(),
        },
        30 => O::Expire,
        31 => O::AdministrativeClose { reason: r() },
        32 => O::Claim,
        33 => O::Unclaim {
            reason: String::new(),
        },
        34 => O::Forward {
            to: Some(Queue {
                name: "q2".into(),
                owner: Some(Cast::q()),
                candidates: vec![Cast::k()],
                lease_ms: Some(100),
                return_to_pool_on_lease_end: true,
                start_deadline: None,
                distribution: Distribution::Unspecified,
            }),
        },
        35 => O::Nominate {
            candidate: Some(Cast::z()),
        },
        36 => O::Offer {
            to: Some(Cast::c()),
        },
        37 => O::Reassign {
            to: Some(other(Cast::k(), Cast::c())),
        },
        38 => O::RenewLease { lease_ms: None },
        39 => O::OpenCondition { condition: cond() },
        40 => O::WithdrawCondition,
        41 => O::SatisfyCondition,
        42 => O::ReportConsumption { amount: 3 },
        43 => O::ActedUpon {
            record_id: any,
            act: "ran".into(),
        },
        44 => O::Admission {
            record_id: any,
            peer: "globex".into(),
            outcome: AdmissionOutcome::Quarantined,
            code: "x".into(),
            closes: None,
            at: 0,
        },
        45 => O::Decline {
            reason: DeclineReason::Unspecified,
            text: String::new(),
        },
        46 => O::Counter {
            terms: Some(t("same")),
        },
        47 => O::GateDecision {
            answer: if now % 3 == 0 {
                GateAnswer::Reject
            } else {
                GateAnswer::Accept
            },
            content_digest: Some(c.terms_version),
            participant: None,
            reason: String::new(),
        },
        48 => O::Observation(Box::new(Observation {
            execution: ExecutionReport::from_wire((now % 8) as i32),
            heartbeat_interval_ms: Some(50),
            checkpoint: if now % 2 == 0 {
                "ck".into()
            } else {
                String::new()
            },
            ..Observation::default()
        })),
        49 => O::StopRequest {
            mode: StopMode::from_wire((now % 3) as i32 + 1),
            reason: r(),
        },
        50 => O::StopResponse {
            answer: StopAnswer::from_wire((now % 3) as i32 + 1),
            reason: r(),
        },
        51 => O::ControlLease {
            holder: Some(Cast::x()),
            until: None,
        },
        52 => O::ResumeAfterStop { reason: r() },
        53 => O::HandBackControl {
            handoff_note: "note".into(),
        },
        54 => O::Recheck {
            outcome: RecheckOutcome::from_wire((now % 2) as i32 + 1),
            note: String::new(),
        },
        _ => O::Request(Box::new(basic_request())),
    }
}

fn check_view(c: &Commitment, now: i64, access: &Access) {
    let v = view(c, now, access);
    let states: Vec<State> = c.items.values().map(|i| i.state).collect();
    let mixed = states.iter().any(|s| *s != states[0]);
    assert_eq!(v.summary == "mixed", mixed);
    assert_eq!(v.state.is_none(), mixed);
    assert_eq!(v.terminal, states.iter().all(|s| s.is_terminal()));
    assert_eq!(v.category == Category::Closed, v.terminal);
    assert_eq!(v.records, c.history.len());
}

/// The commitments of a run, driven through `apply_with` (what the node calls) with one clock.
struct Fed {
    access: Access,
    now: i64,
    next: u64,
    dir: BTreeMap<String, Commitment>,
    /// Every applied record with the time it was applied at, and its effects.
    log: Vec<(Record, i64, Vec<Effect>)>,
}

/// Stores what an applied record derived: its commitment's new state and any reopening started.
fn absorb(dir: &mut BTreeMap<String, Commitment>, r: &Record, applied: &Applied) {
    if let Some(next) = &applied.next {
        dir.insert(r.commitment.clone(), next.clone());
    }
    for fx in &applied.effects {
        if let Effect::StartReopening { commitment, .. } = fx {
            dir.insert(commitment.id.clone(), (**commitment).clone());
        }
    }
}

impl Fed {
    fn new() -> Self {
        Fed {
            access: access(),
            now: T0,
            next: 1,
            dir: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    fn record(
        &mut self,
        commitment: &str,
        author: &Party,
        op: Operation,
        basis: Vec<RecordId>,
        items: Vec<String>,
    ) -> Record {
        self.next += 1;
        Record {
            id: rid(self.next),
            author: author.clone(),
            commitment: commitment.into(),
            basis,
            items,
            op,
        }
    }

    fn apply(&mut self, r: Record) -> Result<Applied, Rejection> {
        let applied = apply_with(&self.dir, &r, &self.access, self.now)?;
        absorb(&mut self.dir, &r, &applied);
        self.log.push((r, self.now, applied.effects.clone()));
        Ok(applied)
    }
}

/// What a run (or several) did: the step mix and the states reached.
#[derive(Debug, Default)]
struct Mix {
    runs: usize,
    /// Records authored by the steps (not the Work service's), and how many applied.
    authored: usize,
    applied: usize,
    /// Deliberately wrong steps, and how many of them applied anyway (any operation by anyone).
    wrong: usize,
    wrong_applied: usize,
    service: usize,
    commitments: usize,
    reopenings: usize,
    /// Seed state wire name -> runs that reached it (some item of some commitment in it).
    states: BTreeMap<&'static str, usize>,
    applied_ops: BTreeMap<&'static str, usize>,
    codes: BTreeMap<String, usize>,
}

impl Mix {
    fn add(&mut self, o: Mix) {
        self.runs += o.runs;
        self.authored += o.authored;
        self.applied += o.applied;
        self.wrong += o.wrong;
        self.wrong_applied += o.wrong_applied;
        self.service += o.service;
        self.commitments += o.commitments;
        self.reopenings += o.reopenings;
        for (k, v) in o.states {
            *self.states.entry(k).or_default() += v;
        }
        for (k, v) in o.applied_ops {
            *self.applied_ops.entry(k).or_default() += v;
        }
        for (k, v) in o.codes {
            *self.codes.entry(k).or_default() += v;
        }
    }
}

/// The oracles on one applied record `r` that do not come from the kernel.
fn check_applied(
    before: &BTreeMap<String, Commitment>,
    after: &BTreeMap<String, Commitment>,
    r: &Record,
) -> Result<(), TestCaseError> {
    let kind = r.op.wire_name();
    // A seed-terminal state never changes, whichever commitment the record is for.
    for (id, b) in before {
        for (item, bi) in &b.items {
            if seed_terminal(bi.state) {
                prop_assert_eq!(
                    after[id].items[item].state,
                    bi.state,
                    "{} by {}: terminal {}/{} left",
                    kind,
                    r.author,
                    id,
                    item
                );
            }
        }
    }
    let Some(b) = before.get(&r.commitment) else {
        return Ok(());
    };
    let a = &after[&r.commitment];
    // Once every item is terminal, only the after-terminal operations apply.
    if b.items.values().all(|i| seed_terminal(i.state)) {
        prop_assert!(
            AFTER_TERMINAL.contains(&kind),
            "{} by {} applied on closed {} ({:?})",
            kind,
            r.author,
            b.id,
            b.state()
        );
    }
    // The obligor changes only by the new obligor's delegate acceptance, or goes by an unclaim;
    // the obligee changes only by the new obligee's assign acceptance.
    if let Some(old) = &b.obligor {
        match &a.obligor {
            Some(new) if new != old => prop_assert!(
                matches!(r.op, Operation::DelegateAcceptance { .. }) && r.author == *new,
                "obligor {} -> {} by {} from {}",
                old,
                new,
                kind,
                r.author
            ),
            None => prop_assert_eq!(kind, "unclaim", "obligor {} went", old),
            _ => {}
        }
    }
    if a.obligee != b.obligee {
        prop_assert!(
            matches!(r.op, Operation::AssignAcceptance { .. }) && r.author == a.obligee,
            "obligee {} -> {} by {} from {}",
            b.obligee,
            a.obligee,
            kind,
            r.author
        );
    }
    // The seed's From and Result columns. (A promise the Work service writes for a claim is the
    // record the claim produced: it moves nothing.)
    let produced = matches!(r.op, Operation::Promise) && r.author == Cast::s();
    let Some((_, from, res)) = SEED_ROWS.iter().find(|(n, _, _)| *n == kind) else {
        return Ok(());
    };
    if produced {
        return Ok(());
    }
    let open: Vec<&String> = b
        .items
        .iter()
        .filter(|(_, i)| !seed_terminal(i.state))
        .map(|(k, _)| k)
        .collect();
    let acted: Vec<&String> = if !r.items.is_empty() {
        b.items.keys().filter(|k| r.items.contains(k)).collect()
    } else if open.is_empty() {
        b.items.keys().collect()
    } else {
        open
    };
    for (id, bi) in &b.items {
        let was = bi.state.wire_name();
        let now = a.items[id].state.wire_name();
        if !acted.contains(&id) {
            if !matches!(res, Res::Allow) {
                prop_assert_eq!(now, was, "{} moved item {:?} it does not act on", kind, id);
            }
            continue;
        }
        match from {
            From::States(s) => {
                prop_assert!(s.contains(&was), "{} applied from {} ({:?})", kind, was, id)
            }
            From::AnyOpen => prop_assert!(!seed_terminal(bi.state), "{} from {}", kind, was),
            From::Any => {}
        }
        let want = match res {
            Res::To(s) => Some(*s),
            Res::Stay => None,
            Res::Counter if was == "requested" => Some("countered"),
            Res::Counter => Some("requested"),
            Res::Allow => b.revoke.as_ref().and_then(|rv| allow_result(rv.kind)),
        };
        match (want, res) {
            // Allow acts on the revoke request's items: any item it moves goes to the result.
            (Some(w), Res::Allow) if now != was => prop_assert_eq!(now, w),
            (_, Res::Allow) => {}
            (Some(w), _) => prop_assert_eq!(now, w, "{} on {:?} from {}", kind, id, was),
            (None, _) => prop_assert_eq!(now, was, "{} changed {:?}", kind, id),
        }
    }
    Ok(())
}

/// One run: the commitments created in `forms` (`c-1`, `c-2`, …), then the steps, with the
/// invariants checked after each. Returns the mix.
fn run(forms: &[Form], steps: Vec<Step>, crit: AcceptanceCriterion) -> Result<Mix, TestCaseError> {
    let mut f = Fed::new();
    let mut mix = Mix {
        runs: 1,
        ..Mix::default()
    };
    let mut reached: BTreeSet<&'static str> = BTreeSet::new();
    let cast = cast();
    for (i, form) in forms.iter().enumerate() {
        f.now += 7;
        let (author, request) = creation(*form, crit);
        let r = f.record(
            &format!("c-{}", i + 1),
            &author,
            req(request),
            vec![],
            vec![],
        );
        let res = f.apply(r);
        prop_assert!(res.is_ok(), "{:?} request rejected: {:?}", form, res);
    }
    mix.commitments = forms.len();
    let note = |dir: &BTreeMap<String, Commitment>, reached: &mut BTreeSet<&'static str>| {
        for c in dir.values() {
            for i in c.items.values() {
                reached.insert(i.state.wire_name());
            }
        }
    };
    note(&f.dir, &mut reached);
    // Once every commitment is closed, a few late steps, then the run is over.
    let mut late = 0;
    for s in steps {
        let all_closed = f
            .dir
            .values()
            .all(|c| c.items.values().all(|i| seed_terminal(i.state)));
        if all_closed {
            late += 1;
            if late > 3 {
                break;
            }
        }
        f.now += i64::from(s.dt);
        let before = f.dir.clone();
        if s.kind < TICK {
            for id in before.keys() {
                for a in due_work(&f.dir[id], f.now) {
                    f.next += 1;
                    let r = common::service_record(a, rid(f.next));
                    let (kind, rb, b) = (r.op.wire_name(), r.clone(), f.dir.clone());
                    let res = f.apply(r);
                    prop_assert!(res.is_ok(), "due {} rejected: {:?}", kind, res);
                    mix.service += 1;
                    *mix.applied_ops.entry(kind).or_default() += 1;
                    check_applied(&b, &f.dir, &rb)?;
                }
            }
            for c in f.dir.values() {
                check_view(c, f.now, &f.access);
            }
            note(&f.dir, &mut reached);
            continue;
        }
        let ids: Vec<&String> = before.keys().collect();
        let open: Vec<&String> = before
            .iter()
            .filter(|(_, c)| c.items.values().any(|i| !seed_terminal(i.state)))
            .map(|(k, _)| k)
            .collect();
        // Mostly an open commitment; sometimes any (a closed one gets late attempts).
        let cid = if !open.is_empty() && s.target % 16 != 0 {
            open[s.target as usize % open.len()].clone()
        } else {
            ids[s.target as usize % ids.len()].clone()
        };
        let c = &before[&cid];
        let wrong = s.kind < TICK + WRONG;
        // The items: one state's group of open items (all open items, or one of them).
        let mut groups: BTreeMap<State, Vec<String>> = BTreeMap::new();
        for (k, i) in &c.items {
            if !seed_terminal(i.state) {
                groups.entry(i.state).or_default().push(k.clone());
            }
        }
        let group = groups.iter().nth(s.items as usize % groups.len().max(1));
        let st = group.map(|(st, _)| *st);
        let items: Vec<String> = match group {
            _ if !c.has_line_items() => vec![],
            Some(_) if groups.len() == 1 && s.items % 3 == 0 => vec![],
            Some((_, g)) if s.items % 2 == 0 => g.clone(),
            Some((_, g)) => vec![g[s.author as usize % g.len()].clone()],
            None => vec![],
        };
        let (target, author, op, basis, items, must_refuse) = if wrong {
            mix.wrong += 1;
            match s.pick % 8 {
                // A second request for a commitment that exists.
                0 => {
                    let form = FORMS[s.op as usize % FORMS.len()];
                    let (author, request) = creation(form, crit);
                    (
                        cid.clone(),
                        author,
                        req(request),
                        vec![],
                        vec![],
                        Some(RejectionCode::CommitmentExists),
                    )
                }
                // Anything from rogue/ursula, whose organisation Access does not list.
                1 => {
                    let basis = basis_pick(c, s.basis);
                    let mut op = op_for(s.op, c, &basis, f.now);
                    if matches!(op, Operation::Request(_)) {
                        op = Operation::Promise;
                    }
                    (
                        cid.clone(),
                        Cast::u(),
                        op,
                        basis,
                        items,
                        Some(RejectionCode::NotAuthorized),
                    )
                }
                // Any operation but a request or an admission on a commitment never requested.
                2 => {
                    let basis = basis_pick(c, s.basis);
                    let mut op = op_for(s.op, c, &basis, f.now);
                    if matches!(op, Operation::Request(_) | Operation::Admission { .. }) {
                        op = Operation::Promise;
                    }
                    (
                        "c-nowhere".to_string(),
                        cast[s.author as usize % cast.len()].clone(),
                        op,
                        basis,
                        vec![],
                        Some(RejectionCode::UnknownCommitment),
                    )
                }
                // Any operation by any party on any basis.
                _ => {
                    let basis = basis_pick(c, s.basis);
                    let op = op_for(s.op, c, &basis, f.now);
                    let author = cast[s.author as usize % cast.len()].clone();
                    let must = if matches!(op, Operation::Request(_)) {
                        Some(RejectionCode::CommitmentExists)
                    } else if author == Cast::u() {
                        Some(RejectionCode::NotAuthorized)
                    } else {
                        None
                    };
                    (cid.clone(), author, op, basis, items, must)
                }
            }
        } else {
            let m = menu(c, st);
            let total: u32 = m.iter().map(|(_, w)| w).sum();
            let mut roll = u32::from(s.pick) % total.max(1);
            let n = m
                .iter()
                .find(|(_, w)| {
                    let hit = roll < *w;
                    roll = roll.saturating_sub(*w);
                    hit
                })
                .map(|(n, _)| *n)
                .unwrap_or(44);
            let (authors, basis) = roles_for(n, c, st);
            let author = if s.role_author && !authors.is_empty() {
                authors[s.author as usize % authors.len()].clone()
            } else {
                cast[s.author as usize % cast.len()].clone()
            };
            let op = op_for(n, c, &basis, f.now);
            let must = (author == Cast::u()).then_some(RejectionCode::NotAuthorized);
            (cid.clone(), author, op, basis, items, must)
        };
        let kind = op.wire_name();
        let r = f.record(&target, &author, op, basis, items);
        let rb = r.clone();
        mix.authored += 1;
        match f.apply(r) {
            Ok(applied) => {
                mix.applied += 1;
                if wrong {
                    mix.wrong_applied += 1;
                }
                *mix.applied_ops.entry(kind).or_default() += 1;
                prop_assert!(
                    must_refuse.is_none(),
                    "{} by {} on {} applied, must be refused {:?}",
                    kind,
                    author,
                    target,
                    must_refuse
                );
                if applied
                    .effects
                    .iter()
                    .any(|fx| matches!(fx, Effect::StartReopening { .. }))
                {
                    mix.reopenings += 1;
                }
                // The seed's oracles first, then the kernel's own terminal flag.
                check_applied(&before, &f.dir, &rb)?;
                if let (Some(b), Some(a)) = (before.get(&target), f.dir.get(&target)) {
                    prop_assert_eq!(a.history.len(), b.history.len() + 1);
                    prop_assert_eq!(a.history.last(), Some(&rb.id));
                    for (id, item) in &b.items {
                        if item.state.is_terminal() {
                            prop_assert_eq!(
                                a.items[id].state,
                                item.state,
                                "terminal {} changed",
                                id
                            );
                        }
                    }
                }
            }
            Err(e) => {
                *mix.codes.entry(format!("{:?}", e.code)).or_default() += 1;
                prop_assert_eq!(&f.dir, &before, "a rejected {} changed the state", kind);
                if let Some(code) = must_refuse {
                    prop_assert_eq!(e.code, code, "{} by {}: {:?}", kind, author, e);
                }
            }
        }
        for c in f.dir.values() {
            check_view(c, f.now, &f.access);
        }
        note(&f.dir, &mut reached);
    }
    // Determinism: replay from scratch gives the same commitments and the same effects.
    let mut dir: BTreeMap<String, Commitment> = BTreeMap::new();
    for (r, at, fx) in &f.log {
        let applied = apply_with(&dir, r, &f.access, *at).expect("replay accepts");
        prop_assert_eq!(&applied.effects, fx);
        absorb(&mut dir, r, &applied);
    }
    prop_assert_eq!(&dir, &f.dir);
    for s in reached {
        mix.states.insert(s, 1);
    }
    Ok(mix)
}

fn forms() -> impl Strategy<Value = Vec<Form>> {
    proptest::collection::vec(0usize..FORMS.len(), 2..=4)
        .prop_map(|v| v.into_iter().map(|i| FORMS[i]).collect())
}

fn criterion() -> impl Strategy<Value = AcceptanceCriterion> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(requires_evidence, four_eyes, step_up)| AcceptanceCriterion {
            requires_evidence,
            four_eyes,
            step_up,
        },
    )
}

fn case() -> impl Strategy<Value = (Vec<Form>, Vec<Step>, AcceptanceCriterion)> {
    (
        forms(),
        proptest::collection::vec(step(), 1..90),
        criterion(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants((forms, steps, crit) in case()) {
        run(&forms, steps, crit)?;
    }
}

/// The mix over a fixed RNG seed (deterministic): most authored steps apply, a minority are
/// deliberately wrong, and every state of the seed's table is reached by some run.
#[test]
fn the_generator_reaches_every_state_and_mostly_applies() {
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[26; 32]),
    );
    let strategy = case();
    let mut mix = Mix::default();
    for _ in 0..256 {
        let (forms, steps, crit) = strategy.new_tree(&mut runner).unwrap().current();
        mix.add(run(&forms, steps, crit).unwrap());
    }
    eprintln!("{mix:#?}");
    let applied = mix.applied as f64 / mix.authored as f64;
    let wrong = mix.wrong as f64 / mix.authored as f64;
    eprintln!(
        "applied {:.3} of {} authored steps; wrong {:.3}; {} service records",
        applied, mix.authored, wrong, mix.service
    );
    assert!(applied >= 0.5, "only {applied:.3} of the steps applied");
    assert!((0.05..0.3).contains(&wrong), "wrong steps {wrong:.3}");
    assert_eq!(SEED_STATES.len(), 13, "the seed's table has 13 states");
    for (name, _) in SEED_STATES.iter() {
        assert!(
            mix.states.contains_key(name.as_str()),
            "no run reached {name}: {:?}",
            mix.states
        );
    }
    assert!(mix.reopenings > 0, "no reopening started");
}

/// The seed's state names are the kernel's wire names (the tables above are keyed by them).
#[test]
fn the_seed_states_are_the_kernel_wire_names() {
    for (name, _) in SEED_STATES.iter() {
        assert!(State::from_wire_name(name).is_some(), "{name}");
    }
}

/// The case proptest once saved (`properties.proptest-regressions` kept only its seed, which the
/// strategy has since changed under, so it no longer replays it): the steps it shrank to, by
/// the obligee on no basis on one commitment created the original way, run as they were.
#[test]
fn the_saved_regression_case_replays() {
    let step = |op, dt, tick: bool| Step {
        kind: if tick { 0 } else { TICK },
        target: 0,
        pick: 3,
        author: 0,
        role_author: false,
        items: 0,
        basis: 0,
        op,
        dt,
    };
    let steps = vec![
        step(0, 0, false),
        step(17, 85, false),
        step(12, 86, false),
        step(0, 46, false),
        step(0, 71, false),
        step(0, 21, false),
        step(0, 91, true),
    ];
    run(&[Form::Candidate], steps, AcceptanceCriterion::default()).unwrap();
}

/// Found by the obligor oracle above: C counters item b, then K (a queue candidate) promises
/// item a and becomes the obligor; the obligee accepts C's counter, and the obligor becomes C
/// without a delegate record (seed 000: the obligor changes only by delegate, "The old party
/// stays in place until acceptance"). The kernel now refuses the stale counter
/// (`stale_counter_digest`) and K stays the obligor.
#[test]
fn an_accepted_stale_counter_leaves_the_obligor() {
    let (author, request) = creation(Form::Candidate, AcceptanceCriterion::default());
    let mut w = World::new();
    w.ok(&author, req(request));
    let v2 = Terms {
        title: "v2".into(),
        ..w.c().terms.clone()
    };
    let counter = w.ok_with(
        &Cast::c(),
        Operation::Counter { terms: Some(v2) },
        &[],
        &["b"],
    );
    w.ok_with(&Cast::k(), Operation::Promise, &[], &["a"]);
    assert_eq!(w.c().obligor, Some(Cast::k()));
    let accept = Operation::AcceptCounter {
        counter_digest: Some(counter),
    };
    let refused = w
        .try_op(&Cast::o(), accept, &[counter], &["b"])
        .expect_err("the counter's author is no longer the one to become obligor");
    assert_eq!(refused.code, RejectionCode::StaleCounterDigest, "{refused}");
    assert_eq!(
        w.c().obligor,
        Some(Cast::k()),
        "the obligor changed without a delegate"
    );
}
