//! Every operation from every state by every role, checked against seed 000's tables written
//! out once more, independently of the kernel's tables, as one expectation table.
//!
//! The fixture is a commitment forced into each of the 13 states, carrying every context an
//! operation needs (a current counter, open delegate/assign offers, a reject to dispute, an
//! open defer, an open revoke of the right kind, open conditions, a due validity statement, an
//! expired lease, a statement past its implicit acceptance window), so that an allowed
//! operation succeeds and a refused one is refused by state or by role.

mod common;

use accord_kernel::commitment::{
    ClaimState, CounterVersion, Deferral, HandoverOffer, OpenCondition, OpenRevoke, Statement,
    Validity,
};
use accord_kernel::rules::{self, RuleKey};
use accord_kernel::*;
use common::*;

use Role as R;

/// (operation, from-states, roles, result) — seed 000 "Operations", "Revoke requests",
/// "Records written by the Work service", "Assignment"; "-" = no state change.
const OPEN: &[&str] = &[
    "requested",
    "countered",
    "conditionally_promised",
    "promised",
    "stated",
];
const ANY: &[&str] = &[
    "requested",
    "countered",
    "conditionally_promised",
    "promised",
    "stated",
    "accepted",
    "declined",
    "withdrawn",
    "cancelled",
    "released",
    "obsolete",
    "expired",
    "closed_administratively",
];
const CANDIDATE_OR_OBLIGOR: &[Role] = &[R::CandidateObligor, R::Obligor];

#[rustfmt::skip]
const EXPECT: &[(&str, &[&str], &[Role], &str)] = &[
    ("promise", &["requested"], &[R::CandidateObligor], "promised"),
    ("promise_conditional", &["requested"], &[R::CandidateObligor], "conditionally_promised"),
    ("decline", &["requested"], &[R::CandidateObligor], "declined"),
    ("counter", &["requested"], &[R::CandidateObligor], "countered"),
    ("counter", &["countered"], &[R::Obligee], "requested"),
    ("accept_counter", &["countered"], &[R::Obligee], "promised"),
    ("state", &["promised"], &[R::Obligor], "stated"),
    ("accept", &["stated"], &[R::Acceptor, R::WorkService], "accepted"),
    ("reject", &["stated"], &[R::Acceptor], "promised"),
    ("cancel", &["conditionally_promised", "promised", "stated"], &[R::Obligor], "cancelled"),
    ("release", OPEN, &[R::Obligee], "released"),
    ("delegate(offer)", &["promised", "conditionally_promised"], &[R::Obligor], "-"),
    ("delegate(acceptance)", &["promised", "conditionally_promised"], &[R::DelegateTarget], "-"),
    ("assign(offer)", OPEN, &[R::Obligee], "-"),
    ("assign(acceptance)", OPEN, &[R::AssignTarget], "-"),
    ("dispute", ANY, &[R::Obligor], "-"),
    ("defer", &["requested", "countered", "conditionally_promised", "promised"], &[R::Obligee, R::Obligor], "-"),
    ("resume", OPEN, &[R::Obligee, R::Obligor, R::WorkService], "-"),
    ("revoke_request", OPEN, &[R::Obligee], "-"),
    ("revoke_promise", &["conditionally_promised", "promised"], &[R::Obligor], "-"),
    ("revoke_statement", &["stated"], &[R::Obligor], "-"),
    ("revoke_acceptance", &["accepted"], &[R::Acceptor], "-"),
    ("allow(revoke_request)", OPEN, CANDIDATE_OR_OBLIGOR, "withdrawn"),
    ("refuse(revoke_request)", OPEN, CANDIDATE_OR_OBLIGOR, "-"),
    ("allow(revoke_promise)", &["conditionally_promised", "promised"], &[R::Obligee], "withdrawn"),
    ("refuse(revoke_promise)", &["conditionally_promised", "promised"], &[R::Obligee], "-"),
    ("allow(revoke_statement)", &["stated"], &[R::Acceptor], "promised"),
    ("refuse(revoke_statement)", &["stated"], &[R::Acceptor], "-"),
    ("allow(revoke_acceptance)", &["accepted"], &[R::Obligor], "-"),
    ("refuse(revoke_acceptance)", &["accepted"], &[R::Obligor], "-"),
    ("amend", OPEN, &[R::Obligee], "-"),
    ("notice", OPEN, &[R::Obligor], "-"),
    ("declare_obsolete", OPEN, &[R::Obligee, R::Principal], "obsolete"),
    ("expire", &["requested", "countered", "conditionally_promised"], &[R::WorkService], "expired"),
    ("administrative_close", OPEN, &[R::AdministrativeAuthority], "closed_administratively"),
    ("claim", &["requested"], &[R::QueueCandidate], "promised"),
    ("unclaim", &["promised"], &[R::ClaimingObligor, R::WorkService], "requested"),
    ("forward", OPEN, &[R::QueueOwner, R::ClaimingObligor], "-"),
    ("nominate", OPEN, &[R::QueueOwner, R::Obligee, R::Accountable], "-"),
    ("offer", &["requested"], &[R::QueueOwner, R::WorkService], "-"),
    ("reassign", &["requested", "countered", "conditionally_promised", "promised"], &[R::QueueOwner, R::Accountable], "-"),
    ("renew_lease", OPEN, &[R::Obligor], "-"),
    ("open_condition", OPEN, &[R::Obligee, R::Obligor], "-"),
    ("withdraw_condition", OPEN, &[R::ConditionOwner], "-"),
    ("satisfy_condition", OPEN, &[R::ConditionAddressee], "-"),
    ("withdraw_condition(precondition)", &["conditionally_promised"], &[R::ConditionOwner], "promised"),
    ("satisfy_condition(precondition)", &["conditionally_promised"], &[R::ConditionAddressee], "promised"),
    ("report_consumption", OPEN, &[R::Executor], "-"),
    ("acted_upon", OPEN, &[R::Executor], "-"),
    ("admission", ANY, &[R::WorkService], "-"),
];

/// The seed's closed list of operations (and the assignment operations), by wire name.
const SEED_OPERATIONS: &[&str] = &[
    "promise",
    "promise_conditional",
    "decline",
    "counter",
    "accept_counter",
    "state",
    "accept",
    "reject",
    "cancel",
    "release",
    "delegate",
    "assign",
    "dispute",
    "defer",
    "resume",
    "revoke_request",
    "revoke_promise",
    "revoke_statement",
    "revoke_acceptance",
    "allow",
    "refuse",
    "amend",
    "notice",
    "declare_obsolete",
    "expire",
    "administrative_close",
    "claim",
    "unclaim",
    "forward",
    "nominate",
    "offer",
    "reassign",
    "renew_lease",
];

/// Who holds which role in the forced fixture (the test's own model).
fn cast(state: State) -> Vec<(Party, Vec<Role>)> {
    let pre = matches!(state, State::Requested | State::Countered);
    vec![
        (Cast::o(), vec![R::Obligee]),
        (Cast::o2(), vec![]),
        (
            Cast::c(),
            if pre {
                vec![R::CandidateObligor]
            } else {
                vec![
                    R::Obligor,
                    R::CandidateObligor,
                    R::ClaimingObligor,
                    R::Executor,
                ]
            },
        ),
        (Cast::e(), if pre { vec![] } else { vec![R::Executor] }),
        (
            Cast::k(),
            if pre {
                vec![R::CandidateObligor, R::QueueCandidate]
            } else {
                vec![R::QueueCandidate]
            },
        ),
        (Cast::q(), vec![R::QueueOwner]),
        (Cast::a(), vec![R::Acceptor]),
        (Cast::x(), vec![R::Accountable]),
        (Cast::pr(), vec![R::Principal]),
        (Cast::d(), vec![R::AdministrativeAuthority]),
        (Cast::s(), vec![R::WorkService]),
        (Cast::n1(), vec![R::DelegateTarget]),
        (Cast::n2(), vec![R::AssignTarget]),
        (Cast::y(), vec![R::ConditionOwner]),
        (Cast::w(), vec![R::ConditionAddressee]),
        (Cast::z(), vec![]),
        (Cast::u(), vec![]),
    ]
}

const NOW: i64 = T0 + 10_000;
const REQ: u64 = 1;
const COUNTER: u64 = 101;
const DELEGATE: u64 = 102;
const ASSIGN: u64 = 103;
const REJECT: u64 = 104;
const DEFER: u64 = 105;
const REVOKE: u64 = 106;
const COND: u64 = 107;
const PRECOND: u64 = 108;
const STATEMENT: u64 = 109;
const CLAIM: u64 = 110;
const OP: u64 = 500;

fn base() -> Commitment {
    let r = Record {
        id: rid(REQ),
        author: Cast::o(),
        commitment: "c-1".into(),
        basis: vec![],
        items: vec![],
        op: req(Request {
            candidate: Some(Cast::c()),
            queue: Some(Queue {
                name: "q".into(),
                owner: Some(Cast::q()),
                candidates: vec![Cast::k()],
                lease_ms: Some(1_000),
                return_to_pool_on_lease_end: true,
                start_deadline: None,
            }),
            valid_until: Some(T0 + 100),
            implicit_acceptance_window_ms: Some(50),
            ..basic_request()
        }),
    };
    apply(None, &r, &access(), T0).unwrap().0
}

/// The commitment in `state` with the context `key` needs.
fn fixture(state: State, key: RuleKey) -> Commitment {
    let mut c = base();
    let pre = matches!(state, State::Requested | State::Countered);
    let item = c.items.get_mut(WHOLE).unwrap();
    item.state = state;
    item.validity = Some(Validity {
        record: rid(REQ),
        until: T0 + 100,
    });
    item.statement = Some(Statement {
        record: rid(STATEMENT),
        by: Cast::c(),
        at: T0,
        refs: vec!["r".into()],
    });
    if !pre {
        c.obligor = Some(Cast::c());
        c.claim = Some(ClaimState {
            by: Cast::c(),
            record: rid(CLAIM),
            lease_until: Some(T0 + 1),
        });
    }
    c.counter = Some(CounterVersion {
        record: rid(COUNTER),
        by: Cast::c(),
        terms: terms("countered"),
    });
    c.delegate_offer = Some(HandoverOffer {
        record: rid(DELEGATE),
        by: Cast::c(),
        to: Cast::n1(),
        note: "n".into(),
    });
    c.assign_offer = Some(HandoverOffer {
        record: rid(ASSIGN),
        by: Cast::o(),
        to: Cast::n2(),
        note: String::new(),
    });
    c.rejects.push(rid(REJECT));
    c.conditions.push(OpenCondition {
        record: rid(COND),
        owner: Cast::y(),
        condition: Condition {
            description: "c".into(),
            addressed_to: Some(Cast::w()),
        },
        precondition_items: vec![],
    });
    c.conditions.push(OpenCondition {
        record: rid(PRECOND),
        owner: Cast::y(),
        condition: Condition {
            description: "p".into(),
            addressed_to: Some(Cast::w()),
        },
        precondition_items: vec![WHOLE.into()],
    });
    if key == RuleKey::Resume {
        c.deferral = Some(Deferral {
            record: rid(DEFER),
            by: Cast::o(),
            reason: "r".into(),
            return_at: Some(T0 + 1),
            return_event: None,
            at: T0,
        });
    }
    if let RuleKey::Allow(kind) | RuleKey::Refuse(kind) = key {
        c.revoke = Some(OpenRevoke {
            record: rid(REVOKE),
            kind,
            by: Cast::o(),
            reason: "r".into(),
            items: vec![WHOLE.into()],
            at: T0,
        });
    }
    c
}

fn op_for(key: RuleKey, author: &Party) -> (Operation, Vec<RecordId>) {
    use Operation as O;
    let r = || "because".to_string();
    let cond = Condition {
        description: "funds".into(),
        addressed_to: Some(Cast::w()),
    };
    let revoke = |kind: RevokeKind| match kind {
        RevokeKind::Request => O::RevokeRequest { reason: r() },
        RevokeKind::Promise => O::RevokePromise { reason: r() },
        RevokeKind::Statement => O::RevokeStatement { reason: r() },
        RevokeKind::Acceptance => O::RevokeAcceptance { reason: r() },
    };
    let to = |n: &str| Some(p("x", n));
    match key {
        RuleKey::Promise => (O::Promise, vec![]),
        RuleKey::PromiseConditional => (
            O::PromiseConditional {
                condition: cond,
                deadline: Some(NOW + 1_000),
            },
            vec![],
        ),
        RuleKey::Decline => (
            O::Decline {
                reason: DeclineReason::NoCapacity,
                text: r(),
            },
            vec![],
        ),
        RuleKey::Counter => (
            O::Counter {
                terms: Some(terms("countered again")),
            },
            vec![],
        ),
        RuleKey::AcceptCounter => (
            O::AcceptCounter {
                counter_digest: Some(rid(COUNTER)),
            },
            vec![],
        ),
        RuleKey::State => (state_op(&["delivery-1"]), vec![]),
        RuleKey::Accept => {
            let implicit = *author == Cast::s();
            let op = O::Accept {
                evidence_ref: "ev".into(),
                implicit,
                step_up: false,
            };
            (
                op,
                if implicit {
                    vec![rid(REQ), rid(STATEMENT)]
                } else {
                    vec![]
                },
            )
        }
        RuleKey::Reject => (O::Reject { reason: r() }, vec![]),
        RuleKey::Cancel => (
            O::Cancel {
                reason: CancelReason::Failed,
                text: r(),
            },
            vec![],
        ),
        RuleKey::Release => (
            O::Release {
                reason: String::new(),
            },
            vec![],
        ),
        RuleKey::DelegateOffer => (
            O::DelegateOffer {
                to: to("new"),
                handover_note: "notes".into(),
            },
            vec![],
        ),
        RuleKey::DelegateAcceptance => (
            O::DelegateAcceptance {
                offer_id: Some(rid(DELEGATE)),
            },
            vec![rid(DELEGATE)],
        ),
        RuleKey::AssignOffer => (O::AssignOffer { to: to("new") }, vec![]),
        RuleKey::AssignAcceptance => (
            O::AssignAcceptance {
                offer_id: Some(rid(ASSIGN)),
            },
            vec![rid(ASSIGN)],
        ),
        RuleKey::Dispute => (
            O::Dispute {
                disputed_record: Some(rid(REJECT)),
                reason: r(),
            },
            vec![],
        ),
        RuleKey::Defer => (
            O::Defer {
                reason: r(),
                return_at: None,
                return_event: String::new(),
            },
            vec![],
        ),
        RuleKey::Resume => (
            O::Resume {
                event: String::new(),
            },
            vec![rid(DEFER)],
        ),
        RuleKey::Revoke(kind) => (revoke(kind), vec![]),
        RuleKey::Allow(_) => (
            O::Allow {
                reason: String::new(),
                reopening_commitment_id: String::new(),
            },
            vec![rid(REVOKE)],
        ),
        RuleKey::Refuse(_) => (O::Refuse { reason: r() }, vec![rid(REVOKE)]),
        RuleKey::Amend => (
            O::Amend {
                supersedes: Some(rid(REQ)),
                terms: Some(terms("amended")),
            },
            vec![],
        ),
        RuleKey::Notice => (
            O::Notice {
                notice_type: NoticeType::AtRisk,
                text: r(),
            },
            vec![],
        ),
        RuleKey::DeclareObsolete => (
            O::DeclareObsolete {
                parent_ref: "aim-1".into(),
            },
            vec![],
        ),
        RuleKey::Expire => (O::Expire, vec![rid(REQ)]),
        RuleKey::AdministrativeClose => (O::AdministrativeClose { reason: r() }, vec![]),
        RuleKey::Claim => (O::Claim, vec![]),
        RuleKey::Unclaim => (
            O::Unclaim {
                reason: String::new(),
            },
            vec![rid(REQ)],
        ),
        RuleKey::Forward => (
            O::Forward {
                to: Some(Queue {
                    name: "q2".into(),
                    ..Queue::default()
                }),
            },
            vec![],
        ),
        RuleKey::Nominate => (
            O::Nominate {
                candidate: to("nominee"),
            },
            vec![],
        ),
        RuleKey::Offer => (O::Offer { to: to("offeree") }, vec![]),
        RuleKey::Reassign => (
            O::Reassign {
                to: to("reassignee"),
            },
            vec![],
        ),
        RuleKey::RenewLease => (O::RenewLease { lease_ms: None }, vec![]),
        RuleKey::OpenCondition => (O::OpenCondition { condition: cond }, vec![]),
        RuleKey::WithdrawCondition => (O::WithdrawCondition, vec![rid(COND)]),
        RuleKey::SatisfyCondition => (O::SatisfyCondition, vec![rid(COND)]),
        RuleKey::WithdrawPrecondition => (O::WithdrawCondition, vec![rid(PRECOND)]),
        RuleKey::SatisfyPrecondition => (O::SatisfyCondition, vec![rid(PRECOND)]),
        RuleKey::ReportConsumption => (O::ReportConsumption { amount: 5 }, vec![]),
        RuleKey::ActedUpon => (
            O::ActedUpon {
                record_id: Some(rid(REQ)),
                act: "ran".into(),
            },
            vec![],
        ),
        RuleKey::Admission => (
            O::Admission {
                record_id: Some(rid(REQ)),
                peer: "globex".into(),
                outcome: AdmissionOutcome::Admitted,
                code: String::new(),
                closes: None,
            },
            vec![],
        ),
    }
}

fn expected(
    key: &str,
    state: State,
    roles: &[Role],
    authorized: bool,
) -> Result<Option<State>, RejectionCode> {
    if !authorized {
        return Err(RejectionCode::NotAuthorized);
    }
    let rows: Vec<_> = EXPECT.iter().filter(|(k, _, _, _)| *k == key).collect();
    assert!(!rows.is_empty(), "no expectation for {key}");
    let Some((_, _, allowed, result)) = rows
        .iter()
        .find(|(_, from, _, _)| from.contains(&state.wire_name()))
    else {
        return Err(if state.is_terminal() {
            RejectionCode::TerminalState
        } else {
            RejectionCode::InvalidState
        });
    };
    if !roles.iter().any(|r| allowed.contains(r)) {
        return Err(RejectionCode::WrongRole);
    }
    Ok(if *result == "-" {
        None
    } else {
        Some(State::from_wire_name(result).unwrap())
    })
}

#[test]
fn expectation_table_covers_every_rule_and_every_seed_operation() {
    let names: Vec<String> = rules::keys().into_iter().map(|k| k.name()).collect();
    for (k, _, _, _) in EXPECT {
        assert!(names.iter().any(|n| n == k), "{k} is not a kernel rule");
    }
    for n in &names {
        assert!(
            EXPECT.iter().any(|(k, _, _, _)| k == n),
            "{n} has no expectation"
        );
    }
    for op in SEED_OPERATIONS {
        assert!(
            EXPECT.iter().any(
                |(k, _, _, _)| k.split('(').next() == Some(op) || k.contains(&format!("({op}"))
            ),
            "seed operation {op} is not covered"
        );
    }
}

#[test]
fn every_operation_from_every_state_by_every_role() {
    let access = access();
    let mut checked = 0;
    let mut allowed = 0;
    for key in rules::keys() {
        for state in State::ALL {
            for (party, roles) in cast(state) {
                let c = fixture(state, key);
                let (op, basis) = op_for(key, &party);
                let record = Record {
                    id: rid(OP),
                    author: party.clone(),
                    commitment: c.id.clone(),
                    basis,
                    items: vec![],
                    op,
                };
                let want = expected(&key.name(), state, &roles, access.acts_for(&party));
                let before = c.clone();
                let got = apply(Some(&c), &record, &access, NOW);
                let ctx = format!("{} from {state} by {party} {roles:?}", key.name());
                assert_eq!(c, before, "{ctx}: input changed");
                match (want, got) {
                    (Ok(result), Ok((next, _))) => {
                        let after = next.items[WHOLE].state;
                        assert_eq!(after, result.unwrap_or(state), "{ctx}");
                        assert_eq!(next.history.len(), c.history.len() + 1, "{ctx}");
                        assert_eq!(next.history.last(), Some(&rid(OP)), "{ctx}");
                        if state.is_terminal() {
                            assert_eq!(after, state, "{ctx}: terminal state changed");
                        }
                        allowed += 1;
                    }
                    (Err(code), Err(rej)) => assert_eq!(rej.code, code, "{ctx}: {rej}"),
                    (Ok(_), Err(rej)) => panic!("{ctx}: expected success, got {rej}"),
                    (Err(code), Ok(_)) => panic!("{ctx}: expected {code}, got success"),
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, rules::keys().len() * 13 * 17);
    assert!(allowed > 100, "only {allowed} allowed combinations");
}

#[test]
fn request_by_role_and_on_existing_commitments() {
    let access = access();
    let make = |author: Party| Record {
        id: rid(1),
        author,
        commitment: "c-new".into(),
        basis: vec![],
        items: vec![],
        op: req(Request {
            obligee: Some(Cast::o()),
            ..basic_request()
        }),
    };
    for (party, roles) in cast(State::Requested) {
        let got = apply(None, &make(party.clone()), &access, T0);
        if !access.acts_for(&party) {
            assert_eq!(got.unwrap_err().code, RejectionCode::NotAuthorized);
        } else if roles.contains(&R::Obligee) || party == Cast::o2() {
            let (c, fx) = got.unwrap();
            assert_eq!(c.state(), Some(State::Requested));
            assert_eq!(c.obligee, Cast::o());
            assert!(fx.is_empty());
        } else {
            assert_eq!(
                got.unwrap_err().code,
                RejectionCode::WrongRole,
                "request by {party}"
            );
        }
    }
    for state in State::ALL {
        let c = fixture(state, RuleKey::Promise);
        let mut r = make(Cast::o());
        r.commitment = c.id.clone();
        assert_eq!(
            apply(Some(&c), &r, &access, T0).unwrap_err().code,
            RejectionCode::CommitmentExists
        );
    }
    let mut other = make(Cast::o());
    other.op = Operation::Promise;
    assert_eq!(
        apply(None, &other, &access, T0).unwrap_err().code,
        RejectionCode::UnknownCommitment
    );
}

#[test]
fn kernel_tables_match_the_revoke_table() {
    use accord_kernel::revoke::{OnRefuse, REVOKES};
    for rule in REVOKES {
        let allow = rules::from_states(RuleKey::Allow(rule.kind));
        assert_eq!(allow, rule.from);
        assert_eq!(rules::from_states(RuleKey::Revoke(rule.kind)), rule.from);
        assert_eq!(
            rule.on_refuse == OnRefuse::DisputeMark,
            rule.kind == RevokeKind::Acceptance
        );
    }
}
