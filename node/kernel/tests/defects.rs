//! The kernel defects of issue 11 item 7, each with a test that fails on the code before the fix.

mod common;

use std::collections::HashMap;

use accord_kernel::*;
use common::*;

fn operator() -> Party {
    p("node", "operator")
}

fn admission(peer_record: u64) -> Operation {
    Operation::Admission {
        record_id: Some(rid(peer_record)),
        peer: "globex".into(),
        outcome: AdmissionOutcome::Admitted,
        code: String::new(),
        closes: None,
        at: 0,
    }
}

/// Seed 000, "Federation admission" names no role for the admission declaration ("Access
/// decides"): the node's operator deciding a quarantined record writes an applied admission.
#[test]
fn an_operator_admission_is_applied() {
    let (mut w, _) = world_with(basic_request());
    w.access = w.access.clone().with_members("node", ["operator"]);
    let id = w.ok(&operator(), admission(900));
    let mark = w.c().admissions.last().expect("admission recorded");
    assert_eq!(mark.record, id);
    assert_eq!(mark.peer_record, rid(900));
    assert_eq!(mark.outcome, AdmissionOutcome::Admitted);
    // A party of another organisation does not declare this node's admissions.
    w.err(&Cast::o(), admission(901), RejectionCode::WrongRole);
    // One Access does not let act is still not authorized.
    w.err(
        &p("node", "mallory"),
        admission(902),
        RejectionCode::NotAuthorized,
    );
}

/// An admission about a record whose commitment this node does not know (a quarantined record
/// whose request never arrived) is applied, with no derived state.
#[test]
fn an_admission_about_an_unknown_commitment_is_applied() {
    let access = access().with_members("node", ["operator"]);
    let dir: HashMap<String, Commitment> = HashMap::new();
    for author in [Cast::s(), operator()] {
        let r = Record {
            id: rid(7),
            author,
            commitment: "federation:globex".into(),
            basis: vec![],
            items: vec![],
            op: admission(900),
        };
        let applied = apply_with(&dir, &r, &access, T0).expect("applied");
        assert_eq!(applied.next, None);
        assert!(applied.effects.is_empty());
    }
    // Its content is still checked, and only local parties write it.
    let mut bad = Record {
        id: rid(8),
        author: Cast::s(),
        commitment: "federation:globex".into(),
        basis: vec![],
        items: vec![],
        op: Operation::Admission {
            record_id: None,
            peer: "globex".into(),
            outcome: AdmissionOutcome::Admitted,
            code: String::new(),
            closes: None,
            at: 0,
        },
    };
    assert_eq!(
        apply_with(&dir, &bad, &access, T0).unwrap_err().code,
        RejectionCode::MissingField
    );
    bad.op = admission(900);
    bad.author = Cast::o();
    assert_eq!(
        apply_with(&dir, &bad, &access, T0).unwrap_err().code,
        RejectionCode::WrongRole
    );
    // Any other operation on an unknown commitment stays unknown_commitment.
    bad.op = Operation::Promise;
    assert_eq!(
        apply_with(&dir, &bad, &access, T0).unwrap_err().code,
        RejectionCode::UnknownCommitment
    );
}

fn accepted_with_open_revoke_acceptance() -> (World, RecordId) {
    let mut w = promised();
    w.ok(&Cast::c(), state_op(&["delivery"]));
    w.ok(&Cast::a(), accept_op());
    let rv = w.ok(
        &Cast::a(),
        Operation::RevokeAcceptance {
            reason: "broken".into(),
        },
    );
    (w, rv)
}

/// An allowed revoke_acceptance naming a reopening id that is taken is a recorded rejection
/// (it used to overwrite that commitment in the projection).
#[test]
fn a_taken_reopening_id_is_rejected() {
    let (w, rv) = accepted_with_open_revoke_acceptance();
    let (other, _) = world_with(basic_request());
    let mut taken = other.c().clone();
    taken.id = "c-taken".into();
    let mut dir: HashMap<String, Commitment> = HashMap::new();
    dir.insert(w.c().id.clone(), w.c().clone());
    dir.insert(taken.id.clone(), taken.clone());
    let allow = |id: &str, n: u64| Record {
        id: rid(n),
        author: Cast::c(),
        commitment: w.c().id.clone(),
        basis: vec![rv],
        items: vec![],
        op: Operation::Allow {
            reason: String::new(),
            reopening_commitment_id: id.into(),
        },
    };
    let err = apply_with(&dir, &allow("c-taken", 900), &w.access, w.now).unwrap_err();
    assert_eq!(err.code, RejectionCode::CommitmentExists);
    assert_eq!(dir["c-taken"], taken, "the taken commitment is unchanged");
    // A free id starts the reopening.
    let ok = apply_with(&dir, &allow("c-free", 901), &w.access, w.now).expect("allowed");
    let next = ok.next.expect("state");
    assert_eq!(next.state(), Some(State::Accepted));
    assert!(matches!(
        &ok.effects[..],
        [Effect::StartReopening { link, commitment }]
            if link.reopening == "c-free" && commitment.state() == Some(State::Requested)
    ));
}

/// A claim's PromiseProduced carries what the node needs to write the promise record; a
/// notification names its commitment and record.
#[test]
fn effects_carry_what_the_node_needs() {
    let (mut w, req_id) = world_with(pooled_request());
    let claim = w.ok(&Cast::k(), Operation::Claim);
    assert_eq!(
        w.effects,
        vec![Effect::PromiseProduced {
            commitment: "c-1".into(),
            claim,
            obligor: Cast::k(),
            obligee: Cast::o(),
            items: vec![],
            terms_version: req_id,
        }]
    );
    let notice = w.ok(
        &Cast::k(),
        Operation::Notice {
            notice_type: NoticeType::AtRisk,
            text: "late".into(),
        },
    );
    match &w.effects[..] {
        [
            Effect::Notify {
                commitment,
                record,
                to,
                ..
            },
        ] => {
            assert_eq!(commitment, "c-1");
            assert_eq!(*record, notice);
            assert!(to.contains(&Cast::o()) && !to.contains(&Cast::k()));
        }
        other => panic!("unexpected effects {other:?}"),
    }
}

/// The view carries every party an open revoke request is asked of (it kept only the first).
#[test]
fn an_open_revoke_lists_all_its_parties() {
    let (mut w, _) = world_with(pooled_request());
    let rv = w.ok(
        &Cast::o(),
        Operation::RevokeRequest {
            reason: "no longer needed".into(),
        },
    );
    let v = w.view();
    assert_eq!(v.revokes.len(), 1);
    assert_eq!(v.revokes[0].revoke.record, rv);
    assert_eq!(v.revokes[0].asked_of, vec![Cast::k(), Cast::c()]);
    assert_eq!(v.candidates, vec![Cast::k(), Cast::c()]);
    assert_eq!(v.accountable, Cast::x());
    assert_eq!(v.principal, Some(Cast::pr()));
}

/// The view carries lease, budget and consumption, counter version, pending offers.
#[test]
fn the_view_carries_lease_budget_counter_and_offers() {
    let mut r = pooled_request();
    r.terms.budget = Some(Budget {
        amount: 10,
        unit: "h".into(),
    });
    let (mut w, _) = world_with(r);
    w.ok(&Cast::k(), Operation::Claim);
    let v = w.view();
    assert_eq!(v.lease_until, Some(T0 + 1_000));
    assert_eq!(v.budget.as_ref().map(|b| b.amount), Some(10));
    w.ok(&Cast::k(), Operation::ReportConsumption { amount: 10 });
    let v = w.view();
    assert_eq!(v.consumed, 10);
    assert!(v.budget_exhausted);
    assert!(
        v.whose_move
            .iter()
            .any(|m| m.row == MoveRow::BudgetExhausted && m.parties == vec![Cast::x()])
    );
    let offer = w.ok(
        &Cast::k(),
        Operation::DelegateOffer {
            to: Some(Cast::n1()),
            handover_note: "notes".into(),
        },
    );
    let v = w.view();
    assert_eq!(v.pending_delegate.as_ref().map(|o| o.record), Some(offer));
    assert_eq!(
        v.pending_delegate.as_ref().map(|o| o.to.clone()),
        Some(Cast::n1())
    );
}

/// The promise record a claim produced (seed 000, "Assignment": claim — "a promise record is
/// produced"): the claimant writes `promise` resting on the claim; it is recorded and changes no
/// state. Without the claim in basis, or by anyone else, the ordinary rules apply.
#[test]
fn the_produced_promise_rests_on_the_claim_and_changes_nothing() {
    let (mut w, _) = world_with(pooled_request());
    let claim = w.ok(&Cast::k(), Operation::Claim);
    let before = w.c().clone();
    // Not resting on the claim, it is an ordinary promise: not allowed from promised.
    w.err(&Cast::k(), Operation::Promise, RejectionCode::InvalidState);
    w.err(&Cast::s(), Operation::Promise, RejectionCode::InvalidState);
    let p = w.ok_with(&Cast::k(), Operation::Promise, &[claim], &[]);
    let after = w.c();
    assert_eq!(after.state(), Some(State::Promised));
    assert_eq!(after.obligor, before.obligor);
    assert_eq!(
        after.claim.as_ref().map(|c| (&c.by, c.record, c.promise)),
        before.claim.as_ref().map(|c| (&c.by, c.record, Some(p))),
        "the claim is the same, its promise recorded"
    );
    assert_eq!(after.history.len(), before.history.len() + 1);
    assert!(w.effects.is_empty(), "{:?}", w.effects);
    // A party's own promise on a promised commitment is still invalid.
    w.err(&Cast::k(), Operation::Promise, RejectionCode::InvalidState);
}
