//! Records written by the Work service party, with a driven clock (seed 000, "Records written
//! by the Work service").

mod common;

use accord_kernel::*;
use common::*;

use RejectionCode as RC;

fn kinds(actions: &[ServiceAction]) -> Vec<ServiceKind> {
    actions.iter().map(|a| a.kind).collect()
}

#[test]
fn expire_when_the_validity_statement_ends_with_no_action() {
    let (mut w, req_id) = world_with(Request {
        valid_until: Some(T0 + 100),
        ..basic_request()
    });
    w.now = T0 + 99;
    assert!(due_work(w.c(), w.now).is_empty());
    w.err_with(&Cast::s(), Operation::Expire, &[req_id], &[], RC::NotDue);
    w.now = T0 + 100;
    let due = due_work(w.c(), w.now);
    assert_eq!(kinds(&due), vec![ServiceKind::Expire]);
    assert_eq!(due[0].basis, vec![req_id]);
    w.err_with(&Cast::o(), Operation::Expire, &[req_id], &[], RC::WrongRole);
    w.err_with(&Cast::s(), Operation::Expire, &[], &[], RC::MissingBasis);
    w.tick();
    assert_eq!(w.state(), Some(State::Expired));
    assert!(w.view().terminal);
    assert!(due_work(w.c(), w.now + 1_000).is_empty());
}

#[test]
fn no_expire_once_promised() {
    let (mut w, req_id) = world_with(Request {
        valid_until: Some(T0 + 100),
        ..basic_request()
    });
    w.ok(&Cast::c(), Operation::Promise);
    w.now = T0 + 1_000;
    assert!(due_work(w.c(), w.now).is_empty());
    w.err_with(
        &Cast::s(),
        Operation::Expire,
        &[req_id],
        &[],
        RC::InvalidState,
    );
}

#[test]
fn expire_a_countered_request() {
    let (mut w, req_id) = world_with(Request {
        valid_until: Some(T0 + 100),
        ..basic_request()
    });
    w.ok(
        &Cast::c(),
        Operation::Counter {
            terms: Some(terms("cheaper")),
        },
    );
    w.now = T0 + 100;
    let due = w.tick();
    assert_eq!(due[0].basis, vec![req_id]);
    assert_eq!(w.state(), Some(State::Expired));
}

#[test]
fn expire_a_conditional_promise_at_its_deadline() {
    let (mut w, req_id) = world_with(basic_request());
    let cond = Condition {
        description: "budget approved".into(),
        addressed_to: Some(Cast::w()),
        ..Condition::default()
    };
    let pc = w.ok(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond,
            deadline: Some(T0 + 500),
        },
    );
    w.now = T0 + 499;
    assert!(w.tick().is_empty());
    w.now = T0 + 500;
    w.err_with(
        &Cast::s(),
        Operation::Expire,
        &[req_id],
        &[],
        RC::MissingBasis,
    );
    let due = w.tick();
    assert_eq!(due[0].basis, vec![pc]);
    assert_eq!(w.state(), Some(State::Expired));
}

fn stated_world(request: Request) -> (World, RecordId, RecordId) {
    let (mut w, req_id) = world_with(Request {
        implicit_acceptance_window_ms: Some(50),
        ..request
    });
    w.ok(&Cast::c(), Operation::Promise);
    let st = w.ok(&Cast::c(), state_op(&["delivery-1"]));
    (w, req_id, st)
}

fn implicit() -> Operation {
    Operation::Accept {
        evidence_ref: String::new(),
        implicit: true,
        step_up: false,
    }
}

#[test]
fn implicit_accept_when_the_window_ends_without_an_answer() {
    let (mut w, req_id, st) = stated_world(basic_request());
    w.now = T0 + 49;
    assert!(w.tick().is_empty());
    w.err_with(&Cast::s(), implicit(), &[req_id, st], &[], RC::NotDue);
    w.now = T0 + 50;
    w.err_with(&Cast::a(), implicit(), &[req_id, st], &[], RC::WrongRole);
    w.err_with(&Cast::s(), implicit(), &[st], &[], RC::MissingBasis);
    w.err_with(&Cast::s(), accept_op(), &[req_id, st], &[], RC::WrongRole);
    let due = w.tick();
    assert_eq!(kinds(&due), vec![ServiceKind::ImplicitAccept]);
    assert_eq!(due[0].basis, vec![req_id, st]);
    assert!(matches!(
        due[0].op,
        Operation::Accept { implicit: true, .. }
    ));
    assert_eq!(w.state(), Some(State::Accepted));
    assert!(w.view().items[0].accepted_implicitly);
}

#[test]
fn no_implicit_accept_after_an_explicit_answer() {
    let (mut w, _, _) = stated_world(basic_request());
    w.ok(
        &Cast::a(),
        Operation::Reject {
            reason: "incomplete".into(),
        },
    );
    w.now = T0 + 1_000;
    assert!(w.tick().is_empty());
    assert_eq!(w.state(), Some(State::Promised));
}

#[test]
fn no_implicit_accept_without_terms() {
    let (mut w, req_id) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    let st = w.ok(&Cast::c(), state_op(&["d"]));
    w.now = T0 + 1_000_000;
    assert!(w.tick().is_empty());
    w.err_with(
        &Cast::s(),
        implicit(),
        &[req_id, st],
        &[],
        RC::NoImplicitAcceptance,
    );
}

#[test]
fn never_implicit_when_required_evidence_is_missing() {
    let crit = AcceptanceCriterion {
        requires_evidence: true,
        ..Default::default()
    };
    let (mut w, req_id, st) = stated_world(Request {
        acceptance: crit,
        ..basic_request()
    });
    w.now = T0 + 1_000;
    assert!(w.tick().is_empty());
    assert_eq!(
        w.view().items[0].implicit_acceptance_blocked,
        Some(ImplicitBlock::MissingEvidence)
    );
    assert!(w.view().flags.contains(&Flag::Unevidenced));
    w.err_with(
        &Cast::s(),
        implicit(),
        &[req_id, st],
        &[],
        RC::MissingEvidence,
    );
    // An explicit accept also needs the evidence reference.
    w.err(&Cast::a(), accept_op(), RC::MissingEvidence);
    // Once an executor act is recorded, the evidence exists and the window still counts.
    w.ok(
        &Cast::e(),
        Operation::ActedUpon {
            record_id: Some(st),
            act: "deployed".into(),
        },
    );
    assert!(!w.view().flags.contains(&Flag::Unevidenced));
    let due = w.tick();
    assert_eq!(kinds(&due), vec![ServiceKind::ImplicitAccept]);
    let Operation::Accept { evidence_ref, .. } = &due[0].op else {
        panic!()
    };
    assert!(!evidence_ref.is_empty());
    assert_eq!(w.state(), Some(State::Accepted));
}

#[test]
fn never_implicit_when_four_eyes_blocks() {
    // The acceptor is the obligor, who stated: four-eyes blocks the implicit accept.
    let crit = AcceptanceCriterion {
        four_eyes: true,
        ..Default::default()
    };
    let (mut w, req_id, st) = stated_world(Request {
        acceptance: crit,
        acceptor: Some(Cast::c()),
        ..basic_request()
    });
    w.now = T0 + 1_000;
    assert!(w.tick().is_empty());
    assert_eq!(
        w.view().items[0].implicit_acceptance_blocked,
        Some(ImplicitBlock::FourEyes)
    );
    w.err_with(&Cast::s(), implicit(), &[req_id, st], &[], RC::FourEyes);
    w.err(&Cast::c(), accept_op(), RC::FourEyes);
    // With a different acceptor, four-eyes holds and the implicit accept is written.
    let (mut w, _, _) = stated_world(Request {
        acceptance: crit,
        ..basic_request()
    });
    w.now = T0 + 1_000;
    assert_eq!(kinds(&w.tick()), vec![ServiceKind::ImplicitAccept]);
}

#[test]
fn never_implicit_when_step_up_is_required() {
    let crit = AcceptanceCriterion {
        step_up: true,
        ..Default::default()
    };
    let (mut w, req_id, st) = stated_world(Request {
        acceptance: crit,
        ..basic_request()
    });
    w.now = T0 + 1_000;
    assert!(w.tick().is_empty());
    assert_eq!(
        w.view().items[0].implicit_acceptance_blocked,
        Some(ImplicitBlock::StepUp)
    );
    w.err_with(
        &Cast::s(),
        implicit(),
        &[req_id, st],
        &[],
        RC::StepUpRequired,
    );
    w.err(&Cast::a(), accept_op(), RC::StepUpRequired);
    w.ok(
        &Cast::a(),
        Operation::Accept {
            evidence_ref: String::new(),
            implicit: false,
            step_up: true,
        },
    );
    assert_eq!(w.state(), Some(State::Accepted));
    assert!(!w.view().items[0].accepted_implicitly);
}

fn defer_op(return_at: Option<i64>, event: &str) -> Operation {
    Operation::Defer {
        reason: "waiting on budget".into(),
        return_at,
        return_event: event.into(),
    }
}

#[test]
fn resume_when_a_dated_deferral_reaches_its_return_date() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    assert_eq!(w.view().category, Category::Ready);
    let d = w.ok(&Cast::o(), defer_op(Some(T0 + 100), ""));
    assert_eq!(w.view().category, Category::Deferred);
    assert_eq!(w.state(), Some(State::Promised));
    w.now = T0 + 99;
    assert!(w.tick().is_empty());
    w.err_with(
        &Cast::s(),
        Operation::Resume {
            event: String::new(),
        },
        &[d],
        &[],
        RC::NotDue,
    );
    w.now = T0 + 100;
    w.err_with(
        &Cast::s(),
        Operation::Resume {
            event: String::new(),
        },
        &[],
        &[],
        RC::MissingBasis,
    );
    let due = w.tick();
    assert_eq!(kinds(&due), vec![ServiceKind::Resume]);
    assert_eq!(due[0].basis, vec![d]);
    assert_eq!(w.view().category, Category::Ready);
    assert!(w.c().deferral.is_none());
    w.err_with(
        &Cast::o(),
        Operation::Resume {
            event: String::new(),
        },
        &[d],
        &[],
        RC::NoOpenDefer,
    );
}

#[test]
fn resume_on_a_return_event() {
    let (mut w, _) = world_with(basic_request());
    let cond = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "funds arrived".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
        },
    );
    // The documented event form: the Condition opened by `cond` closes.
    let hex: String = cond.iter().map(|b| format!("{b:02x}")).collect();
    let ev = format!("condition_closed:{hex}");
    let d = w.ok(&Cast::o(), defer_op(None, &ev));
    w.err(&Cast::o(), defer_op(None, &ev), RC::AlreadyDeferred);
    w.now = T0 + 10_000_000;
    assert!(
        w.tick().is_empty(),
        "an event deferral is never resumed by date"
    );
    w.err_with(
        &Cast::s(),
        Operation::Resume {
            event: String::new(),
        },
        &[d],
        &[],
        RC::NotDue,
    );
    w.err_with(
        &Cast::o(),
        Operation::Resume {
            event: "other".into(),
        },
        &[d],
        &[],
        RC::EventMismatch,
    );
    w.err_with(
        &Cast::z(),
        Operation::Resume { event: ev.clone() },
        &[d],
        &[],
        RC::WrongRole,
    );
    w.err_with(
        &Cast::s(),
        Operation::Resume { event: ev.clone() },
        &[d],
        &[],
        RC::NotDue,
    );
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[cond], &[]);
    w.ok_with(
        &Cast::s(),
        Operation::Resume { event: ev.clone() },
        &[d],
        &[],
    );
    // The deferral closed: the category is derived again, and the request (offered to its
    // candidate) is in the request phase: triage (ARCHITECTURE.md, "Seed 000's summary
    // category").
    assert_eq!(w.view().category, Category::Triage);
    // A party may also resume without naming an event.
    let d = w.ok(&Cast::o(), defer_op(None, ""));
    w.ok_with(
        &Cast::o(),
        Operation::Resume {
            event: String::new(),
        },
        &[d],
        &[],
    );
}

#[test]
fn unclaim_when_the_lease_ends_and_the_queue_returns_to_the_pool() {
    let (mut w, req_id) = world_with(pooled_request());
    assert_eq!(w.view().assignment, Assignment::Pooled);
    w.ok(&Cast::k(), Operation::Claim);
    assert!(
        matches!(&w.effects[..], [Effect::PromiseProduced { obligor, .. }] if *obligor == Cast::k())
    );
    assert_eq!(w.state(), Some(State::Promised));
    assert_eq!(w.view().assignment, Assignment::Held);
    assert_eq!(w.view().lease_until, Some(T0 + 1_000));
    w.now = T0 + 999;
    assert!(w.tick().is_empty());
    w.err_with(
        &Cast::s(),
        Operation::Unclaim {
            reason: String::new(),
        },
        &[req_id],
        &[],
        RC::NotDue,
    );
    w.now = T0 + 1_000;
    w.err_with(
        &Cast::s(),
        Operation::Unclaim {
            reason: String::new(),
        },
        &[],
        &[],
        RC::MissingBasis,
    );
    let due = w.tick();
    assert_eq!(kinds(&due), vec![ServiceKind::Unclaim]);
    assert_eq!(due[0].basis, vec![req_id]);
    assert_eq!(w.state(), Some(State::Requested));
    assert_eq!(w.view().assignment, Assignment::Pooled);
    assert_eq!(w.c().obligor, None);
}

#[test]
fn renewed_lease_postpones_the_unclaim() {
    let (mut w, _) = world_with(pooled_request());
    w.ok(&Cast::k(), Operation::Claim);
    w.now = T0 + 900;
    w.ok(
        &Cast::k(),
        Operation::RenewLease {
            lease_ms: Some(500),
        },
    );
    w.now = T0 + 1_000;
    assert!(w.tick().is_empty());
    w.now = T0 + 1_400;
    assert_eq!(kinds(&w.tick()), vec![ServiceKind::Unclaim]);
}

#[test]
fn no_unclaim_when_the_queue_keeps_the_holder() {
    let mut r = pooled_request();
    r.queue.as_mut().unwrap().return_to_pool_on_lease_end = false;
    let (mut w, req_id) = world_with(r);
    w.ok(&Cast::k(), Operation::Claim);
    w.now = T0 + 5_000;
    assert!(w.tick().is_empty());
    w.err_with(
        &Cast::s(),
        Operation::Unclaim {
            reason: String::new(),
        },
        &[req_id],
        &[],
        RC::NotDue,
    );
    // The obligor stays, but an expired lease is not held (seed 000, "Assignment": held = "the
    // lease is valid if one is defined").
    assert_eq!(w.c().obligor, Some(Cast::k()));
    assert_ne!(w.view().assignment, Assignment::Held);
}

#[test]
fn service_records_replay_to_the_same_state() {
    let (mut w, _) = world_with(Request {
        implicit_acceptance_window_ms: Some(10),
        ..pooled_request()
    });
    w.ok(&Cast::k(), Operation::Claim);
    w.now += 1_000;
    w.tick();
    w.ok(&Cast::c(), Operation::Claim);
    w.ok(&Cast::c(), state_op(&["x"]));
    w.now += 10;
    w.tick();
    assert_eq!(w.state(), Some(State::Accepted));
    assert_eq!(w.replay(), *w.c());
}

/// Seed 000: "A terminal state never changes". The Work service party's produced promise
/// arrives after the claimant already cancelled: it is refused and the cancelled commitment
/// keeps its history (found by the property generator: `random_sequences_keep_the_invariants`
/// failed about one run in eight).
#[test]
fn a_produced_promise_after_a_cancel_is_refused() {
    let (mut w, _) = world_with(pooled_request());
    let claim = w.ok(&Cast::k(), Operation::Claim);
    w.ok(
        &Cast::k(),
        Operation::Cancel {
            reason: CancelReason::Abandoned,
            text: String::new(),
        },
    );
    assert_eq!(w.state(), Some(State::Cancelled));
    let before = w.c().clone();
    // Written by the claimant (the form the node writes) or by the Work service party (the form
    // ledgers before issue 29 hold).
    for by in [Cast::k(), Cast::s()] {
        let r = w.try_op(&by, Operation::Promise, &[claim], &[]);
        assert!(
            r.is_err(),
            "{by}: a promise on a cancelled commitment applied"
        );
        assert_eq!(w.c(), &before, "{by}: the terminal commitment changed");
    }
}

/// Seed 000, "Assignment": claim — "requested to promised; a promise record is produced"; the
/// Operations table: promise — "Who: Candidate obligor". The claimant is a party of the
/// candidate set: its promise is recorded by a `promise` it authors resting on the claim, which
/// changes no state; one per claim, and no other party's promise stands in for it.
#[test]
fn the_claimant_records_the_promise_its_claim_produced() {
    let (mut w, _) = world_with(pooled_request());
    let claim = w.ok(&Cast::k(), Operation::Claim);
    let before = w.c().clone();
    // Another candidate, the obligee: the commitment is promised, so theirs is no promise.
    for by in [Cast::c(), Cast::o()] {
        assert!(
            w.try_op(&by, Operation::Promise, &[claim], &[]).is_err(),
            "{by}'s promise on the claim applied"
        );
        assert_eq!(w.c(), &before);
    }
    let p = w.ok_with(&Cast::k(), Operation::Promise, &[claim], &[]);
    assert_eq!(w.state(), Some(State::Promised));
    assert_eq!(w.c().obligor, Some(Cast::k()));
    assert_eq!(w.c().history.last(), Some(&p));
    assert_eq!(w.c().history.len(), before.history.len() + 1);
    assert_eq!(
        w.c().items,
        before.items,
        "the produced promise changes no state"
    );
    // Once per claim, in either form.
    for by in [Cast::k(), Cast::s()] {
        assert!(w.try_op(&by, Operation::Promise, &[claim], &[]).is_err());
    }
    assert_eq!(w.replay(), *w.c());
}

/// The claimant unclaimed before its produced promise was ordered (it may come from another
/// organisation's node, issue 26): ordered after the unclaim it would read as a new promise and
/// make the claimant obligor again without their having promised. It is refused.
#[test]
fn a_produced_promise_resting_on_an_ended_claim_is_refused() {
    let (mut w, _) = world_with(pooled_request());
    let claim = w.ok(&Cast::k(), Operation::Claim);
    w.ok(
        &Cast::k(),
        Operation::Unclaim {
            reason: String::new(),
        },
    );
    assert_eq!(w.state(), Some(State::Requested));
    let before = w.c().clone();
    w.err_with(
        &Cast::k(),
        Operation::Promise,
        &[claim],
        &[],
        RC::InvalidState,
    );
    assert_eq!(w.c(), &before);
    assert_eq!(w.c().obligor, None);
    // A new claim produces its own promise; the old claim's still does not count.
    let again = w.ok(&Cast::k(), Operation::Claim);
    w.err_with(
        &Cast::k(),
        Operation::Promise,
        &[claim],
        &[],
        RC::InvalidState,
    );
    w.ok_with(&Cast::k(), Operation::Promise, &[again], &[]);
}

/// Ledgers written before issue 29 hold the produced promise authored by the Work service
/// party: it is still read, once per claim.
#[test]
fn the_work_service_partys_produced_promise_is_still_read() {
    let (mut w, _) = world_with(pooled_request());
    let claim = w.ok(&Cast::k(), Operation::Claim);
    let p = w.ok_with(&Cast::s(), Operation::Promise, &[claim], &[]);
    assert_eq!(w.c().history.last(), Some(&p));
    assert_eq!(w.state(), Some(State::Promised));
    assert!(
        w.try_op(&Cast::k(), Operation::Promise, &[claim], &[])
            .is_err()
    );
}
