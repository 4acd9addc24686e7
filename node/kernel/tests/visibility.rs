//! Who may read a commitment (issue 8): the parties with a role on it, and nobody else — not a
//! party of the obligee's or obligor's organisation as such, nor an administrative authority.

mod common;

use accord_kernel::*;
use common::*;

#[test]
fn a_direct_request_is_read_by_its_named_parties_only() {
    let (w, _) = world_with(basic_request());
    let readers = parties_with_role(w.c());
    assert_eq!(
        readers,
        vec![Cast::o(), Cast::c(), Cast::a(), Cast::x(), Cast::pr()],
        "obligee, candidate, acceptor, accountable, principal"
    );
    for who in [Cast::o(), Cast::c(), Cast::a(), Cast::x(), Cast::pr()] {
        assert!(may_read(w.c(), &w.access, &who), "{who}");
    }
    // Same organisation as the obligee (O2) or the candidate (E), an administrative authority
    // (D), an unrelated party: none of them has a role.
    for who in [Cast::o2(), Cast::e(), Cast::d(), Cast::z(), Cast::k()] {
        assert!(!may_read(w.c(), &w.access, &who), "{who}");
    }
}

#[test]
fn pooled_queue_owner_and_candidates_read() {
    let (w, _) = world_with(pooled_request());
    for who in [Cast::q(), Cast::k(), Cast::c()] {
        assert!(may_read(w.c(), &w.access, &who), "{who}");
    }
    assert!(!may_read(w.c(), &w.access, &Cast::z()));
    // An Access grant for the queue's name makes its grantee the owner (and a reader) instead.
    let access = w
        .access
        .clone()
        .with_grant(Authority::QueueOwner { queue: "q".into() }, Cast::z());
    assert!(may_read(w.c(), &access, &Cast::z()));
    // A principal by Access reads every commitment (it holds the principal role on each).
    let access = w.access.clone().with_grant(Authority::Principal, Cast::u());
    assert!(may_read(w.c(), &access, &Cast::u()));
}

#[test]
fn handover_targets_and_condition_addressees_are_participants() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    assert!(!may_read(w.c(), &w.access, &Cast::n1()));
    w.ok(
        &Cast::c(),
        Operation::DelegateOffer {
            to: Some(Cast::n1()),
            handover_note: "over to you".into(),
        },
    );
    assert!(
        may_read(w.c(), &w.access, &Cast::n1()),
        "the proposed new obligor reads what it is offered"
    );
    assert!(!may_read(w.c(), &w.access, &Cast::y()));
    w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "deposit".into(),
                addressed_to: Some(Cast::y()),
                kind: Default::default(),
                deadline: None,
                participants: Vec::new(),
                aggregation: Default::default(),
            },
        },
    );
    assert!(may_read(w.c(), &w.access, &Cast::y()));
}
