//! The kernel rejection codes no other test triggered (issue 29, item 4: "Every kernel rejection
//! code is triggered by at least one test that checks the code"): each from the seed sentence
//! or the rule whose breach it names.

mod common;

use accord_kernel::envelope::*;
use accord_kernel::*;
use common::*;
use std::collections::BTreeMap;

/// Seed 000, "request": the request creates the commitment with its items; a request that
/// names items of its own is refused `item_mismatch`.
#[test]
fn a_request_naming_items_is_an_item_mismatch() {
    let mut w = World::new();
    let r = w.record(&Cast::o(), req(basic_request()), &[], &["a"]);
    let e = w.apply_record(r).expect_err("a request naming items");
    assert_eq!(e.code, RejectionCode::ItemMismatch, "{e}");
    assert!(w.c.is_none(), "nothing was created");
}

/// Seed 000, "renew_lease — Obligor — The lease is extended": an obligor who holds the work by a
/// promise, not by a claim with a lease, has no lease to renew (`no_lease`).
#[test]
fn renewing_a_lease_never_taken_is_no_lease() {
    let mut w = promised();
    assert_eq!(w.c().obligor, Some(Cast::c()));
    w.err(
        &Cast::c(),
        Operation::RenewLease {
            lease_ms: Some(500),
        },
        RejectionCode::NoLease,
    );
}

/// Seed 000, "claim — Queue candidate": one candidate's claim takes the pooled commitment; a
/// second candidate's claim on an item still requested is refused `already_held`.
#[test]
fn a_second_claim_on_held_work_is_already_held() {
    let mut r = pooled_request();
    r.terms = terms_items("two parts", &["a", "b"]);
    let (mut w, _) = world_with(r);
    w.ok_with(&Cast::k(), Operation::Claim, &[], &["a"]);
    assert_eq!(w.c().obligor, Some(Cast::k()));
    w.err_with(
        &Cast::c(),
        Operation::Claim,
        &[],
        &["b"],
        RejectionCode::AlreadyHeld,
    );
    assert_eq!(w.c().obligor, Some(Cast::k()), "the first claim holds");
}

/// Seed 000, "Control handover": "hand back control" follows a control_lease; once control has
/// been handed back, the holder cannot hand it back again (`no_control_lease`).
#[test]
fn handing_back_control_twice_is_no_control_lease() {
    let mut w = promised();
    w.ok(&Cast::e(), observe(ExecutionReport::Running, Some(1_000)));
    let pause = w.ok(
        &Cast::x(),
        Operation::StopRequest {
            mode: StopMode::Pause,
            reason: "inspection".into(),
        },
    );
    w.ok(&Cast::e(), observe(ExecutionReport::Paused, Some(1_000)));
    let lease = w.ok_with(
        &Cast::x(),
        Operation::ControlLease {
            holder: Some(Cast::x()),
            until: None,
        },
        &[pause],
        &[],
    );
    let back = || Operation::HandBackControl {
        handoff_note: "done".into(),
    };
    w.ok_with(&Cast::x(), back(), &[lease], &[]);
    w.err_with(
        &Cast::x(),
        back(),
        &[lease],
        &[],
        RejectionCode::NoControlLease,
    );
}

/// Seed 003: every envelope event after the start names an envelope that was started; a vote
/// for one never started is refused `unknown_envelope`.
#[test]
fn a_vote_for_an_envelope_never_started_is_unknown_envelope() {
    let vote = Record {
        id: rid(9),
        author: p("supplier", "envelope-service"),
        commitment: String::new(),
        basis: vec![rid(8)],
        items: Vec::new(),
        op: Operation::Envelope(Box::new(EnvelopeOperation {
            envelope: "e-never".into(),
            event: String::new(),
            step: EnvelopeStep::Vote {
                participant: "supplier".into(),
                vote: Vote::Ack,
                reason: String::new(),
            },
        })),
    };
    let e = apply_envelope(None, &BTreeMap::new(), &vote, &access(), T0)
        .expect_err("a vote for no envelope");
    assert_eq!(e.code, RejectionCode::UnknownEnvelope, "{e}");
}
