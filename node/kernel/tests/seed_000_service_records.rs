//! Seed 000's "Records written by the Work service", read from the seed's text (issue 29 item
//! 4), transcribed in `seed_tables/000_service_records.txt`: each record is due from the
//! kernel's `due_work` exactly when its "Written when" says (not before, not without the
//! condition), rests on the declaration its "Rests on" names (the due record's basis names it),
//! applies when written by the Work service party S, and is refused with a missing or wrong
//! basis, before its time, or by another party. "Implicit acceptance is never written if …" is
//! checked for each of its three blocks: nothing is due, and a record written anyway is refused.

mod common;
mod seed_tables;

use accord_kernel::*;
use common::*;
use seed_tables as seed;

/// The seed's row for `record`: (written when, rests on).
fn row(record: &str) -> (String, String) {
    assert_eq!(
        seed::header(seed::SERVICE_RECORDS_000, "service_records"),
        ["Record", "Written when", "Rests on"]
    );
    let r = seed::rows(seed::SERVICE_RECORDS_000, "service_records")
        .into_iter()
        .find(|r| r[0] == record)
        .unwrap_or_else(|| panic!("no row {record:?}"));
    (r[1].clone(), r[2].clone())
}

/// What is due now; each due record rests on prior records of the commitment ("The Work service
/// party writes a record only on the basis of a prior Declaration, and links to it in basis").
fn due(w: &World) -> Vec<ServiceAction> {
    let out = due_work(w.c(), w.now);
    for a in &out {
        assert!(!a.basis.is_empty(), "{:?} links to no declaration", a.kind);
        for b in &a.basis {
            assert!(
                w.log.iter().any(|(r, _)| r.id == *b),
                "{:?} rests on a record that is not prior",
                a.kind
            );
        }
    }
    out
}

/// The due records whose operation is `wire` (an accept: only one marked implicit).
fn due_of(w: &World, wire: &str) -> Vec<ServiceAction> {
    due(w)
        .into_iter()
        .filter(|a| a.op.wire_name() == wire)
        .collect()
}

/// Writes `op` by `author` with `basis` and returns the refusal code (panics if it applied).
fn refused(w: &mut World, author: &Party, op: Operation, basis: &[RecordId]) -> RejectionCode {
    match w.try_op(author, op, basis, &[]) {
        Ok(_) => panic!("applied; the seed says it is not written"),
        Err(e) => e.code,
    }
}

/// The one due record of kind `wire`, checked to rest on `rests_on`, written by S.
fn write_due(w: &mut World, wire: &str, rests_on: RecordId) {
    let d = due_of(w, wire);
    let [a] = &d[..] else {
        panic!("one {wire} due, got {d:?}")
    };
    assert!(a.basis.contains(&rests_on), "{wire} rests on {rests_on:?}");
    let id = w.fresh_id();
    w.apply_record(service_record(a.clone(), id))
        .unwrap_or_else(|e| panic!("the due {wire} was refused: {e}"));
}

#[test]
fn expire_when_a_declared_validity_period_ends_with_no_action() {
    let (when, on) = row("expire");
    assert_eq!(when, "A declared validity period ends with no action");
    assert_eq!(on, "The validity statement");
    let until = T0 + 100_000;
    // The validity statement: the request's declared valid_until.
    let fresh = || {
        world_with(Request {
            valid_until: Some(until),
            ..basic_request()
        })
    };
    // Before the period ends: nothing due, and a written expire is refused.
    let (mut w, validity) = fresh();
    w.now = until - 1;
    assert!(due_of(&w, "expire").is_empty());
    let e = refused(&mut w, &Cast::s(), Operation::Expire, &[validity]);
    assert_eq!(e, RejectionCode::NotDue);
    // With an action (the candidate promised): nothing due after the end.
    let (mut w, _) = fresh();
    w.ok(&Cast::c(), Operation::Promise);
    w.now = until + 1;
    assert!(due_of(&w, "expire").is_empty(), "an action was taken");
    // Ends with no action: due, rests on the validity statement, applies.
    let (mut w, validity) = fresh();
    w.now = until;
    // Refused with no basis, a wrong one, or by another party.
    let e = refused(&mut w, &Cast::s(), Operation::Expire, &[]);
    assert_eq!(e, RejectionCode::MissingBasis);
    let e = refused(&mut w, &Cast::s(), Operation::Expire, &[rid(999)]);
    assert_eq!(e, RejectionCode::MissingBasis);
    let e = refused(&mut w, &Cast::o(), Operation::Expire, &[validity]);
    assert_eq!(e, RejectionCode::WrongRole);
    write_due(&mut w, "expire", validity);
    assert_eq!(w.state(), Some(State::Expired));
}

/// A commitment with implicit acceptance terms (window 10 s) and `acceptance`, acceptor
/// `acceptor`; C promised and stated at T0. Returns the world, the request (the record
/// holding the obligee's implicit_acceptance_terms) and the statement.
fn stated_with(acceptance: AcceptanceCriterion, acceptor: Party) -> (World, RecordId, RecordId) {
    let (mut w, req) = world_with(Request {
        implicit_acceptance_window_ms: Some(10_000),
        acceptance,
        acceptor: Some(acceptor),
        ..basic_request()
    });
    w.ok(&Cast::c(), Operation::Promise);
    let st = w.ok(&Cast::c(), state_op(&["r"]));
    (w, req, st)
}

fn implicit() -> Operation {
    Operation::Accept {
        evidence_ref: String::new(),
        implicit: true,
        step_up: false,
    }
}

#[test]
fn implicit_accept_when_the_window_ends_with_no_explicit_answer() {
    let (when, on) = row("accept (marked implicit)");
    assert_eq!(
        when,
        "An implicit acceptance window ends with no explicit answer"
    );
    assert_eq!(on, "The obligee's implicit_acceptance_terms");
    let plain = || stated_with(AcceptanceCriterion::default(), Cast::a());
    // Before the window ends: nothing due; written, refused.
    let (mut w, terms, st) = plain();
    w.now = T0 + 9_999;
    assert!(due_of(&w, "accept").is_empty());
    let e = refused(&mut w, &Cast::s(), implicit(), &[terms, st]);
    assert_eq!(e, RejectionCode::NotDue);
    // An explicit answer (a reject) in the window: nothing due after it ends.
    let (mut w, _, _) = plain();
    let reject = Operation::Reject {
        reason: "not yet".into(),
    };
    w.ok(&Cast::a(), reject);
    w.now = T0 + 20_000;
    assert!(
        due_of(&w, "accept").is_empty(),
        "there was an explicit answer"
    );
    // No answer: due at the end, rests on the terms, applies, marked implicit.
    let (mut w, terms, _) = plain();
    w.now = T0 + 10_000;
    let e = refused(&mut w, &Cast::s(), implicit(), &[]);
    assert_eq!(e, RejectionCode::MissingBasis);
    let e = refused(&mut w, &Cast::s(), implicit(), &[rid(999)]);
    assert_eq!(e, RejectionCode::MissingBasis);
    let d = due_of(&w, "accept");
    assert!(matches!(
        d[..],
        [ServiceAction {
            op: Operation::Accept { implicit: true, .. },
            ..
        }]
    ));
    write_due(&mut w, "accept", terms);
    assert_eq!(w.state(), Some(State::Accepted));
    // Without implicit acceptance terms there is nothing to rest on: never due, refused.
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    w.now = T0 + 1_000_000_000;
    assert!(due_of(&w, "accept").is_empty());
    let origin = w.log[0].0.id;
    assert!(w.try_op(&Cast::s(), implicit(), &[origin], &[]).is_err());
}

#[test]
fn implicit_acceptance_is_never_written_when_blocked() {
    let sentence = seed::prose(seed::SERVICE_RECORDS_000, "service_records")
        .into_iter()
        .find(|l| l.starts_with("Implicit acceptance is never written"))
        .expect("the seed's sentence");
    assert_eq!(
        sentence,
        "Implicit acceptance is never written if required evidence is missing, if the \
         four-eyes rule blocks acceptance, or if step-up is required."
    );
    let cases: [(&str, AcceptanceCriterion, Party); 3] = [
        (
            "required evidence is missing",
            AcceptanceCriterion {
                requires_evidence: true,
                ..AcceptanceCriterion::default()
            },
            Cast::a(),
        ),
        // Four-eyes blocks acceptance by the party that stated: C is the acceptor and states.
        (
            "the four-eyes rule blocks acceptance",
            AcceptanceCriterion {
                four_eyes: true,
                ..AcceptanceCriterion::default()
            },
            Cast::c(),
        ),
        (
            "step-up is required",
            AcceptanceCriterion {
                step_up: true,
                ..AcceptanceCriterion::default()
            },
            Cast::a(),
        ),
    ];
    for (why, crit, acceptor) in cases {
        assert!(sentence.contains(why), "{why}");
        let (mut w, terms, st) = stated_with(crit, acceptor);
        for at in [T0 + 10_000, T0 + 1_000_000_000] {
            w.now = at;
            assert!(due_of(&w, "accept").is_empty(), "{why}: due at {at}");
            let code = refused(&mut w, &Cast::s(), implicit(), &[terms, st]);
            assert!(
                matches!(
                    code,
                    RejectionCode::MissingEvidence
                        | RejectionCode::FourEyes
                        | RejectionCode::StepUpRequired
                ),
                "{why}: {code}"
            );
        }
    }
    // Once the required evidence exists (an executor's act), the implicit accept is written.
    let crit = AcceptanceCriterion {
        requires_evidence: true,
        ..AcceptanceCriterion::default()
    };
    let (mut w, terms, st) = stated_with(crit, Cast::a());
    let act = Operation::ActedUpon {
        record_id: Some(st),
        act: "delivered".into(),
    };
    w.ok(&Cast::e(), act);
    w.now = T0 + 10_000;
    write_due(&mut w, "accept", terms);
    assert_eq!(w.state(), Some(State::Accepted));
}

fn defer_op(return_at: Option<i64>, return_event: &str) -> Operation {
    Operation::Defer {
        reason: "later".into(),
        return_at,
        return_event: return_event.into(),
    }
}

fn resume_op(event: &str) -> Operation {
    Operation::Resume {
        event: event.into(),
    }
}

#[test]
fn resume_when_a_dated_deferral_reaches_its_return_date_or_its_event_occurs() {
    let (when, on) = row("resume");
    assert_eq!(
        when,
        "A dated deferral reaches its return date, or its return event occurs"
    );
    assert_eq!(on, "The defer");
    // A dated deferral: not due before its date (written, refused); due at it, resting on the
    // defer; refused with no basis or a wrong one.
    let mut w = promised();
    let d = w.ok(&Cast::o(), defer_op(Some(T0 + 5_000), ""));
    w.now = T0 + 4_999;
    assert!(due_of(&w, "resume").is_empty());
    assert_eq!(
        refused(&mut w, &Cast::s(), resume_op(""), &[d]),
        RejectionCode::NotDue
    );
    w.now = T0 + 5_000;
    let e = refused(&mut w, &Cast::s(), resume_op(""), &[]);
    assert_eq!(e, RejectionCode::MissingBasis);
    let e = refused(&mut w, &Cast::s(), resume_op(""), &[rid(999)]);
    assert_eq!(e, RejectionCode::MissingBasis);
    write_due(&mut w, "resume", d);
    assert!(w.c().deferral.is_none(), "the deferral closed");
    // A deferral with no return date is never due by time.
    // The return event (the documented form: a Condition of this commitment closes).
    let mut w = promised();
    let cond = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "goods in".into(),
                addressed_to: Some(Cast::c()),
                ..Condition::default()
            },
        },
    );
    let hex: String = cond.iter().map(|b| format!("{b:02x}")).collect();
    let event = format!("condition_closed:{hex}");
    let d = w.ok(&Cast::o(), defer_op(None, &event));
    w.now = T0 + 1_000_000_000;
    assert!(due_of(&w, "resume").is_empty(), "no event yet");
    assert_eq!(
        refused(&mut w, &Cast::s(), resume_op(&event), &[d]),
        RejectionCode::NotDue
    );
    // Its return event occurs: the resume is due, rests on the defer, and closes it.
    w.ok_with(&Cast::o(), Operation::WithdrawCondition, &[cond], &[]);
    let due = due_of(&w, "resume");
    assert_eq!(due.len(), 1, "{due:?}");
    assert!(due[0].basis.contains(&d), "rests on the defer");
    w.tick();
    assert!(w.c().deferral.is_none(), "the deferral closed");
}

/// A pooled commitment (queue q declared by the request: lease 1 s, return to the pool
/// `back`), claimed by K at T0.
fn claimed(back: bool) -> (World, RecordId) {
    let mut r = pooled_request();
    r.queue.as_mut().unwrap().return_to_pool_on_lease_end = back;
    let (mut w, req) = world_with(r);
    w.ok(&Cast::k(), Operation::Claim);
    (w, req)
}

fn unclaim_op() -> Operation {
    Operation::Unclaim {
        reason: "lease ended".into(),
    }
}

#[test]
fn unclaim_when_an_ownership_lease_ends_and_the_queue_says_return_to_the_pool() {
    let (when, on) = row("unclaim");
    assert_eq!(
        when,
        "An ownership lease ends and the queue says to return to the pool"
    );
    assert_eq!(on, "The queue's declared lease behaviour");
    // Before the lease ends: nothing due; written, refused.
    let (mut w, queue) = claimed(true);
    w.now = T0 + 999;
    assert!(due_of(&w, "unclaim").is_empty());
    assert_eq!(
        refused(&mut w, &Cast::s(), unclaim_op(), &[queue]),
        RejectionCode::NotDue
    );
    // The queue does not say to return to the pool: never due, refused.
    let (mut w, queue) = claimed(false);
    w.now = T0 + 1_000_000;
    assert!(due_of(&w, "unclaim").is_empty());
    assert!(w.try_op(&Cast::s(), unclaim_op(), &[queue], &[]).is_err());
    // Lease ended, queue says return: due, rests on the queue's declaration, applies.
    let (mut w, queue) = claimed(true);
    w.now = T0 + 1_000;
    let e = refused(&mut w, &Cast::s(), unclaim_op(), &[]);
    assert_eq!(e, RejectionCode::MissingBasis);
    let e = refused(&mut w, &Cast::s(), unclaim_op(), &[rid(999)]);
    assert_eq!(e, RejectionCode::MissingBasis);
    write_due(&mut w, "unclaim", queue);
    assert_eq!(w.state(), Some(State::Requested));
    assert_eq!(w.view().assignment.wire_name(), "pooled");
    // A queue declared later (a forward) is the declaration the unclaim rests on.
    let (mut w, _) = world_with(pooled_request());
    let mut q = pooled_request().queue.unwrap();
    q.name = "q2".into();
    let fwd = w.ok(&Cast::q(), Operation::Forward { to: Some(q) });
    w.ok(&Cast::k(), Operation::Claim);
    w.now = T0 + 1_000;
    write_due(&mut w, "unclaim", fwd);
    assert_eq!(w.state(), Some(State::Requested));
}
