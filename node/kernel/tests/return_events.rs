//! A deferral's return event (seed 000, "Operations": defer — "Reason; optional return date or
//! return event"; "Records written by the Work service": resume — "A dated deferral reaches its
//! return date, or its return event occurs" — "Rests on the defer"; "Summary category": deferred
//! — "Changed by … the Work service party on return").
//!
//! The event set is the kernel's documented closed list (ARCHITECTURE.md, departures): the one
//! form `condition_closed:<record id in lowercase hex>`, written here by the test itself.

mod common;

use accord_kernel::*;
use common::*;

use RejectionCode as RC;

/// The documented wire form of "the Condition opened by `id` closes".
fn closes(id: &RecordId) -> String {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    format!("condition_closed:{hex}")
}

fn defer_on(return_at: Option<i64>, event: &str) -> Operation {
    Operation::Defer {
        reason: "waiting on the budget sign-off".into(),
        return_at,
        return_event: event.into(),
    }
}

fn resume(event: &str) -> Operation {
    Operation::Resume {
        event: event.into(),
    }
}

/// A promised commitment with a Condition addressed to W, opened by the obligee.
fn with_condition() -> (World, RecordId) {
    let mut w = promised();
    let cond = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "budget signed off".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
        },
    );
    (w, cond)
}

#[test]
fn the_event_resumes_exactly_once_resting_on_the_defer() {
    let (mut w, cond) = with_condition();
    let ev = closes(&cond);
    let d = w.ok(&Cast::o(), defer_on(None, &ev));
    // "deferred — An open defer".
    assert_eq!(w.view().category, Category::Deferred);
    w.now += 10_000_000;
    assert!(
        w.tick().is_empty(),
        "no date, and the event has not occurred"
    );
    // The Work service party "writes a record only on the basis of a prior Declaration": it may
    // not write a resume whose event has not occurred (a recorded rejection).
    w.err_with(&Cast::s(), resume(&ev), &[d], &[], RC::NotDue);
    assert!(w.c().deferral.is_some());
    // The addressed party satisfies the Condition: the return event occurs.
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[cond], &[]);
    let due = w.tick();
    assert_eq!(due.len(), 1, "one resume: {due:?}");
    assert_eq!(due[0].kind, ServiceKind::Resume);
    assert!(due[0].basis.contains(&d), "resume rests on the defer");
    assert_eq!(due[0].op, resume(&ev));
    assert!(w.c().deferral.is_none(), "the deferral closes");
    assert_ne!(w.view().category, Category::Deferred);
    assert!(w.tick().is_empty(), "a second pass writes nothing");
    assert_eq!(w.replay(), *w.c());
}

#[test]
fn withdrawing_the_condition_is_its_closing_too() {
    let (mut w, cond) = with_condition();
    let d = w.ok(&Cast::o(), defer_on(None, &closes(&cond)));
    w.ok_with(&Cast::o(), Operation::WithdrawCondition, &[cond], &[]);
    let due = w.tick();
    assert_eq!(due.len(), 1);
    assert!(due[0].basis.contains(&d));
    assert!(w.c().deferral.is_none());
}

#[test]
fn a_decided_gate_is_its_return_event() {
    let mut w = promised();
    let g = w.ok(
        &Cast::o(),
        gate(
            GateKind::Approval,
            &[Cast::w(), Cast::a()],
            rule(AggregationRule::All),
        ),
    );
    w.ok(&Cast::o(), defer_on(None, &closes(&g)));
    let v = w.c().terms_version;
    w.ok_with(&Cast::w(), answer(GateAnswer::Accept, v), &[g], &[]);
    assert!(
        w.tick().is_empty(),
        "All: one acceptance of two decides nothing"
    );
    // "All — Becomes unsatisfiable — Any rejection": the gate is decided.
    w.ok_with(&Cast::a(), answer(GateAnswer::Reject, v), &[g], &[]);
    let due = w.tick();
    assert!(due.iter().any(|a| a.kind == ServiceKind::Resume), "{due:?}");
    assert!(w.c().deferral.is_none());
}

#[test]
fn a_party_resume_before_the_event_closes_it_and_the_event_later_writes_nothing() {
    let (mut w, cond) = with_condition();
    let d = w.ok(&Cast::o(), defer_on(None, &closes(&cond)));
    // resume — "Obligee or obligor": at any time.
    w.ok_with(&Cast::c(), resume(""), &[d], &[]);
    assert!(w.c().deferral.is_none());
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[cond], &[]);
    assert!(w.tick().is_empty(), "the deferral is already closed");
    // Naming the event, a party's resume must name the deferral's own event.
    let d = w.ok(&Cast::o(), defer_on(None, ""));
    w.err_with(
        &Cast::o(),
        resume(&closes(&cond)),
        &[d],
        &[],
        RC::EventMismatch,
    );
}

#[test]
fn return_date_or_event_whichever_comes_first() {
    let (mut w, cond) = with_condition();
    let ev = closes(&cond);
    w.ok(&Cast::o(), defer_on(Some(w.now + 1_000), &ev));
    w.now += 10;
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[cond], &[]);
    let due = w.tick();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].op, resume(&ev));
    w.now += 10_000;
    assert!(w.tick().is_empty(), "the date then writes nothing");

    let (mut w, cond) = with_condition();
    w.ok(&Cast::o(), defer_on(Some(w.now + 1_000), &closes(&cond)));
    w.now += 1_000;
    let due = w.tick();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].op, resume(""), "a dated return");
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[cond], &[]);
    assert!(w.tick().is_empty());
}

#[test]
fn a_malformed_return_event_is_a_recorded_rejection_naming_the_field() {
    let (mut w, cond) = with_condition();
    let other = w.fresh_id();
    for (event, code) in [
        ("funds-arrived".to_string(), RC::Malformed),
        (closes(&cond).to_uppercase(), RC::Malformed),
        (format!("{}0", closes(&cond)), RC::Malformed),
        // Not a Condition of this commitment.
        (closes(&other), RC::NoOpenCondition),
    ] {
        let r = w.record(&Cast::o(), defer_on(None, &event), &[], &[]);
        let e = w.apply_record(r).expect_err(&event);
        assert_eq!(e.code, code, "{event}: {e}");
        assert!(e.detail.contains("return_event"), "{event}: {}", e.detail);
    }
    // A Condition that already closed never closes again.
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[cond], &[]);
    w.err(
        &Cast::o(),
        defer_on(None, &closes(&cond)),
        RC::NoOpenCondition,
    );
    assert!(w.c().deferral.is_none());
}
