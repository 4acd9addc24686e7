//! Property tests over random operation sequences (random authors, operations, items, basis and
//! clock advances, with Work service ticks): terminal states never change; a rejected operation
//! leaves the state unchanged; every record `due_work` proposes is accepted; replaying the
//! applied records from scratch gives the same state and the same effects; the view is
//! consistent with the state.

mod common;

use accord_kernel::*;
use common::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Step {
    author: usize,
    /// Pick a plausible author and basis for the operation (otherwise: any party, any basis).
    plausible: bool,
    op: u8,
    items: u8,
    basis: u8,
    dt: u16,
    tick: bool,
}

/// Operations drawn more often: the non-terminal ones (terminal ones end a run quickly).
const COMMON: &[u8] = &[
    0, 1, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
    32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 47, 48, 49, 50, 51, 52, 53, 54,
];

fn step() -> impl Strategy<Value = Step> {
    (
        0usize..17,
        proptest::bool::weighted(0.85),
        0u8..220,
        0u8..4,
        0u8..16,
        0u16..80,
        proptest::bool::weighted(0.12),
    )
        .prop_map(|(author, plausible, op, items, basis, dt, tick)| Step {
            author,
            plausible,
            op: if op < 56 {
                op
            } else {
                COMMON[(op as usize - 56) % COMMON.len()]
            },
            items,
            basis,
            dt,
            tick,
        })
}

/// A plausible author and basis for operation `n` on `c`.
fn plausible(n: u8, c: &Commitment) -> (Vec<Party>, Vec<RecordId>) {
    let obligor = c.obligor.clone().unwrap_or_else(Cast::c);
    let one = |id: Option<RecordId>| id.into_iter().collect::<Vec<_>>();
    let revoke_side = c
        .revoke
        .as_ref()
        .map(|rv| accord_kernel::revoke::other_side(c, rv.kind))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![Cast::o()]);
    let a = c.items.values().find(|i| !i.state.is_terminal());
    match n {
        0 | 1 | 2 | 32 => (vec![Cast::c(), Cast::k()], vec![]),
        3 => (vec![Cast::c(), Cast::o()], vec![]),
        4 => (vec![Cast::o()], one(c.counter.as_ref().map(|x| x.record))),
        5 | 10 | 12 | 22 | 23 | 28 | 38 => (vec![obligor], vec![]),
        6 | 7 | 9 | 24 => (vec![Cast::a()], vec![]),
        8 => {
            let st = a.and_then(|i| i.statement.as_ref()).map(|s| s.record);
            (
                vec![Cast::s()],
                [Some(c.origin), st].into_iter().flatten().collect(),
            )
        }
        11 | 14 | 21 | 27 => (vec![Cast::o()], one(Some(c.terms_version))),
        13 => (
            vec![Cast::n1(), Cast::k()],
            one(c.delegate_offer.as_ref().map(|x| x.record)),
        ),
        15 => (
            vec![Cast::n2()],
            one(c.assign_offer.as_ref().map(|x| x.record)),
        ),
        16 => (
            vec![obligor],
            one(c
                .revoke
                .as_ref()
                .map(|x| x.record)
                .or(c.rejects.last().copied())),
        ),
        17 | 18 => (vec![Cast::o(), obligor], vec![]),
        19 | 20 => (
            vec![Cast::o(), obligor, Cast::s()],
            one(c.deferral.as_ref().map(|x| x.record)),
        ),
        25 | 26 => (revoke_side, one(c.revoke.as_ref().map(|x| x.record))),
        29 => (vec![Cast::o(), Cast::pr()], vec![]),
        30 => (
            vec![Cast::s()],
            one(a.and_then(|i| i.validity).map(|v| v.record)),
        ),
        31 => (vec![Cast::d()], vec![]),
        33 => (
            vec![obligor, Cast::s()],
            one(c.queue.as_ref().map(|q| q.declared_by)),
        ),
        34 | 36 | 37 => (vec![Cast::q()], vec![]),
        35 => (vec![Cast::q(), Cast::o(), Cast::x()], vec![]),
        39 => (vec![Cast::o(), obligor], vec![]),
        40 => {
            let oc = c.conditions.first();
            (
                oc.map(|x| vec![x.owner.clone()]).unwrap_or_default(),
                one(oc.map(|x| x.record)),
            )
        }
        41 => (vec![Cast::w()], one(c.conditions.last().map(|x| x.record))),
        42 | 43 => (vec![Cast::e(), obligor], one(c.history.last().copied())),
        44 => (vec![Cast::s()], one(c.history.first().copied())),
        47 => {
            let g = c.conditions.iter().find(|x| !x.is_precondition());
            (
                g.map(|x| x.condition.participant_list())
                    .unwrap_or_default(),
                one(g.map(|x| x.record)),
            )
        }
        48 => (vec![Cast::e(), obligor], vec![]),
        49 => (vec![Cast::x(), Cast::o()], vec![]),
        50 => (
            vec![Cast::e(), obligor],
            one(c.stop.as_ref().map(|x| x.record)),
        ),
        51 | 52 => (
            vec![Cast::x(), Cast::o()],
            one(c.stop.as_ref().map(|x| x.record)),
        ),
        53 => (
            c.handover.iter().map(|h| h.holder.clone()).collect(),
            one(c.handover.as_ref().map(|h| h.lease)),
        ),
        54 => (vec![Cast::x(), obligor], vec![]),
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
    let a = c.items.get("a");
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
    match n {
        0 => O::Promise,
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
            to: Some(Cast::n1()),
            handover_note: r(),
        },
        13 => O::DelegateAcceptance { offer_id: any },
        14 => O::AssignOffer {
            to: Some(Cast::n2()),
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
        18 => O::Defer {
            reason: r(),
            return_at: None,
            return_event: "ev".into(),
        },
        19 => O::Resume {
            event: String::new(),
        },
        20 => O::Resume { event: "ev".into() },
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
            }),
        },
        35 => O::Nominate {
            candidate: Some(Cast::z()),
        },
        36 => O::Offer {
            to: Some(Cast::c()),
        },
        37 => O::Reassign {
            to: Some(Cast::k()),
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

fn request(crit: AcceptanceCriterion) -> Request {
    Request {
        candidate: Some(Cast::c()),
        queue: Some(Queue {
            name: "q".into(),
            owner: Some(Cast::q()),
            candidates: vec![Cast::k(), Cast::c()],
            lease_ms: Some(150),
            return_to_pool_on_lease_end: true,
            start_deadline: Some(T0 + 2_000),
        }),
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
    }
}

fn check_view(c: &Commitment, now: i64) {
    let v = view(c, now);
    let states: Vec<State> = c.items.values().map(|i| i.state).collect();
    let mixed = states.iter().any(|s| *s != states[0]);
    assert_eq!(v.summary == "mixed", mixed);
    assert_eq!(v.state.is_none(), mixed);
    assert_eq!(v.terminal, states.iter().all(|s| s.is_terminal()));
    assert_eq!(v.category == Category::Closed, v.terminal);
    assert_eq!(v.records, c.history.len());
}

/// One run: the steps from the request on, with the invariants checked after each.
fn run(
    steps: Vec<Step>,
    crit: AcceptanceCriterion,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let mut w = World::new();
    w.ok(&Cast::o(), req(request(crit)));
    let mut effects_log: Vec<Vec<Effect>> = vec![Vec::new()];
    let cast = cast();
    for s in steps {
        w.now += i64::from(s.dt);
        if s.tick {
            let before = w.c().clone();
            for a in due_work(w.c(), w.now) {
                let id = w.fresh_id();
                let r = common::service_record(a, id);
                let kind = r.op.wire_name();
                let res = w.apply_record(r);
                prop_assert!(res.is_ok(), "due {} rejected: {:?}", kind, res);
                effects_log.push(w.effects.clone());
            }
            for (id, item) in &before.items {
                if item.state.is_terminal() {
                    prop_assert_eq!(w.c().items[id].state, item.state);
                }
            }
            continue;
        }
        let (authors, smart_basis) = plausible(s.op, w.c());
        let (author, basis) = if s.plausible && !authors.is_empty() {
            (authors[s.author % authors.len()].clone(), smart_basis)
        } else {
            (cast[s.author].clone(), basis_pick(w.c(), s.basis))
        };
        let op = op_for(s.op, w.c(), &basis, w.now);
        // What must be refused, known without the kernel: a second request for a commitment
        // that exists, and anything from rogue/ursula, whose organisation Access does not list.
        let must_refuse = if matches!(op, Operation::Request(_)) {
            Some(RejectionCode::CommitmentExists)
        } else if author == Cast::u() {
            Some(RejectionCode::NotAuthorized)
        } else {
            None
        };
        let items: &[&str] = match s.items {
            0 | 1 => &[],
            2 => &["a"],
            _ => &["b"],
        };
        let before = w.c().clone();
        let kind = op.wire_name();
        let r = w.record(&author, op, &basis, items);
        let rid = r.id;
        match w.apply_record(r) {
            Ok(_) => {
                prop_assert!(
                    must_refuse.is_none(),
                    "{} by {} applied, must be refused {:?}",
                    kind,
                    author,
                    must_refuse
                );
                effects_log.push(w.effects.clone());
                let after = w.c();
                prop_assert_eq!(after.history.len(), before.history.len() + 1);
                prop_assert_eq!(after.history.last(), Some(&rid));
                for (id, item) in &before.items {
                    if item.state.is_terminal() {
                        prop_assert_eq!(
                            after.items[id].state,
                            item.state,
                            "terminal {} changed",
                            id
                        );
                    }
                }
            }
            Err(e) => {
                prop_assert_eq!(w.c(), &before);
                if let Some(code) = must_refuse {
                    prop_assert_eq!(e.code, code, "{} by {}: {:?}", kind, author, e);
                }
            }
        }
        check_view(w.c(), w.now);
    }
    // Determinism: replay from scratch gives the same state and the same effects.
    let mut c: Option<Commitment> = None;
    let mut replayed_effects = Vec::new();
    for (r, at) in &w.log {
        let (next, fx) = apply(c.as_ref(), r, &w.access, *at).expect("replay accepts");
        c = Some(next);
        replayed_effects.push(fx);
    }
    prop_assert_eq!(c.as_ref(), w.c.as_ref());
    prop_assert_eq!(replayed_effects, effects_log);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants(
        steps in proptest::collection::vec(step(), 1..70),
        evidence in any::<bool>(),
        four_eyes in any::<bool>(),
        step_up in any::<bool>(),
    ) {
        run(steps, AcceptanceCriterion { requires_evidence: evidence, four_eyes, step_up })?;
    }
}

/// The case proptest once saved (`properties.proptest-regressions` kept only its seed, which the
/// strategy has since changed under, so it no longer replays it): the steps it shrank to, with
/// any party and any basis (the strategy had no plausible authors then), run as they were.
#[test]
fn the_saved_regression_case_replays() {
    let step = |op, dt, tick| Step {
        author: 0,
        plausible: false,
        op,
        items: 0,
        basis: 0,
        dt,
        tick,
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
    run(steps, AcceptanceCriterion::default()).unwrap();
}
