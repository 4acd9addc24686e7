//! The random driver of the kernel's property tests (issue 30), shared by `properties.rs` (the
//! seed's operation oracles) and `category_transitions.rs` (the summary category's "Can move
//! to" column): 2–4 commitments, each created one of the ways seed 000 allows (a request to a
//! named candidate, a pooled request written on the obligee's behalf, a request offered to a
//! party out of a queue, a queue with no candidates that its owner must offer or forward; a
//! reopening started by an allowed revoke_acceptance), with different parties in the roles.
//! Most steps are an operation plausible in the commitment's current state (seed 000
//! "Operations", From column) by a party holding its role; a minority are deliberately wrong (a
//! party without the role, a second request, a party Access does not list, a record for a
//! commitment that does not exist, any operation by anyone), and some are Work service ticks.
//!
//! [`run`] drives one case and checks what holds of any run (a deliberately wrong step is
//! refused with its code, a rejected record changes nothing, every record `due_work` proposes is
//! accepted, replaying the applied records from scratch gives the same commitments and effects);
//! the test's own oracles see every clock move and every applied record through an
//! [`Observer`]. Declared by the tests that use it as `#[path = "common/generator.rs"] mod
//! generator;`, beside `mod common;` and `mod seed_tables;`.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use accord_kernel::*;
use proptest::prelude::*;

use crate::common::{self, *};
use crate::seed_tables;

/// The commitments of a run, by id.
pub type Dir = BTreeMap<String, Commitment>;

/// What a test checks as a run goes: every default does nothing.
pub trait Observer {
    /// The clock moved from `from` to `to` with no record (`dir` as it stands).
    fn time(&mut self, _dir: &Dir, _from: i64, _to: i64) -> Result<(), TestCaseError> {
        Ok(())
    }
    /// `r` applied at `now`: the commitments before and after it.
    fn applied(
        &mut self,
        _before: &Dir,
        _after: &Dir,
        _r: &Record,
        _now: i64,
    ) -> Result<(), TestCaseError> {
        Ok(())
    }
    /// After each step (a tick, or an authored record applied or refused).
    fn step_done(&mut self, _dir: &Dir, _now: i64) -> Result<(), TestCaseError> {
        Ok(())
    }
}

/// Checks nothing beyond what [`run`] itself checks.
pub struct NoOracle;
impl Observer for NoOracle {}

/// Seed 000, "Commitment" / "States": (wire name, terminal), read once from the seed's table as
/// `seed_tables/000_operations.txt` quotes it.
pub static SEED_STATES: std::sync::LazyLock<Vec<(String, bool)>> =
    std::sync::LazyLock::new(seed_tables::states);

/// Whether the seed's table marks `s` terminal ("A terminal state never changes").
pub fn seed_terminal(s: State) -> bool {
    SEED_STATES
        .iter()
        .any(|(name, terminal)| *terminal && name == s.wire_name())
}

/// How a commitment is created (seed 000 "Operations": request; "Assignment": pooled, offered).
#[derive(Clone, Copy, Debug)]
pub enum Form {
    /// The obligee requests of a named candidate that is also in a queue (the original case).
    Candidate,
    /// Someone on the obligee's behalf requests into a pool; whole item, acceptor = obligee.
    PooledOnBehalf,
    /// Another obligee offers to a party outside the queue it also pools in; three items.
    OfferedFromQueue,
    /// A queue with no candidates (failed_to_assign) that its owner must offer or forward.
    UnassignedQueue,
}

pub const FORMS: [Form; 4] = [
    Form::Candidate,
    Form::PooledOnBehalf,
    Form::OfferedFromQueue,
    Form::UnassignedQueue,
];

pub fn queue(
    name: &str,
    candidates: Vec<Party>,
    lease: Option<i64>,
    deadline: Option<i64>,
) -> Queue {
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
pub fn creation(form: Form, crit: AcceptanceCriterion) -> (Party, Request) {
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
pub const TICK: u8 = 8;
pub const WRONG: u8 = 12;

#[derive(Clone, Debug)]
pub struct Step {
    /// < TICK: a tick; < TICK + WRONG: a deliberately wrong step; otherwise a plausible one.
    pub kind: u8,
    /// Which commitment (mostly an open one).
    pub target: u8,
    /// Which plausible operation (weighted), or which kind of wrong step.
    pub pick: u16,
    pub author: u8,
    /// The author holds the operation's role (otherwise: any party of the cast).
    pub role_author: bool,
    pub items: u8,
    pub basis: u8,
    /// For a wrong step: any operation.
    pub op: u8,
    pub dt: u16,
}

pub fn step() -> impl Strategy<Value = Step> {
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
pub fn menu(c: &Commitment, st: Option<State>) -> Vec<(u8, u32)> {
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
pub fn org_of(p: &Party) -> Vec<Party> {
    cast()
        .into_iter()
        .filter(|x| x.organisation == p.organisation)
        .collect()
}

/// The parties holding the role operation `n` needs on `c` (items in state `st`), and its basis.
pub fn roles_for(n: u8, c: &Commitment, st: Option<State>) -> (Vec<Party>, Vec<RecordId>) {
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
        // The promise a claim produced: by the claimant (as the node writes it), or by the Work
        // service party (as ledgers before issue 29 hold it).
        55 => (
            c.claim
                .iter()
                .map(|x| x.by.clone())
                .chain([Cast::s()])
                .collect(),
            one(c.claim.as_ref().map(|x| x.record)),
        ),
        _ => (vec![], vec![]),
    }
}

pub fn cast() -> [Party; 17] {
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
pub fn basis_pick(c: &Commitment, pick: u8) -> Vec<RecordId> {
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

pub fn op_for(n: u8, c: &Commitment, basis: &[RecordId], now: i64) -> Operation {
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

/// The commitments of a run, driven through `apply_with` (what the node calls) with one clock.
pub struct Fed {
    pub access: Access,
    pub now: i64,
    pub next: u64,
    pub dir: BTreeMap<String, Commitment>,
    /// Every applied record with the time it was applied at, and its effects.
    pub log: Vec<(Record, i64, Vec<Effect>)>,
}

/// Stores what an applied record derived: its commitment's new state and any reopening started.
pub fn absorb(dir: &mut BTreeMap<String, Commitment>, r: &Record, applied: &Applied) {
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
    pub fn new() -> Self {
        Fed {
            access: access(),
            now: T0,
            next: 1,
            dir: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    pub fn record(
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

    pub fn apply(&mut self, r: Record) -> Result<Applied, Rejection> {
        let applied = apply_with(&self.dir, &r, &self.access, self.now)?;
        absorb(&mut self.dir, &r, &applied);
        self.log.push((r, self.now, applied.effects.clone()));
        Ok(applied)
    }
}

/// What a run (or several) did: the step mix and the states reached.
#[derive(Debug, Default)]
pub struct Mix {
    pub runs: usize,
    /// Records authored by the steps (not the Work service's), and how many applied.
    pub authored: usize,
    pub applied: usize,
    /// Deliberately wrong steps, and how many of them applied anyway (any operation by anyone).
    pub wrong: usize,
    pub wrong_applied: usize,
    pub service: usize,
    pub commitments: usize,
    pub reopenings: usize,
    /// Seed state wire name -> runs that reached it (some item of some commitment in it).
    pub states: BTreeMap<&'static str, usize>,
    pub applied_ops: BTreeMap<&'static str, usize>,
    pub codes: BTreeMap<String, usize>,
}

impl Mix {
    pub fn add(&mut self, o: Mix) {
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

/// One run: the commitments created in `forms` (`c-1`, `c-2`, …), then the steps, with the
/// invariants of any run checked after each and `obs` told of every clock move and applied
/// record. Returns the mix.
pub fn run(
    forms: &[Form],
    steps: Vec<Step>,
    crit: AcceptanceCriterion,
    obs: &mut impl Observer,
) -> Result<Mix, TestCaseError> {
    let mut f = Fed::new();
    let mut mix = Mix {
        runs: 1,
        ..Mix::default()
    };
    let mut reached: BTreeSet<&'static str> = BTreeSet::new();
    let cast = cast();
    for (i, form) in forms.iter().enumerate() {
        let was = f.now;
        f.now += 7;
        obs.time(&f.dir, was, f.now)?;
        let (author, request) = creation(*form, crit);
        let r = f.record(
            &format!("c-{}", i + 1),
            &author,
            req(request),
            vec![],
            vec![],
        );
        let (rb, before) = (r.clone(), f.dir.clone());
        let res = f.apply(r);
        prop_assert!(res.is_ok(), "{:?} request rejected: {:?}", form, res);
        obs.applied(&before, &f.dir, &rb, f.now)?;
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
        let was = f.now;
        f.now += i64::from(s.dt);
        obs.time(&f.dir, was, f.now)?;
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
                    obs.applied(&b, &f.dir, &rb, f.now)?;
                }
            }
            obs.step_done(&f.dir, f.now)?;
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
                if let (Some(b), Some(a)) = (before.get(&target), f.dir.get(&target)) {
                    prop_assert_eq!(a.history.len(), b.history.len() + 1);
                    prop_assert_eq!(a.history.last(), Some(&rb.id));
                }
                obs.applied(&before, &f.dir, &rb, f.now)?;
            }
            Err(e) => {
                *mix.codes.entry(format!("{:?}", e.code)).or_default() += 1;
                prop_assert_eq!(&f.dir, &before, "a rejected {} changed the state", kind);
                if let Some(code) = must_refuse {
                    prop_assert_eq!(e.code, code, "{} by {}: {:?}", kind, author, e);
                }
            }
        }
        obs.step_done(&f.dir, f.now)?;
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

pub fn forms() -> impl Strategy<Value = Vec<Form>> {
    proptest::collection::vec(0usize..FORMS.len(), 2..=4)
        .prop_map(|v| v.into_iter().map(|i| FORMS[i]).collect())
}

pub fn criterion() -> impl Strategy<Value = AcceptanceCriterion> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(requires_evidence, four_eyes, step_up)| AcceptanceCriterion {
            requires_evidence,
            four_eyes,
            step_up,
        },
    )
}

pub fn case() -> impl Strategy<Value = (Vec<Form>, Vec<Step>, AcceptanceCriterion)> {
    (
        forms(),
        proptest::collection::vec(step(), 1..90),
        criterion(),
    )
}

/// `n` cases drawn from [`case`] over a fixed RNG seed `seed` (deterministic: the mix tests).
pub fn fixed_cases(seed: u8, n: usize) -> Vec<(Vec<Form>, Vec<Step>, AcceptanceCriterion)> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    );
    let strategy = case();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}
