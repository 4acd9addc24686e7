//! The two-record handovers (delegate, assign), every row of the revoke table, and disputes
//! (seed 000, "Operations", "Revoke requests").

mod common;

use accord_kernel::*;
use common::*;

use RejectionCode as RC;

fn allow() -> Operation {
    Operation::Allow {
        reason: String::new(),
        reopening_commitment_id: String::new(),
    }
}

fn refuse() -> Operation {
    Operation::Refuse {
        reason: "no".into(),
    }
}

fn reject_op() -> Operation {
    Operation::Reject {
        reason: "broken".into(),
    }
}

// ---- delegate / assign --------------------------------------------------------------------------

#[test]
fn delegate_is_two_records_and_the_old_obligor_stays_until_acceptance() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    let offer = w.ok(
        &Cast::c(),
        Operation::DelegateOffer {
            to: Some(Cast::n1()),
            handover_note: "see wiki".into(),
        },
    );
    assert_eq!(w.c().obligor, Some(Cast::c()));
    assert!(w.view().pending_delegate.is_some());
    w.ok(
        &Cast::c(),
        Operation::Notice {
            notice_type: NoticeType::AtRisk,
            text: String::new(),
        },
    );
    w.err(
        &Cast::n1(),
        Operation::Notice {
            notice_type: NoticeType::AtRisk,
            text: String::new(),
        },
        RC::WrongRole,
    );
    w.err(
        &Cast::z(),
        Operation::DelegateAcceptance {
            offer_id: Some(offer),
        },
        RC::WrongRole,
    );
    w.err(
        &Cast::n1(),
        Operation::DelegateAcceptance {
            offer_id: Some(rid(999)),
        },
        RC::UnknownOffer,
    );
    w.err(
        &Cast::n1(),
        Operation::DelegateAcceptance { offer_id: None },
        RC::MissingField,
    );
    w.ok_with(
        &Cast::n1(),
        Operation::DelegateAcceptance {
            offer_id: Some(offer),
        },
        &[offer],
        &[],
    );
    assert_eq!(w.state(), Some(State::Promised));
    assert_eq!(w.c().obligor, Some(Cast::n1()));
    assert!(w.view().pending_delegate.is_none());
    w.err(&Cast::c(), state_op(&["r"]), RC::WrongRole);
    w.ok(&Cast::n1(), state_op(&["r"]));
    w.err(
        &Cast::n1(),
        Operation::DelegateOffer {
            to: Some(Cast::c()),
            handover_note: "n".into(),
        },
        RC::InvalidState,
    );
}

#[test]
fn assign_is_two_records_and_the_old_obligee_stays_until_acceptance() {
    let (mut w, _) = world_with(Request {
        acceptor: None,
        accountable: None,
        ..basic_request()
    });
    let offer = w.ok(
        &Cast::o(),
        Operation::AssignOffer {
            to: Some(Cast::n2()),
        },
    );
    assert_eq!(w.c().obligee, Cast::o());
    w.err(
        &Cast::n2(),
        Operation::Release {
            reason: String::new(),
        },
        RC::WrongRole,
    );
    w.err(
        &Cast::z(),
        Operation::AssignAcceptance {
            offer_id: Some(offer),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::n2(),
        Operation::AssignAcceptance {
            offer_id: Some(offer),
        },
    );
    assert_eq!(w.state(), Some(State::Requested));
    assert_eq!(w.view().obligee, Cast::n2());
    assert_eq!(
        w.view().acceptor,
        Cast::n2(),
        "a defaulted acceptor follows the obligee"
    );
    w.err(
        &Cast::o(),
        Operation::Release {
            reason: String::new(),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::n2(),
        Operation::Release {
            reason: String::new(),
        },
    );
    assert_eq!(w.state(), Some(State::Released));
}

// ---- revoke requests: every row, allow and refuse --------------------------------------------

#[test]
fn revoke_request_allowed_withdraws_refused_continues() {
    let (mut w, _) = world_with(basic_request());
    let rv = w.ok(
        &Cast::o(),
        Operation::RevokeRequest {
            reason: "not needed".into(),
        },
    );
    assert!(
        matches!(&w.effects[..], [Effect::Notify { to, about: Notification::RevokeRequested { kind: RevokeKind::Request }, .. }] if *to == vec![Cast::c()])
    );
    let v = w.view();
    assert_eq!(v.open_revokes.len(), 1);
    assert_eq!(v.whose_move[0].row, MoveRow::OpenRevokeRequest);
    assert_eq!(v.whose_move[0].parties, vec![Cast::c()]);
    w.err(
        &Cast::o(),
        Operation::RevokeRequest {
            reason: "again".into(),
        },
        RC::RevokePending,
    );
    w.err(&Cast::c(), allow(), RC::MissingBasis);
    w.err_with(&Cast::o(), allow(), &[rv], &[], RC::WrongRole);
    w.ok_with(&Cast::c(), refuse(), &[rv], &[]);
    assert_eq!(w.state(), Some(State::Requested));
    assert!(w.view().open_revokes.is_empty());
    w.err_with(&Cast::c(), allow(), &[rv], &[], RC::NoOpenRevoke);
    // After a promise, it is asked of the obligor; allowed -> withdrawn.
    w.ok(&Cast::c(), Operation::Promise);
    let rv = w.ok(
        &Cast::o(),
        Operation::RevokeRequest {
            reason: "not needed".into(),
        },
    );
    w.ok_with(&Cast::c(), allow(), &[rv], &[]);
    assert_eq!(w.state(), Some(State::Withdrawn));
    assert!(!w.view().counts_as_cancel);
}

#[test]
fn revoke_promise_allowed_is_withdrawn_not_a_cancel() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    let rv = w.ok(
        &Cast::c(),
        Operation::RevokePromise {
            reason: "overbooked".into(),
        },
    );
    assert_eq!(w.view().whose_move[0].parties, vec![Cast::o()]);
    w.ok_with(&Cast::o(), refuse(), &[rv], &[]);
    assert_eq!(w.state(), Some(State::Promised));
    let rv = w.ok(
        &Cast::c(),
        Operation::RevokePromise {
            reason: "overbooked".into(),
        },
    );
    w.err_with(&Cast::c(), allow(), &[rv], &[], RC::WrongRole);
    w.ok_with(&Cast::o(), allow(), &[rv], &[]);
    assert_eq!(w.state(), Some(State::Withdrawn));
    assert!(!w.view().counts_as_cancel);
    // Compare: a cancel counts.
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(
        &Cast::c(),
        Operation::Cancel {
            reason: CancelReason::Abandoned,
            text: String::new(),
        },
    );
    assert!(w.view().counts_as_cancel);
}

#[test]
fn revoke_statement_allowed_is_promised_refused_stays_stated() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    let rv = w.ok(
        &Cast::c(),
        Operation::RevokeStatement {
            reason: "wrong build".into(),
        },
    );
    assert_eq!(w.view().whose_move[0].parties, vec![Cast::a()]);
    w.ok_with(&Cast::a(), refuse(), &[rv], &[]);
    assert_eq!(w.state(), Some(State::Stated));
    let rv = w.ok(
        &Cast::c(),
        Operation::RevokeStatement {
            reason: "wrong build".into(),
        },
    );
    w.ok_with(&Cast::a(), allow(), &[rv], &[]);
    assert_eq!(w.state(), Some(State::Promised));
    assert!(w.c().items[WHOLE].statement.is_none());
}

#[test]
fn a_revoke_lapses_when_its_state_is_gone() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    w.ok(
        &Cast::c(),
        Operation::RevokeStatement {
            reason: "wrong build".into(),
        },
    );
    w.ok(&Cast::a(), reject_op());
    assert!(w.view().open_revokes.is_empty());
    w.ok(&Cast::c(), Operation::RevokePromise { reason: "x".into() });
}

#[test]
fn revoke_acceptance_allowed_keeps_accepted_and_starts_a_linked_reopening() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    w.ok(&Cast::a(), accept_op());
    let rv = w.ok(
        &Cast::a(),
        Operation::RevokeAcceptance {
            reason: "defect found".into(),
        },
    );
    let v = w.view();
    assert!(v.terminal);
    assert_eq!(v.category, Category::Closed);
    assert_eq!(v.whose_move[0].row, MoveRow::OpenRevokeRequest);
    assert_eq!(v.whose_move[0].parties, vec![Cast::c()]);
    w.err_with(&Cast::a(), allow(), &[rv], &[], RC::WrongRole);
    let al = w.ok_with(&Cast::c(), allow(), &[rv], &[]);
    assert_eq!(
        w.state(),
        Some(State::Accepted),
        "the terminal outcome stays"
    );
    let [Effect::StartReopening { link, commitment }] = &w.effects[..] else {
        panic!("expected a reopening, got {:?}", w.effects)
    };
    assert_eq!(link.commitment, "c-1");
    assert_eq!(link.revoke, rv);
    assert_eq!(link.allow, al);
    assert_eq!(w.view().reopened_by, vec![link.clone()]);
    let reopened = view(commitment, w.now, &w.access);
    assert_eq!(reopened.reopens.as_ref(), Some(link));
    assert_eq!(reopened.state, Some(State::Requested));
    assert_eq!(reopened.offered_to, Some(Cast::c()));
    assert_eq!(reopened.commitment, link.reopening);
    // The reopening takes records of its own.
    let r = Record {
        id: rid(77),
        author: Cast::c(),
        commitment: link.reopening.clone(),
        basis: vec![],
        items: vec![],
        op: Operation::Promise,
    };
    let (next, _) = apply(Some(commitment), &r, &w.access, w.now).unwrap();
    assert_eq!(next.state(), Some(State::Promised));
    // Replaying the original gives the same effect again.
    assert_eq!(w.replay(), *w.c());
}

#[test]
fn revoke_acceptance_refused_becomes_a_dispute_mark() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    w.ok(&Cast::a(), accept_op());
    let rv = w.ok(
        &Cast::a(),
        Operation::RevokeAcceptance {
            reason: "defect".into(),
        },
    );
    w.err_with(
        &Cast::c(),
        Operation::Refuse {
            reason: String::new(),
        },
        &[rv],
        &[],
        RC::MissingReason,
    );
    w.ok_with(&Cast::c(), refuse(), &[rv], &[]);
    let v = w.view();
    assert_eq!(v.state, Some(State::Accepted));
    assert_eq!(v.disputes.len(), 1);
    assert!(v.disputes[0].from_refusal);
    assert_eq!(v.disputes[0].disputed, rv);
}

#[test]
fn dispute_marks_a_reject_or_an_open_revoke_acceptance() {
    let (mut w, req_id) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(&Cast::c(), state_op(&["r"]));
    let rj = w.ok(&Cast::a(), reject_op());
    let dispute = |id, r: &str| Operation::Dispute {
        disputed_record: Some(id),
        reason: r.into(),
    };
    w.err(&Cast::c(), dispute(req_id, "x"), RC::NotDisputable);
    w.err(&Cast::c(), dispute(rj, ""), RC::MissingReason);
    w.err(
        &Cast::c(),
        Operation::Dispute {
            disputed_record: None,
            reason: "x".into(),
        },
        RC::MissingField,
    );
    w.err(&Cast::o(), dispute(rj, "x"), RC::WrongRole);
    w.ok(&Cast::c(), dispute(rj, "it works"));
    assert_eq!(w.state(), Some(State::Promised), "no state change");
    assert_eq!(w.view().disputes.len(), 1);
    w.err(&Cast::c(), dispute(rj, "again"), RC::AlreadyDisputed);
    // An open revoke_acceptance can be disputed too.
    w.ok(&Cast::c(), state_op(&["r2"]));
    w.ok(&Cast::a(), accept_op());
    let rv = w.ok(
        &Cast::a(),
        Operation::RevokeAcceptance {
            reason: "defect".into(),
        },
    );
    w.ok(&Cast::c(), dispute(rv, "no defect"));
    assert_eq!(w.view().disputes.len(), 2);
    assert_eq!(w.state(), Some(State::Accepted));
}
