//! Whose move it is, Conditions and the summary category, the assignment axis and its
//! operations, Access authorities, existence checks (seed 000, "Whose move it is",
//! "Assignment", "Summary category").

mod common;

use accord_kernel::*;
use common::*;

use RejectionCode as RC;

// ---- whose move ----------------------------------------------------------------------------------

fn rows(w: &World) -> Vec<(MoveRow, Vec<Party>)> {
    w.view()
        .whose_move
        .into_iter()
        .map(|m| (m.row, m.parties))
        .collect()
}

#[test]
fn whose_move_rows() {
    let budgeted = |t: &str| Terms {
        budget: Some(Budget {
            amount: 10,
            unit: "h".into(),
        }),
        ..terms(t)
    };
    let (mut w, _) = world_with(Request {
        terms: budgeted("t"),
        ..pooled_request()
    });
    assert_eq!(
        rows(&w),
        vec![(MoveRow::Requested, vec![Cast::k(), Cast::c(), Cast::q()])]
    );
    w.ok(
        &Cast::c(),
        Operation::Counter {
            terms: Some(budgeted("t2")),
        },
    );
    assert_eq!(rows(&w), vec![(MoveRow::Countered, vec![Cast::o()])]);
    w.ok(
        &Cast::o(),
        Operation::Counter {
            terms: Some(budgeted("t3")),
        },
    );
    let cond = Condition {
        description: "deposit".into(),
        addressed_to: Some(Cast::w()),
        ..Condition::default()
    };
    let pc = w.ok(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond,
            deadline: Some(T0 + 10_000),
        },
    );
    assert_eq!(
        rows(&w),
        vec![(MoveRow::ConditionallyPromised, vec![Cast::w()])]
    );
    assert_eq!(w.view().category, Category::Waiting);
    w.err_with(
        &Cast::c(),
        Operation::SatisfyCondition,
        &[pc],
        &[],
        RC::WrongRole,
    );
    w.err_with(
        &Cast::w(),
        Operation::SatisfyCondition,
        &[],
        &[],
        RC::NoOpenCondition,
    );
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[pc], &[]);
    assert_eq!(rows(&w), vec![(MoveRow::Promised, vec![Cast::c()])]);
    w.ok(&Cast::c(), Operation::ReportConsumption { amount: 4 });
    w.ok(&Cast::e(), Operation::ReportConsumption { amount: 6 });
    assert!(w.view().budget_exhausted);
    assert_eq!(
        rows(&w),
        vec![
            (MoveRow::BudgetExhausted, vec![Cast::x()]),
            (MoveRow::Promised, vec![Cast::c()])
        ]
    );
    w.ok(&Cast::c(), state_op(&["r"]));
    assert_eq!(rows(&w)[1], (MoveRow::Stated, vec![Cast::a()]));
    w.ok(&Cast::a(), accept_op());
    assert!(rows(&w).is_empty());
}

#[test]
fn withdrawing_the_precondition_makes_the_promise_unconditional() {
    let (mut w, _) = world_with(basic_request());
    let cond = Condition {
        description: "deposit".into(),
        addressed_to: Some(Cast::w()),
        ..Condition::default()
    };
    let pc = w.ok(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond,
            deadline: Some(T0 + 10),
        },
    );
    w.err_with(
        &Cast::w(),
        Operation::WithdrawCondition,
        &[pc],
        &[],
        RC::WrongRole,
    );
    w.ok_with(&Cast::c(), Operation::WithdrawCondition, &[pc], &[]);
    assert_eq!(w.state(), Some(State::Promised));
    w.now = T0 + 100;
    assert!(due_work(w.c(), w.now).is_empty(), "no longer expirable");
}

#[test]
fn conditions_make_the_category_waiting() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    let cd = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "site access".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
        },
    );
    assert_eq!(w.view().category, Category::Waiting);
    w.ok_with(&Cast::o(), Operation::WithdrawCondition, &[cd], &[]);
    assert_eq!(w.view().category, Category::Ready);
    w.ok(
        &Cast::e(),
        Operation::ActedUpon {
            record_id: Some(cd),
            act: "started".into(),
        },
    );
    // acted_upon alone does not stand in for "running" (issue 11): an executor's claim does.
    assert_eq!(w.view().category, Category::Ready);
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(60_000)));
    assert_eq!(w.view().category, Category::Active);
}

// ---- assignment ----------------------------------------------------------------------------------

#[test]
fn claim_and_unclaim() {
    let (mut w, _) = world_with(pooled_request());
    assert_eq!(w.view().category, Category::Triage);
    w.err(&Cast::z(), Operation::Claim, RC::WrongRole);
    w.ok(&Cast::k(), Operation::Claim);
    assert_eq!(
        (w.state(), w.view().assignment),
        (Some(State::Promised), Assignment::Held)
    );
    assert_eq!(w.view().category, Category::Ready);
    w.err(
        &Cast::c(),
        Operation::Unclaim {
            reason: String::new(),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::k(),
        Operation::Unclaim {
            reason: "busy".into(),
        },
    );
    assert_eq!(
        (w.state(), w.view().assignment),
        (Some(State::Requested), Assignment::Pooled)
    );
    assert!(!w.view().terminal, "an unclaim is not a release");
    // A party who promised directly did not claim: it cannot unclaim.
    w.ok(&Cast::c(), Operation::Promise);
    w.err(
        &Cast::c(),
        Operation::Unclaim {
            reason: String::new(),
        },
        RC::WrongRole,
    );
    w.err(&Cast::k(), Operation::Claim, RC::InvalidState);
}

#[test]
fn forward_nominate_offer_reassign() {
    let (mut w, _) = world_with(pooled_request());
    w.err(&Cast::k(), Operation::Forward { to: None }, RC::WrongRole);
    w.err(
        &Cast::q(),
        Operation::Forward { to: None },
        RC::MissingField,
    );
    let q2 = Queue {
        name: "q2".into(),
        owner: Some(Cast::q()),
        candidates: vec![Cast::z()],
        ..Queue::default()
    };
    w.ok(&Cast::q(), Operation::Forward { to: Some(q2) });
    assert_eq!(w.view().forward_count, 1);
    assert_eq!(w.view().assignment, Assignment::Pooled);
    assert_eq!(w.state(), Some(State::Requested));
    w.err(&Cast::k(), Operation::Claim, RC::WrongRole);
    w.ok(
        &Cast::x(),
        Operation::Nominate {
            candidate: Some(Cast::n1()),
        },
    );
    w.ok(
        &Cast::o(),
        Operation::Nominate {
            candidate: Some(Cast::n2()),
        },
    );
    assert_eq!(w.view().nominees, vec![Cast::n1(), Cast::n2()]);
    w.err(
        &Cast::z(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::q(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
    );
    assert_eq!(w.view().assignment, Assignment::Offered);
    w.ok(
        &Cast::x(),
        Operation::Reassign {
            to: Some(Cast::n2()),
        },
    );
    assert_eq!(w.view().offered_to, Some(Cast::n2()));
    w.ok(&Cast::n2(), Operation::Promise);
    assert_eq!(w.c().obligor, Some(Cast::n2()));
    // Reassigning a held commitment opens an offer; the obligation moves only through delegate.
    let ra = w.ok(
        &Cast::q(),
        Operation::Reassign {
            to: Some(Cast::n1()),
        },
    );
    assert_eq!(w.c().obligor, Some(Cast::n2()));
    w.ok_with(
        &Cast::n1(),
        Operation::DelegateAcceptance { offer_id: Some(ra) },
        &[ra],
        &[],
    );
    assert_eq!(w.c().obligor, Some(Cast::n1()));
}

#[test]
fn failed_to_assign() {
    let mut r = pooled_request();
    r.queue.as_mut().unwrap().start_deadline = Some(T0 + 100);
    let (mut w, _) = world_with(r);
    assert_eq!(w.view().assignment, Assignment::Pooled);
    w.now = T0 + 100;
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    w.ok(&Cast::k(), Operation::Claim);
    assert_eq!(w.view().assignment, Assignment::Held);
    // No candidate at all.
    let (w, _) = world_with(Request {
        candidate: None,
        ..basic_request()
    });
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    let (w, _) = world_with(basic_request());
    assert_eq!(w.view().assignment, Assignment::Offered);
}

#[test]
fn queue_ownership_from_access() {
    let (mut w, _) = world_with(pooled_request());
    w.access = w
        .access
        .clone()
        .with_grant(Authority::QueueOwner { queue: "q".into() }, Cast::z());
    w.err(
        &Cast::q(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::z(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
    );
}

#[test]
fn principal_declares_obsolete() {
    let (mut w, _) = world_with(Request {
        principal: None,
        ..basic_request()
    });
    w.err(
        &Cast::pr(),
        Operation::DeclareObsolete {
            parent_ref: "aim".into(),
        },
        RC::WrongRole,
    );
    w.access = w
        .access
        .clone()
        .with_grant(Authority::Principal, Cast::pr());
    w.ok(
        &Cast::pr(),
        Operation::DeclareObsolete {
            parent_ref: "aim".into(),
        },
    );
    assert_eq!(w.state(), Some(State::Obsolete));
}

#[test]
fn existence_and_duplicates() {
    let (mut w, req_id) = world_with(basic_request());
    let r = w.record(&Cast::c(), Operation::Promise, &[], &[]);
    let dup = Record {
        id: req_id,
        ..r.clone()
    };
    assert_eq!(w.apply_record(dup).unwrap_err().code, RC::DuplicateRecord);
    let other = Record {
        commitment: "c-2".into(),
        ..r
    };
    assert_eq!(w.apply_record(other).unwrap_err().code, RC::WrongCommitment);
    let mut w2 = World::new();
    w2.err(
        &Cast::o(),
        req(Request {
            terms: terms(""),
            ..basic_request()
        }),
        RC::MissingField,
    );
    w2.err(&Cast::u(), req(basic_request()), RC::NotAuthorized);
    w2.err(
        &Cast::z(),
        req(Request {
            obligee: Some(Cast::o()),
            ..basic_request()
        }),
        RC::WrongRole,
    );
    w2.err(
        &Cast::o(),
        req(Request {
            terms: terms_items("t", &["a", "a"]),
            ..basic_request()
        }),
        RC::DuplicateItem,
    );
}

#[test]
fn derived_types_implement_serde() {
    // The node caches projections and loads Access from config: the derived types must be
    // serde types (the kernel has no serializer of its own to round-trip with).
    fn assert_serde<T: serde::Serialize + serde::de::DeserializeOwned>() {}
    assert_serde::<Commitment>();
    assert_serde::<View>();
    assert_serde::<Access>();
    assert_serde::<Record>();
    assert_serde::<Effect>();
}
