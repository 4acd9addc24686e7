//! Claims from the executor or an external party (seed 000, "Other state axes": "Execution,
//! control and liveness come from executor or external Claims. 'Stopped' appears on the
//! execution axis only when the executor confirms it").
//!
//! The external party is `Cast::m()` (organisation "monitor-co"), to whom the test's Access
//! grants `Authority::Observer` for the obligor's organisation ("supplier"); the executor is
//! `Cast::e()` (of "supplier"). Expected values are the seed's axis values.

mod common;

use accord_kernel::*;
use common::*;

fn stop(w: &mut World, mode: StopMode) -> RecordId {
    w.ok(
        &Cast::x(),
        Operation::StopRequest {
            mode,
            reason: "budget review".into(),
        },
    )
}

/// Access without the Observer grant to `Cast::m()`.
fn without_grant(w: &mut World) {
    w.access
        .grants
        .retain(|g| !matches!(g.authority, Authority::Observer { .. }));
}

/// "Execution, control and liveness come from executor or external Claims": the external
/// party's claim alone moves all three axes, and its missed heartbeat makes liveness stale.
#[test]
fn an_external_party_granted_the_authority_moves_the_axes() {
    let mut w = promised();
    assert_eq!(w.view().execution, Execution::NotStarted);
    assert_eq!(w.view().liveness, Liveness::NotApplicable);
    w.ok(
        &Cast::m(),
        Operation::Observation(Box::new(Observation {
            execution: ExecutionReport::Running,
            control: ControlReport::Automatic,
            heartbeat_interval_ms: Some(1_000),
            ..Observation::default()
        })),
    );
    let v = w.view();
    assert_eq!(v.execution, Execution::Running);
    assert_eq!(v.liveness, Liveness::Live);
    assert_eq!(v.control, Control::Automatic);
    // Summary category: active = "Execution running; liveness live or not applicable".
    assert_eq!(v.category, Category::Active);
    w.now += 1_001;
    assert_eq!(w.view().liveness, Liveness::Stale);
    assert!(w.view().flags.contains(&Flag::Stale));
}

/// The same party without the grant is a stranger to the work: its observation is refused
/// `wrong_role` (the author holds no role the operation needs) and changes nothing; so is a
/// grant for another organisation's work. Only the executor's organisation needs no grant.
#[test]
fn the_same_party_without_the_grant_is_refused() {
    let mut w = promised();
    without_grant(&mut w);
    let before = w.c().clone();
    w.err(
        &Cast::m(),
        observe(ExecutionReport::Running, Some(1_000)),
        RejectionCode::WrongRole,
    );
    assert_eq!(w.c(), &before);
    assert_eq!(w.view().execution, Execution::NotStarted);
    assert_eq!(w.view().liveness, Liveness::NotApplicable);
    // A grant for the obligee's organisation's work is not one for the obligor's.
    w.access = w.access.clone().with_grant(
        Authority::Observer {
            organisation: "buyer".into(),
        },
        Cast::m(),
    );
    w.err(
        &Cast::m(),
        observe(ExecutionReport::Running, None),
        RejectionCode::WrongRole,
    );
    // The executor needs none.
    w.ok(&Cast::e(), observe(ExecutionReport::Running, None));
}

/// An external party reports; it does not answer for the work: the stop response, consumption
/// and acts stay the executor's.
#[test]
fn an_external_party_only_observes() {
    let mut w = promised();
    let s = stop(&mut w, StopMode::Immediate);
    w.err_with(
        &Cast::m(),
        Operation::StopResponse {
            answer: StopAnswer::Accept,
            reason: String::new(),
        },
        &[s],
        &[],
        RejectionCode::WrongRole,
    );
    w.err(
        &Cast::m(),
        Operation::ReportConsumption { amount: 1 },
        RejectionCode::WrongRole,
    );
    w.err(
        &Cast::m(),
        Operation::ActedUpon {
            record_id: Some(s),
            act: "ran".into(),
        },
        RejectionCode::WrongRole,
    );
}

/// "'Stopped' appears on the execution axis only when the executor confirms it" and "no
/// confirmation ──► execution axis stays unknown": an external party's `stopped` confirms
/// nothing; the executor's does.
#[test]
fn a_stop_confirmed_only_by_an_external_party_does_not_show_stopped() {
    let mut w = promised();
    w.ok(&Cast::m(), observe(ExecutionReport::Running, Some(1_000)));
    stop(&mut w, StopMode::Immediate);
    assert_eq!(w.view().execution, Execution::Unknown);
    w.ok(&Cast::m(), observe(ExecutionReport::Stopped, Some(1_000)));
    let v = w.view();
    assert_ne!(v.execution, Execution::Stopped);
    assert_eq!(v.execution, Execution::Unknown);
    assert_eq!(v.stop.as_ref().and_then(|s| s.confirmed), None);
    // The executor's confirmation shows it.
    w.ok(&Cast::e(), observe(ExecutionReport::Stopped, Some(1_000)));
    assert_eq!(w.view().execution, Execution::Stopped);
}

/// Without any stop request, an external `stopped` does not show stopped either.
#[test]
fn an_external_stopped_without_a_stop_request_is_unknown() {
    let mut w = promised();
    w.ok(&Cast::m(), observe(ExecutionReport::Stopped, None));
    assert_eq!(w.view().execution, Execution::Unknown);
}

/// "pause request → executor confirmation or checkpoint → control_lease": an external party's
/// `paused` or checkpoint does not open the way to the control lease.
#[test]
fn an_external_pause_or_checkpoint_does_not_lease_control() {
    let mut w = promised();
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
    let pause = stop(&mut w, StopMode::Pause);
    w.ok(
        &Cast::m(),
        Operation::Observation(Box::new(Observation {
            execution: ExecutionReport::Paused,
            checkpoint: "ckpt-ext".into(),
            ..Observation::default()
        })),
    );
    assert_ne!(w.view().execution, Execution::Paused);
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
    w.ok(&Cast::e(), observe(ExecutionReport::Paused, Some(1_000)));
    assert_eq!(w.view().execution, Execution::Paused);
    w.ok_with(&Cast::x(), lease, &[pause], &[]);
}

/// Executor and external claims that cannot both hold raise the seed's `contradiction` flag;
/// the execution axis is then unknown (neither claim is taken over the other), until they agree.
#[test]
fn disagreeing_executor_and_external_claims_are_a_contradiction() {
    let mut w = promised();
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
    w.ok(&Cast::m(), observe(ExecutionReport::Failed, Some(1_000)));
    let v = w.view();
    assert!(v.flags.contains(&Flag::Contradiction));
    assert_eq!(v.execution, Execution::Unknown);
    w.ok(&Cast::e(), observe(ExecutionReport::Failed, Some(1_000)));
    let v = w.view();
    assert!(!v.flags.contains(&Flag::Contradiction));
    assert_eq!(v.execution, Execution::Failed);
}
