//! Stop requests and control handover (seed 000, "Stop requests", "Control handover"), and the
//! execution, control and liveness axes derived from executor claims ("Other state axes").

mod common;

use accord_kernel::*;
use common::*;

fn running() -> World {
    let mut w = promised();
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
    w
}

fn stop(w: &mut World, mode: StopMode) -> RecordId {
    w.ok(
        &Cast::x(),
        Operation::StopRequest {
            mode,
            reason: "budget review".into(),
        },
    )
}

fn respond(w: &mut World, s: RecordId, answer: StopAnswer, reason: &str) -> RecordId {
    w.ok_with(
        &Cast::e(),
        Operation::StopResponse {
            answer,
            reason: reason.into(),
        },
        &[s],
        &[],
    )
}

#[test]
fn liveness_goes_stale_on_time_with_no_record() {
    let mut w = promised();
    assert_eq!(w.view().liveness, Liveness::NotApplicable);
    assert_eq!(w.view().execution, Execution::NotStarted);
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
    assert_eq!(w.view().liveness, Liveness::Live);
    assert_eq!(w.view().execution, Execution::Running);
    let records = w.c().history.len();
    w.now += 1_000;
    assert_eq!(w.view().liveness, Liveness::Live);
    w.now += 1;
    assert_eq!(w.view().liveness, Liveness::Stale);
    assert!(w.view().flags.contains(&Flag::Stale));
    assert_eq!(w.c().history.len(), records, "no record was needed");
    // A new heartbeat makes it live again; leaving cleanly ends it.
    w.ok(&Cast::e(), Operation::Observation(Box::default()));
    assert_eq!(w.view().liveness, Liveness::Live);
    w.ok(
        &Cast::e(),
        Operation::Observation(Box::new(Observation {
            execution: ExecutionReport::Completed,
            left_cleanly: true,
            ..Observation::default()
        })),
    );
    assert_eq!(w.view().liveness, Liveness::LeftCleanly);
    assert_eq!(w.view().execution, Execution::Completed);
    // Only the obligor's organisation reports as executor.
    w.err(
        &Cast::z(),
        observe(ExecutionReport::Running, None),
        RejectionCode::WrongRole,
    );
}

/// Each stop response path; "Stopped" only with the executor's confirmation, unknown without.
#[test]
fn each_stop_response_path() {
    for (answer, reason) in [(StopAnswer::Accept, ""), (StopAnswer::FinishThenStop, "")] {
        let mut w = running();
        let s = stop(&mut w, StopMode::Immediate);
        // Pending, no confirmation: the execution axis is unknown.
        assert_eq!(w.view().execution, Execution::Unknown);
        assert_eq!(w.view().category, Category::Unknown);
        assert!(
            w.view()
                .stop
                .as_ref()
                .is_some_and(|st| st.response.is_none())
        );
        respond(&mut w, s, answer, reason);
        assert_eq!(w.view().execution, Execution::Unknown, "{answer:?}");
        // The executor's confirming claim shows stopped.
        w.ok(&Cast::e(), observe(ExecutionReport::Stopped, None));
        assert_eq!(w.view().execution, Execution::Stopped, "{answer:?}");
        // Nothing resumes on its own: time passes, due work has nothing.
        w.now += 10_000;
        assert!(due_work(w.c(), w.now).is_empty());
        assert_eq!(w.view().execution, Execution::Stopped);
        // Work claimed running without resume_after_stop is a contradiction.
        w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
        assert!(w.view().flags.contains(&Flag::Contradiction));
        assert_eq!(w.view().execution, Execution::Unknown);
        // resume_after_stop is the separate declaration that ends the stop.
        w.ok_with(
            &Cast::x(),
            Operation::ResumeAfterStop {
                reason: String::new(),
            },
            &[s],
            &[],
        );
        assert_eq!(w.view().execution, Execution::Running);
        assert!(!w.view().flags.contains(&Flag::Contradiction));
    }
    // Refuse: with a reason; attention for the principal and the requester.
    let mut w = running();
    let s = stop(&mut w, StopMode::Immediate);
    w.err_with(
        &Cast::e(),
        Operation::StopResponse {
            answer: StopAnswer::Refuse,
            reason: String::new(),
        },
        &[s],
        &[],
        RejectionCode::MissingReason,
    );
    let refusal = respond(&mut w, s, StopAnswer::Refuse, "safety interlock engaged");
    let v = w.view();
    assert_eq!(v.attention_marks.len(), 1);
    assert_eq!(v.attention_marks[0].record, refusal);
    assert_eq!(v.attention_marks[0].to, vec![Cast::pr(), Cast::x()]);
    assert!(matches!(
        &w.effects[..],
        [Effect::Notify { to, about: Notification::StopRefused { reason }, .. }]
            if *to == vec![Cast::pr(), Cast::x()] && reason == "safety interlock engaged"
    ));
    // The work continues as claimed.
    assert_eq!(v.execution, Execution::Running);
    assert_eq!(v.category, Category::Active);
}

#[test]
fn stop_requests_check_their_subject() {
    let mut w = running();
    w.err_with(
        &Cast::e(),
        Operation::StopResponse {
            answer: StopAnswer::Accept,
            reason: String::new(),
        },
        &[],
        &[],
        RejectionCode::NoOpenStop,
    );
    w.err(
        &Cast::c(),
        Operation::StopRequest {
            mode: StopMode::Immediate,
            reason: String::new(),
        },
        RejectionCode::WrongRole,
    );
    let s = stop(&mut w, StopMode::Immediate);
    w.err(
        &Cast::x(),
        Operation::StopRequest {
            mode: StopMode::Pause,
            reason: String::new(),
        },
        RejectionCode::StopPending,
    );
    w.err_with(
        &Cast::e(),
        Operation::StopResponse {
            answer: StopAnswer::Accept,
            reason: String::new(),
        },
        &[],
        &[],
        RejectionCode::MissingBasis,
    );
    respond(&mut w, s, StopAnswer::Accept, "");
    w.err_with(
        &Cast::e(),
        Operation::StopResponse {
            answer: StopAnswer::Refuse,
            reason: "changed my mind".into(),
        },
        &[s],
        &[],
        RejectionCode::AlreadyAnswered,
    );
}

/// pause request -> executor confirmation or checkpoint -> control_lease -> hand back with a
/// handoff note -> re-check -> continue or re-plan; each a record, the control axis following.
#[test]
fn control_handover_end_to_end() {
    for outcome in [RecheckOutcome::Continue, RecheckOutcome::Replan] {
        let mut w = running();
        w.ok(
            &Cast::e(),
            Operation::Observation(Box::new(Observation {
                control: ControlReport::Automatic,
                ..Observation::default()
            })),
        );
        assert_eq!(w.view().control, Control::Automatic);
        let pause = stop(&mut w, StopMode::Pause);
        // No lease before the executor confirmed the pause or reported a checkpoint.
        let lease = Operation::ControlLease {
            holder: Some(Cast::x()),
            until: None,
        };
        w.err_with(
            &Cast::x(),
            lease.clone(),
            &[pause],
            &[],
            RejectionCode::NotPaused,
        );
        if outcome == RecheckOutcome::Continue {
            w.ok(&Cast::e(), observe(ExecutionReport::Paused, Some(1_000)));
            assert_eq!(w.view().execution, Execution::Paused);
        } else {
            w.ok(
                &Cast::e(),
                Operation::Observation(Box::new(Observation {
                    checkpoint: "ckpt-7".into(),
                    ..Observation::default()
                })),
            );
        }
        let l = w.ok_with(&Cast::x(), lease, &[pause], &[]);
        let v = w.view();
        assert_eq!(v.control, Control::Manual);
        assert_eq!(v.control_holder, Some(Cast::x()));
        assert!(v.flags.contains(&Flag::TakenOver));
        // Only the holder hands back, with a note, naming the lease.
        let back = Operation::HandBackControl {
            handoff_note: "valve reset; check pressure".into(),
        };
        w.err_with(
            &Cast::o(),
            back.clone(),
            &[l],
            &[],
            RejectionCode::WrongRole,
        );
        w.err_with(
            &Cast::x(),
            Operation::HandBackControl {
                handoff_note: " ".into(),
            },
            &[l],
            &[],
            RejectionCode::MissingHandoverNote,
        );
        w.ok_with(&Cast::x(), back, &[l], &[]);
        let v = w.view();
        assert_eq!(v.control, Control::Intervened);
        assert_eq!(v.control_holder, None);
        assert!(
            v.handover
                .as_ref()
                .and_then(|h| h.handed_back.as_ref())
                .is_some_and(|(_, note)| note == "valve reset; check pressure")
        );
        w.ok(
            &Cast::x(),
            Operation::Recheck {
                outcome,
                note: String::new(),
            },
        );
        let v = w.view();
        assert_eq!(v.last_recheck, Some(outcome));
        assert!(v.handover.is_none());
        assert_eq!(v.control, Control::Automatic);
        // Seed 000: "Continuing after a stop is a separate resume_after_stop Declaration and
        // never happens on its own" — neither outcome of the re-check ends the stop.
        assert!(
            v.stop.as_ref().is_some_and(|s| s.in_effect()),
            "{outcome:?} ended the stop"
        );
        w.err(
            &Cast::x(),
            Operation::Recheck {
                outcome,
                note: String::new(),
            },
            RejectionCode::NoHandBack,
        );
        w.ok_with(
            &Cast::x(),
            Operation::ResumeAfterStop {
                reason: String::new(),
            },
            &[pause],
            &[],
        );
        assert!(!w.view().stop.as_ref().is_some_and(|s| s.in_effect()));
    }
}

/// The seed puts no condition on resume_after_stop: taken while a control handover is under
/// way, it ends the stop; the handover goes on (control stays with the holder) to its hand back
/// and re-check.
#[test]
fn resume_after_stop_during_a_handover_ends_the_stop_and_not_the_handover() {
    let mut w = running();
    let pause = stop(&mut w, StopMode::Pause);
    w.ok(&Cast::e(), observe(ExecutionReport::Paused, Some(1_000)));
    let l = w.ok_with(
        &Cast::x(),
        Operation::ControlLease {
            holder: Some(Cast::x()),
            until: None,
        },
        &[pause],
        &[],
    );
    assert!(w.view().stop.as_ref().is_some_and(|s| s.in_effect()));
    w.ok_with(
        &Cast::x(),
        Operation::ResumeAfterStop {
            reason: "cleared".into(),
        },
        &[pause],
        &[],
    );
    let v = w.view();
    assert!(!v.stop.as_ref().is_some_and(|s| s.in_effect()));
    assert_eq!(v.control, Control::Manual);
    assert_eq!(v.control_holder, Some(Cast::x()));
    w.ok_with(
        &Cast::x(),
        Operation::HandBackControl {
            handoff_note: "done".into(),
        },
        &[l],
        &[],
    );
    w.ok(
        &Cast::x(),
        Operation::Recheck {
            outcome: RecheckOutcome::Continue,
            note: String::new(),
        },
    );
    assert!(w.view().handover.is_none());
}
