//! Scenarios over real record sequences: line items, the two-record handovers, every revoke
//! row, whose move, the assignment operations, counters and amendments.

mod common;

use accord_kernel::*;
use common::*;

use RejectionCode as RC;

fn items_request() -> Request {
    Request {
        terms: terms_items("parts", &["a", "b", "c"]),
        ..basic_request()
    }
}

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

// ---- line items ---------------------------------------------------------------------------

#[test]
fn line_items_derive_state_per_item_and_summarise_as_mixed() {
    let (mut w, _) = world_with(items_request());
    assert_eq!(w.view().summary, "requested");
    w.ok_with(&Cast::c(), Operation::Promise, &[], &["a", "b"]);
    w.ok_with(
        &Cast::c(),
        Operation::Decline {
            reason: DeclineReason::OutOfScope,
            text: String::new(),
        },
        &[],
        &["c"],
    );
    let v = w.view();
    assert_eq!(v.summary, "mixed"); // a and b promised, c declined
    assert_eq!(w.state(), None);
    assert_eq!(v.state, None);
    assert_eq!(v.category, Category::Ready);
    assert_eq!(
        v.items
            .iter()
            .map(|i| (i.id.as_str(), i.state))
            .collect::<Vec<_>>(),
        vec![
            ("a", State::Promised),
            ("b", State::Promised),
            ("c", State::Declined)
        ]
    );
    assert!(!v.terminal);
    // Empty items = every open item: states a and b.
    w.ok_with(&Cast::c(), state_op(&["r"]), &[], &["a"]);
    let v = w.view();
    assert_eq!(v.summary, "mixed");
    assert_eq!(v.category, Category::AwaitingAcceptance);
    assert!(State::from_wire_name("mixed").is_none());
    w.err_with(&Cast::a(), accept_op(), &[], &["b"], RC::InvalidState);
    w.err_with(&Cast::a(), accept_op(), &[], &["zz"], RC::UnknownItem);
    w.err_with(&Cast::a(), accept_op(), &[], &["a", "a"], RC::DuplicateItem);
    w.err_with(&Cast::a(), accept_op(), &[], &[], RC::InvalidState); // a stated, b promised
    w.ok_with(&Cast::a(), accept_op(), &[], &["a"]);
    w.err_with(
        &Cast::c(),
        Operation::Release {
            reason: String::new(),
        },
        &[],
        &["b"],
        RC::WrongRole,
    );
    w.err_with(
        &Cast::o(),
        Operation::Release {
            reason: String::new(),
        },
        &[],
        &["a"],
        RC::TerminalState,
    );
    w.ok(
        &Cast::o(),
        Operation::Release {
            reason: String::new(),
        },
    ); // the open one: b
    let v = w.view();
    assert_eq!(v.summary, "mixed");
    assert!(v.terminal);
    assert_eq!(v.category, Category::Closed);
    w.err(
        &Cast::o(),
        Operation::Release {
            reason: String::new(),
        },
        RC::TerminalState,
    );
    assert_eq!(w.replay(), *w.c());
}

#[test]
fn items_on_a_single_item_commitment_are_unknown() {
    let (mut w, _) = world_with(basic_request());
    w.err_with(&Cast::c(), Operation::Promise, &[], &["a"], RC::UnknownItem);
}

// ---- counter / accept_counter / amend ---------------------------------------------------------

#[test]
fn counter_rounds_and_the_current_counter_digest() {
    let (mut w, req_id) = world_with(basic_request());
    w.err(
        &Cast::o(),
        Operation::Counter {
            terms: Some(terms("x")),
        },
        RC::WrongRole,
    );
    w.err(
        &Cast::c(),
        Operation::Counter { terms: None },
        RC::MissingTerms,
    );
    w.err(
        &Cast::c(),
        Operation::Counter {
            terms: Some(terms("build it")),
        },
        RC::UnchangedTerms,
    );
    let c1 = w.ok(
        &Cast::c(),
        Operation::Counter {
            terms: Some(terms("v2")),
        },
    );
    assert_eq!(w.state(), Some(State::Countered));
    assert_eq!(w.view().whose_move[0].row, MoveRow::Countered);
    // The obligee's counter: back to requested with a new offer version.
    let o1 = w.ok(
        &Cast::o(),
        Operation::Counter {
            terms: Some(terms("v3")),
        },
    );
    assert_eq!(w.state(), Some(State::Requested));
    assert_eq!(w.c().terms_version, o1);
    assert_eq!(w.c().version, 2);
    let c2 = w.ok(
        &Cast::c(),
        Operation::Counter {
            terms: Some(terms("v4")),
        },
    );
    w.err(
        &Cast::o(),
        Operation::AcceptCounter {
            counter_digest: None,
        },
        RC::MissingDigest,
    );
    w.err(
        &Cast::o(),
        Operation::AcceptCounter {
            counter_digest: Some(c1),
        },
        RC::StaleCounterDigest,
    );
    w.err(
        &Cast::o(),
        Operation::AcceptCounter {
            counter_digest: Some(req_id),
        },
        RC::StaleCounterDigest,
    );
    w.err(
        &Cast::c(),
        Operation::AcceptCounter {
            counter_digest: Some(c2),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::o(),
        Operation::AcceptCounter {
            counter_digest: Some(c2),
        },
    );
    assert_eq!(w.state(), Some(State::Promised));
    assert_eq!(w.c().terms.title, "v4");
    assert_eq!(w.c().terms_version, c2);
    assert_eq!(w.c().obligor, Some(Cast::c()));
    // amend supersedes the current version only.
    w.err(
        &Cast::o(),
        Operation::Amend {
            supersedes: None,
            terms: Some(terms("v5")),
        },
        RC::MissingSupersedes,
    );
    w.err(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(o1),
            terms: Some(terms("v5")),
        },
        RC::StaleVersion,
    );
    w.err(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(c2),
            terms: Some(terms_items("v5", &["new"])),
        },
        RC::ItemSetChanged,
    );
    let a1 = w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(c2),
            terms: Some(terms("v5")),
        },
    );
    assert_eq!(w.view().terms_version, a1);
    assert_eq!(w.view().version, 4);
    assert_eq!(w.state(), Some(State::Promised));
}

#[test]
fn required_contents() {
    let (mut w, _) = world_with(basic_request());
    w.err(
        &Cast::c(),
        Operation::Decline {
            reason: DeclineReason::Unspecified,
            text: String::new(),
        },
        RC::MissingReason,
    );
    w.err(
        &Cast::c(),
        Operation::Decline {
            reason: DeclineReason::from_wire(42),
            text: String::new(),
        },
        RC::UnknownReasonCode,
    );
    let no_cond = Condition {
        description: String::new(),
        addressed_to: None,
    };
    w.err(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: no_cond,
            deadline: Some(T0 + 5),
        },
        RC::MissingCondition,
    );
    let cond = Condition {
        description: "x".into(),
        addressed_to: Some(Cast::w()),
    };
    w.err(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond.clone(),
            deadline: None,
        },
        RC::MissingDeadline,
    );
    w.err(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond,
            deadline: Some(T0),
        },
        RC::InvalidDeadline,
    );
    w.ok(&Cast::c(), Operation::Promise);
    w.err(&Cast::c(), state_op(&[]), RC::MissingFulfillmentRefs);
    w.err(&Cast::c(), state_op(&[" "]), RC::MissingFulfillmentRefs);
    w.err(
        &Cast::c(),
        Operation::Cancel {
            reason: CancelReason::Unspecified,
            text: String::new(),
        },
        RC::MissingReason,
    );
    w.err(
        &Cast::c(),
        Operation::Cancel {
            reason: CancelReason::Unknown(9),
            text: String::new(),
        },
        RC::UnknownReasonCode,
    );
    w.err(
        &Cast::c(),
        Operation::Notice {
            notice_type: NoticeType::Unspecified,
            text: String::new(),
        },
        RC::MissingNoticeType,
    );
    w.err(
        &Cast::c(),
        Operation::Notice {
            notice_type: NoticeType::from_wire(7),
            text: String::new(),
        },
        RC::UnknownNoticeType,
    );
    w.err(
        &Cast::o(),
        Operation::DeclareObsolete {
            parent_ref: String::new(),
        },
        RC::MissingParentRef,
    );
    w.err(
        &Cast::d(),
        Operation::AdministrativeClose {
            reason: String::new(),
        },
        RC::MissingReason,
    );
    w.err(
        &Cast::c(),
        Operation::DelegateOffer {
            to: Some(Cast::n1()),
            handover_note: String::new(),
        },
        RC::MissingHandoverNote,
    );
    w.err(
        &Cast::c(),
        Operation::RevokePromise {
            reason: String::new(),
        },
        RC::MissingReason,
    );
    w.err(
        &Cast::o(),
        Operation::Defer {
            reason: String::new(),
            return_at: None,
            return_event: String::new(),
        },
        RC::MissingReason,
    );
    w.err(
        &Cast::u(),
        Operation::Release {
            reason: String::new(),
        },
        RC::NotAuthorized,
    );
    w.ok(&Cast::c(), state_op(&["r"]));
    w.err(
        &Cast::a(),
        Operation::Reject {
            reason: String::new(),
        },
        RC::MissingReason,
    );
    // Notices: no state change, attention, at_risk flag, notification.
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w.ok(
        &Cast::c(),
        Operation::Notice {
            notice_type: NoticeType::AtRisk,
            text: "late parts".into(),
        },
    );
    assert_eq!(w.state(), Some(State::Promised));
    assert!(w.view().flags.contains(&Flag::AtRisk));
    assert_eq!(w.view().attention.len(), 1);
    assert!(
        matches!(&w.effects[..], [Effect::Notify { about: Notification::Notice { .. }, to }] if to.contains(&Cast::o()))
    );
    w.ok(
        &Cast::d(),
        Operation::AdministrativeClose {
            reason: "merger".into(),
        },
    );
    assert_eq!(w.state(), Some(State::ClosedAdministratively));
    assert!(
        matches!(&w.effects[..], [Effect::Notify { about: Notification::AdministrativelyClosed { .. }, to }] if to.contains(&Cast::c()) && to.contains(&Cast::o()))
    );
}

#[test]
fn overdue_is_a_flag_not_a_state() {
    let (mut w, _) = world_with(Request {
        terms: Terms {
            due: Some(T0 + 10),
            ..terms("t")
        },
        ..basic_request()
    });
    w.ok(&Cast::c(), Operation::Promise);
    w.now = T0 + 11;
    let v = w.view();
    assert!(v.flags.contains(&Flag::Overdue));
    assert_eq!(v.state, Some(State::Promised));
    assert_eq!(v.category, Category::Ready);
    assert!(due_work(w.c(), w.now).is_empty());
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
        matches!(&w.effects[..], [Effect::Notify { to, about: Notification::RevokeRequested { kind: RevokeKind::Request } }] if *to == vec![Cast::c()])
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
    let reopened = view(commitment, w.now);
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

// ---- whose move ----------------------------------------------------------------------------------

fn rows(w: &World) -> Vec<(MoveRow, Vec<Party>)> {
    w.view()
        .whose_move
        .into_iter()
        .map(|m| (m.row, m.parties))
        .collect()
}

#[test]
fn whose_move_rows() {
    let budgeted = |t: &str| Terms {
        budget: Some(Budget {
            amount: 10,
            unit: "h".into(),
        }),
        ..terms(t)
    };
    let (mut w, _) = world_with(Request {
        terms: budgeted("t"),
        ..pooled_request()
    });
    assert_eq!(
        rows(&w),
        vec![(MoveRow::Requested, vec![Cast::k(), Cast::c(), Cast::q()])]
    );
    w.ok(
        &Cast::c(),
        Operation::Counter {
            terms: Some(budgeted("t2")),
        },
    );
    assert_eq!(rows(&w), vec![(MoveRow::Countered, vec![Cast::o()])]);
    w.ok(
        &Cast::o(),
        Operation::Counter {
            terms: Some(budgeted("t3")),
        },
    );
    let cond = Condition {
        description: "deposit".into(),
        addressed_to: Some(Cast::w()),
    };
    let pc = w.ok(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond,
            deadline: Some(T0 + 10_000),
        },
    );
    assert_eq!(
        rows(&w),
        vec![(MoveRow::ConditionallyPromised, vec![Cast::w()])]
    );
    assert_eq!(w.view().category, Category::Waiting);
    w.err_with(
        &Cast::c(),
        Operation::SatisfyCondition,
        &[pc],
        &[],
        RC::WrongRole,
    );
    w.err_with(
        &Cast::w(),
        Operation::SatisfyCondition,
        &[],
        &[],
        RC::NoOpenCondition,
    );
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[pc], &[]);
    assert_eq!(rows(&w), vec![(MoveRow::Promised, vec![Cast::c()])]);
    w.ok(&Cast::c(), Operation::ReportConsumption { amount: 4 });
    w.ok(&Cast::e(), Operation::ReportConsumption { amount: 6 });
    assert!(w.view().budget_exhausted);
    assert_eq!(
        rows(&w),
        vec![
            (MoveRow::BudgetExhausted, vec![Cast::x()]),
            (MoveRow::Promised, vec![Cast::c()])
        ]
    );
    w.ok(&Cast::c(), state_op(&["r"]));
    assert_eq!(rows(&w)[1], (MoveRow::Stated, vec![Cast::a()]));
    w.ok(&Cast::a(), accept_op());
    assert!(rows(&w).is_empty());
}

#[test]
fn withdrawing_the_precondition_makes_the_promise_unconditional() {
    let (mut w, _) = world_with(basic_request());
    let cond = Condition {
        description: "deposit".into(),
        addressed_to: Some(Cast::w()),
    };
    let pc = w.ok(
        &Cast::c(),
        Operation::PromiseConditional {
            condition: cond,
            deadline: Some(T0 + 10),
        },
    );
    w.err_with(
        &Cast::w(),
        Operation::WithdrawCondition,
        &[pc],
        &[],
        RC::WrongRole,
    );
    w.ok_with(&Cast::c(), Operation::WithdrawCondition, &[pc], &[]);
    assert_eq!(w.state(), Some(State::Promised));
    w.now = T0 + 100;
    assert!(due_work(w.c(), w.now).is_empty(), "no longer expirable");
}

#[test]
fn conditions_make_the_category_waiting() {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    let cd = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "site access".into(),
                addressed_to: Some(Cast::w()),
            },
        },
    );
    assert_eq!(w.view().category, Category::Waiting);
    w.ok_with(&Cast::o(), Operation::WithdrawCondition, &[cd], &[]);
    assert_eq!(w.view().category, Category::Ready);
    w.ok(
        &Cast::e(),
        Operation::ActedUpon {
            record_id: Some(cd),
            act: "started".into(),
        },
    );
    assert_eq!(w.view().category, Category::Active);
}

// ---- assignment ----------------------------------------------------------------------------------

#[test]
fn claim_and_unclaim() {
    let (mut w, _) = world_with(pooled_request());
    assert_eq!(w.view().category, Category::Triage);
    w.err(&Cast::z(), Operation::Claim, RC::WrongRole);
    w.ok(&Cast::k(), Operation::Claim);
    assert_eq!(
        (w.state(), w.view().assignment),
        (Some(State::Promised), Assignment::Held)
    );
    assert_eq!(w.view().category, Category::Ready);
    w.err(
        &Cast::c(),
        Operation::Unclaim {
            reason: String::new(),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::k(),
        Operation::Unclaim {
            reason: "busy".into(),
        },
    );
    assert_eq!(
        (w.state(), w.view().assignment),
        (Some(State::Requested), Assignment::Pooled)
    );
    assert!(!w.view().terminal, "an unclaim is not a release");
    // A party who promised directly did not claim: it cannot unclaim.
    w.ok(&Cast::c(), Operation::Promise);
    w.err(
        &Cast::c(),
        Operation::Unclaim {
            reason: String::new(),
        },
        RC::WrongRole,
    );
    w.err(&Cast::k(), Operation::Claim, RC::InvalidState);
}

#[test]
fn forward_nominate_offer_reassign() {
    let (mut w, _) = world_with(pooled_request());
    w.err(&Cast::k(), Operation::Forward { to: None }, RC::WrongRole);
    w.err(
        &Cast::q(),
        Operation::Forward { to: None },
        RC::MissingField,
    );
    let q2 = Queue {
        name: "q2".into(),
        owner: Some(Cast::q()),
        candidates: vec![Cast::z()],
        ..Queue::default()
    };
    w.ok(&Cast::q(), Operation::Forward { to: Some(q2) });
    assert_eq!(w.view().forward_count, 1);
    assert_eq!(w.view().assignment, Assignment::Pooled);
    assert_eq!(w.state(), Some(State::Requested));
    w.err(&Cast::k(), Operation::Claim, RC::WrongRole);
    w.ok(
        &Cast::x(),
        Operation::Nominate {
            candidate: Some(Cast::n1()),
        },
    );
    w.ok(
        &Cast::o(),
        Operation::Nominate {
            candidate: Some(Cast::n2()),
        },
    );
    assert_eq!(w.view().nominees, vec![Cast::n1(), Cast::n2()]);
    w.err(
        &Cast::z(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::q(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
    );
    assert_eq!(w.view().assignment, Assignment::Offered);
    w.ok(
        &Cast::x(),
        Operation::Reassign {
            to: Some(Cast::n2()),
        },
    );
    assert_eq!(w.view().offered_to, Some(Cast::n2()));
    w.ok(&Cast::n2(), Operation::Promise);
    assert_eq!(w.c().obligor, Some(Cast::n2()));
    // Reassigning a held commitment opens an offer; the obligation moves only through delegate.
    let ra = w.ok(
        &Cast::q(),
        Operation::Reassign {
            to: Some(Cast::n1()),
        },
    );
    assert_eq!(w.c().obligor, Some(Cast::n2()));
    w.ok_with(
        &Cast::n1(),
        Operation::DelegateAcceptance { offer_id: Some(ra) },
        &[ra],
        &[],
    );
    assert_eq!(w.c().obligor, Some(Cast::n1()));
}

#[test]
fn failed_to_assign() {
    let mut r = pooled_request();
    r.queue.as_mut().unwrap().start_deadline = Some(T0 + 100);
    let (mut w, _) = world_with(r);
    assert_eq!(w.view().assignment, Assignment::Pooled);
    w.now = T0 + 100;
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    w.ok(&Cast::k(), Operation::Claim);
    assert_eq!(w.view().assignment, Assignment::Held);
    // No candidate at all.
    let (w, _) = world_with(Request {
        candidate: None,
        ..basic_request()
    });
    assert_eq!(w.view().assignment, Assignment::FailedToAssign);
    let (w, _) = world_with(basic_request());
    assert_eq!(w.view().assignment, Assignment::Offered);
}

#[test]
fn queue_ownership_from_access() {
    let (mut w, _) = world_with(pooled_request());
    w.access = w
        .access
        .clone()
        .with_grant(Authority::QueueOwner { queue: "q".into() }, Cast::z());
    w.err(
        &Cast::q(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
        RC::WrongRole,
    );
    w.ok(
        &Cast::z(),
        Operation::Offer {
            to: Some(Cast::n1()),
        },
    );
}

#[test]
fn principal_declares_obsolete() {
    let (mut w, _) = world_with(Request {
        principal: None,
        ..basic_request()
    });
    w.err(
        &Cast::pr(),
        Operation::DeclareObsolete {
            parent_ref: "aim".into(),
        },
        RC::WrongRole,
    );
    w.access = w
        .access
        .clone()
        .with_grant(Authority::Principal, Cast::pr());
    w.ok(
        &Cast::pr(),
        Operation::DeclareObsolete {
            parent_ref: "aim".into(),
        },
    );
    assert_eq!(w.state(), Some(State::Obsolete));
}

#[test]
fn existence_and_duplicates() {
    let (mut w, req_id) = world_with(basic_request());
    let r = w.record(&Cast::c(), Operation::Promise, &[], &[]);
    let dup = Record {
        id: req_id,
        ..r.clone()
    };
    assert_eq!(w.apply_record(dup).unwrap_err().code, RC::DuplicateRecord);
    let other = Record {
        commitment: "c-2".into(),
        ..r
    };
    assert_eq!(w.apply_record(other).unwrap_err().code, RC::WrongCommitment);
    let mut w2 = World::new();
    w2.err(
        &Cast::o(),
        req(Request {
            terms: terms(""),
            ..basic_request()
        }),
        RC::MissingField,
    );
    w2.err(&Cast::u(), req(basic_request()), RC::NotAuthorized);
    w2.err(
        &Cast::z(),
        req(Request {
            obligee: Some(Cast::o()),
            ..basic_request()
        }),
        RC::WrongRole,
    );
    w2.err(
        &Cast::o(),
        req(Request {
            terms: terms_items("t", &["a", "a"]),
            ..basic_request()
        }),
        RC::DuplicateItem,
    );
}

#[test]
fn serde_round_trip_of_state_and_view() {
    // The derive must exist for the node's projections; the round trip itself is covered by
    // the node with its own serializer. Here: the wire names used by serde are the seed's.
    fn assert_serde<T: serde::Serialize + serde::de::DeserializeOwned>() {}
    assert_serde::<Commitment>();
    assert_serde::<View>();
    assert_serde::<Access>();
    assert_serde::<Record>();
    assert_serde::<Effect>();
}
