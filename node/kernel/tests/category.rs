//! Summary category and flags (seed 000, "Summary category", "Other state axes", "Assignment"),
//! table-driven. Every expectation below is written from the seed's text (quoted in each row),
//! not from the kernel's constants; where the seed is silent the row says so.

mod common;

use accord_kernel::*;
use common::*;

use Category as Cat;

fn defer_op() -> Operation {
    Operation::Defer {
        reason: "later".into(),
        return_at: None,
        return_event: String::new(),
    }
}

fn open_condition(w: &mut World, author: &Party) -> RecordId {
    w.ok(
        author,
        Operation::OpenCondition {
            condition: Condition {
                description: "budget approval".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
        },
    )
}

fn running_live(w: &mut World) {
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
}

fn stated() -> World {
    let mut w = promised();
    w.ok(&Cast::c(), state_op(&["delivery"]));
    w
}

fn failed_to_assign() -> World {
    let mut r = pooled_request();
    r.queue.as_mut().unwrap().candidates.clear();
    world_with(r).0
}

type Scenario = fn() -> World;

/// (seed text, scenario, expected category). Rows come in the seed's precedence order; each
/// precedence row builds a commitment where two rows apply and the first must win.
#[rustfmt::skip]
const ROWS: &[(&str, Scenario, Cat)] = &[
    ("closed: the commitment reached a terminal state", || {
        let mut w = promised();
        w.ok(&Cast::o(), Operation::Release { reason: String::new() });
        w
    }, Cat::Closed),
    ("closed > deferred: a released commitment with an open defer", || {
        let mut w = promised();
        w.ok(&Cast::o(), defer_op());
        w.ok(&Cast::o(), Operation::Release { reason: String::new() });
        w
    }, Cat::Closed),
    ("deferred: an open defer", || {
        let mut w = promised();
        w.ok(&Cast::c(), defer_op());
        w
    }, Cat::Deferred),
    ("deferred > triage: a pooled request with an open defer", || {
        let (mut w, _) = world_with(pooled_request());
        w.ok(&Cast::o(), defer_op());
        w
    }, Cat::Deferred),
    ("triage: commitment in the request phase; assignment pooled", || {
        world_with(pooled_request()).0
    }, Cat::Triage),
    ("triage > awaiting_acceptance: a pooled request phase item next to a stated one", || {
        let mut r = pooled_request();
        r.terms = terms_items("two", &["a", "b"]);
        let (mut w, _) = world_with(r);
        w.ok_with(&Cast::k(), Operation::Claim, &[], &["a"]);
        w.ok_with(&Cast::k(), state_op(&["d"]), &[], &["a"]);
        // The claim made K the obligor of the whole commitment: its lease runs out, so the
        // commitment is pooled again while item b is still requested.
        w.now += 2_000;
        w
    }, Cat::Triage),
    ("not triage (seed silent, kernel: waiting): request phase, assignment offered", || {
        world_with(basic_request()).0
    }, Cat::Waiting),
    ("not triage (seed silent, kernel: waiting): request phase, failed_to_assign", failed_to_assign, Cat::Waiting),
    ("awaiting_acceptance: stated as done", stated, Cat::AwaitingAcceptance),
    ("awaiting_acceptance > waiting: stated with an open Condition", || {
        let mut w = stated();
        open_condition(&mut w, &Cast::o());
        w
    }, Cat::AwaitingAcceptance),
    ("waiting: open Condition records", || {
        let mut w = promised();
        open_condition(&mut w, &Cast::o());
        w
    }, Cat::Waiting),
    ("waiting > unknown: a wait with a stale executor is waiting plus stale", || {
        let mut w = promised();
        running_live(&mut w);
        open_condition(&mut w, &Cast::o());
        w.now += 5_000;
        w
    }, Cat::Waiting),
    ("unknown: liveness stale", || {
        let mut w = promised();
        running_live(&mut w);
        w.now += 1_001;
        w
    }, Cat::Unknown),
    ("unknown: liveness unknown (an executor that declared no heartbeat interval)", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::Running, None));
        w
    }, Cat::Unknown),
    ("unknown: an external state that cannot be mapped", || {
        let mut w = promised();
        running_live(&mut w);
        w.ok(&Cast::e(), Operation::Observation(Box::new(Observation {
            external_state: "SUSPENDED_BY_VENDOR".into(),
            ..Observation::default()
        })));
        w
    }, Cat::Unknown),
    ("active: execution running; liveness live", || {
        let mut w = promised();
        running_live(&mut w);
        w
    }, Cat::Active),
    ("active: awaiting_acceptance moves to active on rejection", || {
        let mut w = stated();
        w.ok(&Cast::a(), Operation::Reject { reason: "incomplete".into() });
        w
    }, Cat::Active),
    ("ready: promised; execution not started", promised, Cat::Ready),
    ("ready: promised; an executor reports not started", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::NotStarted, Some(1_000)));
        w
    }, Cat::Ready),
    ("ready, not active: acted_upon alone does not stand in for running", || {
        let (mut w, req) = world_with(basic_request());
        w.ok(&Cast::c(), Operation::Promise);
        w.ok(&Cast::e(), Operation::ActedUpon { record_id: Some(req), act: "started".into() });
        w
    }, Cat::Ready),
];

#[test]
fn every_category_row_and_its_precedence() {
    for (text, scenario, want) in ROWS {
        let w = scenario();
        assert_eq!(w.view().category, *want, "{text}");
        // The category is derived: a replay of the records gives the same one.
        assert_eq!(
            view(&w.replay(), w.now, &w.access).category,
            *want,
            "{text} (replay)"
        );
    }
}

#[test]
fn the_seed_order_is_the_precedence_order() {
    let names: Vec<&str> = Category::ALL.iter().map(|c| c.wire_name()).collect();
    assert_eq!(
        names,
        [
            "closed",
            "deferred",
            "triage",
            "awaiting_acceptance",
            "waiting",
            "unknown",
            "active",
            "ready"
        ]
    );
}

/// (seed text, scenario, flag expected, category it must leave unchanged).
#[rustfmt::skip]
const FLAGS: &[(&str, Scenario, Flag, Cat)] = &[
    ("overdue: a missed due date is a breach signal and does not change the state", || {
        let mut r = basic_request();
        r.terms.due = Some(T0 + 10);
        let (mut w, _) = world_with(r);
        w.ok(&Cast::c(), Operation::Promise);
        w.now = T0 + 11;
        w
    }, Flag::Overdue, Cat::Ready),
    ("at_risk: the obligor's notice", || {
        let mut w = promised();
        w.ok(&Cast::c(), Operation::Notice { notice_type: NoticeType::AtRisk, text: String::new() });
        w
    }, Flag::AtRisk, Cat::Ready),
    ("contradiction: two claims about the same work that cannot both hold", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
        w.ok(&Cast::c(), observe(ExecutionReport::Completed, Some(1_000)));
        w
    }, Flag::Contradiction, Cat::Unknown),
    ("stale: a wait with a stale executor is waiting plus stale", || {
        let mut w = promised();
        running_live(&mut w);
        open_condition(&mut w, &Cast::o());
        w.now += 1_001;
        w
    }, Flag::Stale, Cat::Waiting),
    ("taken_over: a person holds control", || {
        let mut w = promised();
        running_live(&mut w);
        let stop = w.ok(&Cast::x(), Operation::StopRequest { mode: StopMode::Pause, reason: String::new() });
        w.ok(&Cast::e(), observe(ExecutionReport::Paused, Some(1_000)));
        w.ok_with(&Cast::x(), Operation::ControlLease { holder: Some(Cast::x()), until: None }, &[stop], &[]);
        w
    }, Flag::TakenOver, Cat::Ready),
    ("unevidenced: stated, not verified is awaiting_acceptance plus unevidenced", stated, Flag::Unevidenced, Cat::AwaitingAcceptance),
];

#[test]
fn every_flag_and_flags_never_change_the_category() {
    for (text, scenario, flag, cat) in FLAGS {
        let w = scenario();
        let v = w.view();
        assert!(v.flags.contains(flag), "{text}: flags {:?}", v.flags);
        assert_eq!(v.category, *cat, "{text}");
    }
    // Without the condition that raises it, no flag is set.
    assert!(promised().view().flags.is_empty());
}

#[test]
fn held_means_the_lease_is_valid_if_one_is_defined() {
    let (mut w, _) = world_with(pooled_request());
    w.ok(&Cast::k(), Operation::Claim);
    assert_eq!(w.view().assignment, Assignment::Held);
    w.now = T0 + 999;
    assert_eq!(w.view().assignment, Assignment::Held);
    // The lease (1 000 ms) has ended: the obligor no longer holds it.
    w.now = T0 + 1_000;
    assert_ne!(w.view().assignment, Assignment::Held);
    assert_eq!(w.view().assignment, Assignment::Pooled);
    // Renewing the lease holds it again.
    w.ok(&Cast::k(), Operation::RenewLease { lease_ms: None });
    assert_eq!(w.view().assignment, Assignment::Held);
    // Without a lease, a known obligor holds it.
    let w = promised();
    assert_eq!(w.view().assignment, Assignment::Held);
}
