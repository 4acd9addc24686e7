//! Seed 000's "Whose move it is" table, row by row, against the kernel's `whose_move`
//! (`seed_tables/000_whose_move.txt`). Every row is checked on a commitment in that situation
//! whose queue is owned, by Access's grant, by a party other than the one the queue declares:
//! "requested — Candidate obligor, or queue owner" must name the party Access lets act as the
//! queue's owner, not the declared one.
//!
//! The expected parties come from the seed's words: each phrase of the "Next move" column (split
//! at ", or " and " or ") is looked up in the test's own cast ([`phrase`]), and "The other side"
//! of an open revoke request is the "Asked of" column of the seed's "Revoke requests" table.

mod common;
mod seed_tables;

use std::collections::BTreeSet;

use accord_kernel::*;
use common::*;
use seed_tables as seed;

/// The party Access grants the queue to; the queue itself declares `Cast::q()`.
fn granted_owner() -> Party {
    p("hub", "hal")
}

fn access_with_grant() -> Access {
    access().with_grant(Authority::QueueOwner { queue: "q".into() }, granted_owner())
}

/// The fixture's parties for one phrase of the seed's "Who" words. The request is
/// `pooled_request()` (obligee O, queue "q" declaring owner Q with candidates K and C, acceptor
/// A, accountable X); C promises; a precondition is addressed to W.
fn phrase(words: &str, queue_owner: &Party) -> Vec<Party> {
    match words {
        "Candidate obligor" | "Candidate" => vec![Cast::k(), Cast::c()],
        "queue owner" => vec![queue_owner.clone()],
        "Obligee" => vec![Cast::o()],
        "Whoever the precondition is addressed to" => vec![Cast::w()],
        "Obligor" | "obligor" => vec![Cast::c()],
        "Acceptor" => vec![Cast::a()],
        "Accountable party" => vec![Cast::x()],
        other => panic!("no fixture party for the seed's {other:?}"),
    }
}

/// The parties the seed's `who` names, once the commitment has an obligor (`promised`) or not.
fn named(who: &str, queue_owner: &Party, has_obligor: bool) -> BTreeSet<Party> {
    who.split(", or ")
        .flat_map(|w| w.split(" or "))
        .flat_map(|w| {
            // "Candidate or obligor": the candidates before a promise, the obligor after.
            match (w, has_obligor) {
                ("Candidate", true) => vec![],
                ("obligor", false) => vec![],
                _ => phrase(w, queue_owner),
            }
        })
        .collect()
}

fn budgeted() -> Request {
    Request {
        terms: Terms {
            budget: Some(Budget {
                amount: 10,
                unit: "h".into(),
            }),
            ..terms("t")
        },
        ..pooled_request()
    }
}

fn world(access: Access) -> World {
    let mut w = World::new();
    w.access = access;
    w.ok(&Cast::o(), req(budgeted()));
    w
}

/// A commitment in the situation the seed's row names, and (for "Open revoke request") the
/// revoke request open on it. Each is reached through records only.
fn situations(access: &Access) -> Vec<(String, World)> {
    let mut out = Vec::new();
    let w = world(access.clone());
    out.push(("requested".to_string(), w));

    let mut w = world(access.clone());
    w.ok(
        &Cast::c(),
        Operation::Counter {
            terms: Some(terms("t2")),
        },
    );
    out.push(("countered".into(), w));

    let mut w = world(access.clone());
    w.ok(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: Condition {
                description: "deposit".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
            deadline: Some(T0 + 10_000),
        },
    );
    out.push(("conditionally_promised".into(), w));

    let mut w = world(access.clone());
    w.ok(&Cast::c(), Operation::Promise);
    out.push(("promised".into(), w));

    let mut w = world(access.clone());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    out.push(("stated".into(), w));

    let mut w = world(access.clone());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), Operation::ReportConsumption { amount: 10 });
    out.push(("Budget exhausted".into(), w));
    out
}

/// One commitment per row of the seed's "Revoke requests" table, with that request open.
fn revokes(access: &Access) -> Vec<(String, World)> {
    let because = || "changed our minds".to_string();
    let mut out = Vec::new();
    let mut w = world(access.clone());
    w.ok(&Cast::o(), Operation::RevokeRequest { reason: because() });
    out.push(("revoke_request".to_string(), w));

    let mut w = world(access.clone());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), Operation::RevokePromise { reason: because() });
    out.push(("revoke_promise".into(), w));

    let mut w = world(access.clone());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    w.ok(&Cast::c(), Operation::RevokeStatement { reason: because() });
    out.push(("revoke_statement".into(), w));

    let mut w = world(access.clone());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    w.ok(&Cast::a(), accept_op());
    w.ok(
        &Cast::a(),
        Operation::RevokeAcceptance { reason: because() },
    );
    out.push(("revoke_acceptance".into(), w));
    out
}

/// The kernel's parties for the seed's row `label` ("Open revoke request" is
/// `open_revoke_request` on the wire).
fn kernel_row(w: &World, label: &str) -> Option<BTreeSet<Party>> {
    let wire = label.to_lowercase().replace(' ', "_");
    w.view()
        .whose_move
        .into_iter()
        .find(|m| m.row.wire_name() == wire)
        .map(|m| m.parties.into_iter().collect())
}

fn check_every_row(access: &Access, queue_owner: &Party) {
    let table = seed::whose_move();
    assert_eq!(table.len(), 7, "the seed's table has seven rows");
    let asked_of = seed::revoke_parties();
    let mut checked = 0;
    for (label, next) in &table {
        if next == "The other side" {
            for (kind, w) in revokes(access) {
                let (_, of) = &asked_of[&kind];
                let has_obligor = w.c().obligor.is_some();
                let want = named(of, queue_owner, has_obligor);
                assert_eq!(
                    kernel_row(&w, label),
                    Some(want),
                    "{label} ({kind}, asked of {of:?}): seed says {next:?}"
                );
                checked += 1;
            }
            continue;
        }
        let (_, w) = situations(access)
            .into_iter()
            .find(|(s, _)| s == label)
            .unwrap_or_else(|| panic!("no fixture for the seed's row {label:?}"));
        let want = named(next, queue_owner, w.c().obligor.is_some());
        assert_eq!(
            kernel_row(&w, label),
            Some(want),
            "{label}: seed says {next:?}"
        );
        checked += 1;
    }
    assert_eq!(
        checked,
        6 + 4,
        "every row, and every kind of revoke request"
    );
}

/// Every row of the seed's table, with the queue granted by Access to a party other than the
/// one it declares: "queue owner" is the grantee.
#[test]
fn every_row_names_the_seeds_party_with_access_granting_the_queue() {
    check_every_row(&access_with_grant(), &granted_owner());
}

/// Without a grant for the queue, the owner the queue declares is its owner.
#[test]
fn every_row_names_the_seeds_party_with_the_declared_owner() {
    check_every_row(&access(), &Cast::q());
}

/// The queue owner whose move it is is the one whose queue-owner operation `apply` accepts
/// (seed 000: "An operation is valid only if the author holds the role, the commitment's state
/// allows it, and Access authorizes it"): with the grant, the declared owner is refused.
#[test]
fn the_queue_owner_named_is_the_one_who_may_act() {
    let mut w = world(access_with_grant());
    let nominate = || Operation::Nominate {
        candidate: Some(Cast::n1()),
    };
    w.err(&Cast::q(), nominate(), RejectionCode::WrongRole);
    let named = kernel_row(&w, "requested").expect("the requested row");
    assert!(!named.contains(&Cast::q()));
    assert!(named.contains(&granted_owner()));
    w.ok(&granted_owner(), nominate());
}
