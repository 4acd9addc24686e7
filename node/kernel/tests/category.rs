//! Summary category and flags (seed 000, "Summary category", "Other state axes", "Assignment"),
//! table-driven. Every expectation below is written from the seed's text (quoted in each row),
//! or from the precedence line as `seed_tables/000_categories.txt` quotes it, never from the
//! kernel's constants; where the seed is silent the row names the choice argued in
//! ARCHITECTURE.md ("Seed 000's summary category"). Every transition against the "Can move to"
//! column: `category_transitions.rs`.

mod common;
mod seed_tables;

use accord_kernel::view::{item_category, item_rows};
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

/// Promised work whose executor (heartbeat 1 s) reported it running, then `report`.
fn begun_then(report: ExecutionReport) -> World {
    let mut w = promised();
    running_live(&mut w);
    w.ok(&Cast::e(), observe(report, Some(1_000)));
    w
}

fn allow_op() -> Operation {
    Operation::Allow {
        reason: String::new(),
        reopening_commitment_id: String::new(),
    }
}

type Scenario = fn() -> World;

/// What a row expects: one category, or two rows that both hold, of which the seed's
/// precedence line (read from the quoted seed) must pick the first.
#[derive(Clone, Copy, Debug)]
enum Want {
    Is(Cat),
    First(Cat, Cat),
}
use Want::{First, Is};

/// (seed text, scenario, expected). Rows come in the seed's precedence order.
#[rustfmt::skip]
const ROWS: &[(&str, Scenario, Want)] = &[
    ("closed: the commitment reached a terminal state", || {
        let mut w = promised();
        w.ok(&Cast::o(), Operation::Release { reason: String::new() });
        w
    }, Is(Cat::Closed)),
    ("closed > deferred: a released commitment whose defer was open", || {
        let mut w = promised();
        w.ok(&Cast::o(), defer_op());
        w.ok(&Cast::o(), Operation::Release { reason: String::new() });
        w
    }, Is(Cat::Closed)),
    ("deferred: an open defer", || {
        let mut w = promised();
        w.ok(&Cast::c(), defer_op());
        w
    }, Is(Cat::Deferred)),
    ("deferred > triage: a pooled request with an open defer", || {
        let (mut w, _) = world_with(pooled_request());
        w.ok(&Cast::o(), defer_op());
        w
    }, First(Cat::Deferred, Cat::Triage)),
    ("deferred > waiting: a promise with an open Condition and an open defer", || {
        let mut w = promised();
        open_condition(&mut w, &Cast::o());
        w.ok(&Cast::o(), defer_op());
        w
    }, First(Cat::Deferred, Cat::Waiting)),
    ("deferred holds the items it names: the stated item next to a deferred one is awaiting_acceptance", || {
        let mut r = basic_request();
        r.terms = terms_items("two", &["a", "b"]);
        let (mut w, _) = world_with(r);
        w.ok(&Cast::c(), Operation::Promise);
        w.ok_with(&Cast::c(), state_op(&["d"]), &[], &["b"]);
        w.ok_with(&Cast::o(), defer_op(), &[], &["a"]);
        assert_eq!(item_category(w.c(), "b", w.now), Cat::AwaitingAcceptance);
        w
    }, First(Cat::Deferred, Cat::AwaitingAcceptance)),
    ("triage: commitment in the request phase; assignment pooled", || {
        world_with(pooled_request()).0
    }, Is(Cat::Triage)),
    ("triage > awaiting_acceptance: a request phase item next to a stated one", || {
        let mut r = pooled_request();
        r.terms = terms_items("two", &["a", "b"]);
        let (mut w, _) = world_with(r);
        w.ok_with(&Cast::k(), Operation::Claim, &[], &["a"]);
        w.ok_with(&Cast::k(), state_op(&["d"]), &[], &["a"]);
        w
    }, First(Cat::Triage, Cat::AwaitingAcceptance)),
    ("triage (seed silent: ARCHITECTURE.md): request phase, assignment offered to a named candidate", || {
        world_with(basic_request()).0
    }, Is(Cat::Triage)),
    ("triage (seed silent: ARCHITECTURE.md): request phase, failed_to_assign", failed_to_assign, Is(Cat::Triage)),
    ("triage: countered is the request phase", || {
        let (mut w, _) = world_with(basic_request());
        w.ok(&Cast::c(), Operation::Counter { terms: Some(terms("v2")) });
        w
    }, Is(Cat::Triage)),
    ("awaiting_acceptance: stated as done", stated, Is(Cat::AwaitingAcceptance)),
    ("awaiting_acceptance > waiting: stated with an open Condition", || {
        let mut w = stated();
        open_condition(&mut w, &Cast::o());
        w
    }, First(Cat::AwaitingAcceptance, Cat::Waiting)),
    ("waiting: open Condition records", || {
        let mut w = promised();
        open_condition(&mut w, &Cast::o());
        w
    }, First(Cat::Waiting, Cat::Ready)),
    ("waiting: a conditional promise's precondition", || {
        let (mut w, _) = world_with(basic_request());
        w.ok(&Cast::c(), Operation::PromiseConditional {
            condition: Condition {
                description: "funds".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
            deadline: Some(T0 + 1_000),
        });
        w
    }, First(Cat::Waiting, Cat::Ready)),
    ("waiting > unknown: a wait with a stale executor is waiting plus stale", || {
        let mut w = promised();
        running_live(&mut w);
        open_condition(&mut w, &Cast::o());
        w.now += 5_000;
        w
    }, First(Cat::Waiting, Cat::Unknown)),
    ("unknown: liveness stale", || {
        let mut w = promised();
        running_live(&mut w);
        w.now += 1_001;
        w
    }, First(Cat::Unknown, Cat::Active)),
    ("unknown: liveness unknown (an executor that declared no heartbeat interval)", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::Running, None));
        w
    }, Is(Cat::Unknown)),
    ("unknown: an external state that cannot be mapped", || {
        let mut w = promised();
        running_live(&mut w);
        w.ok(&Cast::e(), Operation::Observation(Box::new(Observation {
            external_state: "SUSPENDED_BY_VENDOR".into(),
            ..Observation::default()
        })));
        w
    }, Is(Cat::Unknown)),
    ("unknown: a stop requested of running work and not yet confirmed (execution stays unknown)", || {
        let mut w = promised();
        running_live(&mut w);
        w.ok(&Cast::x(), Operation::StopRequest { mode: StopMode::Immediate, reason: "halt".into() });
        w
    }, Is(Cat::Unknown)),
    ("active: execution running; liveness live", || {
        let mut w = promised();
        running_live(&mut w);
        w
    }, Is(Cat::Active)),
    ("active (seed silent: ARCHITECTURE.md): begun work reported paused", || begun_then(ExecutionReport::Paused), Is(Cat::Active)),
    ("active (seed silent): begun work reported completed", || begun_then(ExecutionReport::Completed), Is(Cat::Active)),
    ("active (seed silent): begun work reported failed", || begun_then(ExecutionReport::Failed), Is(Cat::Active)),
    ("active (seed silent): begun work reported cancelled", || begun_then(ExecutionReport::Cancelled), Is(Cat::Active)),
    ("active (seed silent): a stop the executor confirmed", || {
        let mut w = promised();
        running_live(&mut w);
        w.ok(&Cast::x(), Operation::StopRequest { mode: StopMode::Immediate, reason: "halt".into() });
        w.ok(&Cast::e(), observe(ExecutionReport::Stopped, Some(1_000)));
        w
    }, Is(Cat::Active)),
    ("active, not ready: work that began stays begun when an executor then says not started", || begun_then(ExecutionReport::NotStarted), Is(Cat::Active)),
    ("active: awaiting_acceptance moves to active on rejection", || {
        let mut w = stated();
        w.ok(&Cast::a(), Operation::Reject { reason: "incomplete".into() });
        w
    }, Is(Cat::Active)),
    ("active on rejection, whatever an executor silent since said before it", || {
        let mut w = promised();
        running_live(&mut w);
        w.ok(&Cast::c(), state_op(&["delivery"]));
        w.now += 5_000;
        w.ok(&Cast::a(), Operation::Reject { reason: "incomplete".into() });
        w
    }, Is(Cat::Active)),
    ("active (seed silent: ARCHITECTURE.md): a statement withdrawn (revoke_statement allowed) goes back to work", || {
        let mut w = stated();
        let rv = w.ok(&Cast::c(), Operation::RevokeStatement { reason: "wrong build".into() });
        w.ok_with(&Cast::a(), allow_op(), &[rv], &[]);
        w
    }, Is(Cat::Active)),
    ("ready: promised; execution not started", promised, Is(Cat::Ready)),
    ("ready: promised; an executor reports not started", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::NotStarted, Some(1_000)));
        w
    }, Is(Cat::Ready)),
    ("ready plus stale (ARCHITECTURE.md): the executor that reported not started went silent", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::NotStarted, Some(1_000)));
        w.now += 1_001;
        assert!(w.view().flags.contains(&Flag::Stale));
        w
    }, Is(Cat::Ready)),
    ("ready: a stop requested before any start (not an executor report; ready is changed by starting)", || {
        let mut w = promised();
        w.ok(&Cast::x(), Operation::StopRequest { mode: StopMode::Immediate, reason: "halt".into() });
        w
    }, Is(Cat::Ready)),
    ("ready, not active: acted_upon alone does not stand in for running", || {
        let (mut w, req) = world_with(basic_request());
        w.ok(&Cast::c(), Operation::Promise);
        w.ok(&Cast::e(), Operation::ActedUpon { record_id: Some(req), act: "started".into() });
        w
    }, Is(Cat::Ready)),
    ("ready again after an unclaim and a new claim: the earlier attempt's claims do not count", || {
        let (mut w, _) = world_with(pooled_request());
        w.ok(&Cast::k(), Operation::Claim);
        w.ok(&Cast::k(), observe(ExecutionReport::Running, Some(100)));
        w.ok(&Cast::k(), Operation::Unclaim { reason: String::new() });
        w.ok(&Cast::c(), Operation::Claim);
        w
    }, Is(Cat::Ready)),
];

/// The seed's precedence line, read from the quoted seed.
fn seed_precedence() -> Vec<String> {
    seed_tables::precedence()
}

/// The first of `cats` in the seed's precedence line.
fn first_in_seed_order(cats: &[Cat]) -> Cat {
    let order = seed_precedence();
    *cats
        .iter()
        .min_by_key(|c| {
            order
                .iter()
                .position(|n| n == c.wire_name())
                .unwrap_or_else(|| panic!("{c:?} is not in the seed's line"))
        })
        .expect("some category")
}

#[test]
fn every_category_row_and_its_precedence() {
    for (text, scenario, want) in ROWS {
        let w = scenario();
        let c = w.c();
        let want = match *want {
            Is(cat) => cat,
            First(a, b) => {
                // Both rows hold (for some open item), and the seed's line picks the first.
                let rows: Vec<Cat> = c
                    .items
                    .iter()
                    .filter(|(_, i)| !i.state.is_terminal())
                    .flat_map(|(id, _)| item_rows(c, id, w.now))
                    .collect();
                assert!(
                    rows.contains(&a) && rows.contains(&b),
                    "{text}: {a:?} and {b:?} should both hold: {rows:?}"
                );
                first_in_seed_order(&[a, b])
            }
        };
        assert_eq!(w.view().category, want, "{text}");
        // The category is derived: a replay of the records gives the same one.
        assert_eq!(
            view(&w.replay(), w.now, &w.access).category,
            want,
            "{text} (replay)"
        );
    }
}

/// Every step of the seed's line (each category over the next) has a row above where both
/// hold, but two that never hold together for one item: a terminal item holds only closed, and
/// work has begun (active) or not (ready).
#[test]
fn every_step_of_the_precedence_line_is_exercised() {
    let never_together = [("closed", "deferred"), ("active", "ready")];
    let pairs: Vec<(&str, &str)> = ROWS
        .iter()
        .filter_map(|(_, _, w)| match w {
            First(a, b) => Some((a.wire_name(), b.wire_name())),
            Is(_) => None,
        })
        .collect();
    for step in seed_precedence().windows(2) {
        let step = (step[0].as_str(), step[1].as_str());
        assert!(
            pairs.contains(&step) != never_together.contains(&step),
            "{} over {}: a row where both hold, unless they never do",
            step.0,
            step.1
        );
    }
}

#[test]
fn the_kernels_order_is_the_seeds_precedence_line() {
    let names: Vec<&str> = Category::ALL.iter().map(|c| c.wire_name()).collect();
    assert_eq!(names, seed_precedence());
}

/// (seed text, scenario, flag expected, category it must leave unchanged: "Flags never change
/// the category").
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
    }, Flag::TakenOver, Cat::Active),
    ("stale: ready plus stale, an executor silent before the work began", || {
        let mut w = promised();
        w.ok(&Cast::e(), observe(ExecutionReport::NotStarted, Some(1_000)));
        w.now += 1_001;
        w
    }, Flag::Stale, Cat::Ready),
    ("stale: awaiting_acceptance plus stale", || {
        let mut w = promised();
        running_live(&mut w);
        w.ok(&Cast::c(), state_op(&["delivery"]));
        w.now += 1_001;
        w
    }, Flag::Stale, Cat::AwaitingAcceptance),
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
