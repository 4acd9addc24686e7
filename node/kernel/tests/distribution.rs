//! A queue's distribution policy (seed 000, "Assignment": offer — "Queue owner or distribution
//! policy — offered — None; the party answers with a commitment operation"; failed_to_assign —
//! "The start deadline passed, or the policy found no candidate"). The policies are the kernel's
//! documented closed list (ARCHITECTURE.md, departures): `first_candidate` offers to the first
//! candidate in declared order not yet offered since the commitment entered the queue;
//! `round_robin` starts at position (first 8 bytes of the request's id) mod N and moves on by one
//! each time the commitment returns unassigned.

mod common;

use accord_kernel::*;
use common::*;

use RejectionCode as RC;

fn with_policy(policy: Distribution, candidates: Vec<Party>) -> (World, RecordId) {
    let mut r = pooled_request();
    let q = r.queue.as_mut().expect("pooled");
    q.distribution = policy;
    q.candidates = candidates;
    world_with(r)
}

fn offer(to: Party) -> Operation {
    Operation::Offer { to: Some(to) }
}

#[test]
fn the_policy_offers_to_the_candidate_it_names_resting_on_the_queue() {
    let (mut w, req) = with_policy(Distribution::FirstCandidate, vec![Cast::k(), Cast::c()]);
    let due = w.tick();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].kind, ServiceKind::Offer);
    assert_eq!(due[0].op, offer(Cast::k()), "the first candidate");
    assert_eq!(
        due[0].basis,
        vec![req],
        "rests on the queue's declared policy"
    );
    // offer — "Effect on assignment: offered"; "Effect on the commitment: None".
    assert_eq!(w.view().assignment, Assignment::Offered);
    assert_eq!(w.state(), Some(State::Requested));
    assert!(w.tick().is_empty(), "one offer");
    // "the party answers with a commitment operation".
    w.ok(&Cast::k(), Operation::Promise);
    assert_eq!(w.view().assignment, Assignment::Held);
    assert_eq!(w.replay(), *w.c());
}

#[test]
fn the_work_service_may_offer_only_what_the_policy_picks() {
    let (mut w, req) = with_policy(Distribution::FirstCandidate, vec![Cast::k(), Cast::c()]);
    w.err_with(
        &Cast::s(),
        offer(Cast::c()),
        &[req],
        &[],
        RC::PolicyMismatch,
    );
    w.err_with(&Cast::s(), offer(Cast::k()), &[], &[], RC::MissingBasis);
    w.ok_with(&Cast::s(), offer(Cast::k()), &[req], &[]);
    w.err_with(&Cast::s(), offer(Cast::k()), &[req], &[], RC::NotDue);
    // The queue owner still offers as before.
    w.ok(&Cast::q(), offer(Cast::c()));
    assert_eq!(w.c().offered_to, Some(Cast::c()));
}

#[test]
fn a_queue_without_a_policy_behaves_as_before() {
    let (mut w, req) = world_with(pooled_request());
    assert!(w.tick().is_empty(), "only the queue owner offers");
    assert_eq!(w.view().assignment, Assignment::Pooled);
    w.err_with(&Cast::s(), offer(Cast::k()), &[req], &[], RC::WrongRole);
    w.ok(&Cast::q(), offer(Cast::k()));
    assert_eq!(w.view().assignment, Assignment::Offered);
}

#[test]
fn round_robin_moves_on_when_the_commitment_returns_unassigned() {
    let cands = vec![Cast::k(), Cast::c(), Cast::z()];
    let (mut w, req) = with_policy(Distribution::RoundRobin, cands.clone());
    let start = (u64::from_be_bytes(req[..8].try_into().expect("8 bytes")) % 3) as usize;
    for turn in 0..4 {
        let due = w.tick();
        let who = cands[(start + turn) % 3].clone();
        assert_eq!(due.len(), 1, "turn {turn}: {due:?}");
        assert_eq!(due[0].op, offer(who.clone()), "turn {turn}");
        // The offered candidate claims, then returns it to the pool.
        w.ok(&who, Operation::Claim);
        w.tick(); // the produced promise is the node's; nothing else is due
        w.ok(
            &who,
            Operation::Unclaim {
                reason: "busy".into(),
            },
        );
    }
}

#[test]
fn the_policy_finding_no_candidate_is_failed_to_assign() {
    // Empty candidate set.
    let (mut w, _) = with_policy(Distribution::RoundRobin, Vec::new());
    assert!(w.tick().is_empty());
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    let (mut w, _) = with_policy(Distribution::FirstCandidate, Vec::new());
    assert!(w.tick().is_empty());
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    // first_candidate with every candidate already offered: candidates exist, the policy finds
    // none.
    let (mut w, _) = with_policy(Distribution::FirstCandidate, vec![Cast::k()]);
    assert_eq!(w.view().assignment, Assignment::Pooled);
    w.tick();
    w.ok(&Cast::k(), Operation::Claim);
    w.ok(
        &Cast::k(),
        Operation::Unclaim {
            reason: "no".into(),
        },
    );
    assert!(w.tick().is_empty());
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    // A forward to a new queue starts the policy over.
    let q2 = Queue {
        name: "q2".into(),
        owner: Some(Cast::q()),
        candidates: vec![Cast::k()],
        distribution: Distribution::FirstCandidate,
        ..Queue::default()
    };
    let fwd = w.ok(&Cast::q(), Operation::Forward { to: Some(q2) });
    let due = w.tick();
    assert_eq!(due.len(), 1);
    assert_eq!(
        (due[0].op.clone(), due[0].basis.clone()),
        (offer(Cast::k()), vec![fwd])
    );
}

#[test]
fn an_unknown_policy_is_a_recorded_rejection_naming_the_field() {
    let mut r = pooled_request();
    r.queue.as_mut().expect("pooled").distribution = Distribution::from_wire(9);
    let mut w = World::new();
    let rec = w.record(&Cast::o(), req(r), &[], &[]);
    let e = w.apply_record(rec).expect_err("unknown policy");
    assert_eq!(e.code, RC::Malformed);
    assert!(e.detail.contains("distribution"), "{}", e.detail);
}
