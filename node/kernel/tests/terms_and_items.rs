//! Line items (per-item state, `mixed`), counters, amendments and required contents
//! (seed 000, "Commitment", "Operations", "Reason codes").

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
            participants: vec![],
        },
        RC::MissingSupersedes,
    );
    w.err(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(o1),
            terms: Some(terms("v5")),
            participants: vec![],
        },
        RC::StaleVersion,
    );
    w.err(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(c2),
            terms: Some(terms_items("v5", &["new"])),
            participants: vec![],
        },
        RC::ItemSetChanged,
    );
    let a1 = w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(c2),
            terms: Some(terms("v5")),
            participants: vec![],
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
        ..Condition::default()
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
        ..Condition::default()
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
        matches!(&w.effects[..], [Effect::Notify { about: Notification::Notice { .. }, to, .. }] if to.contains(&Cast::o()))
    );
    w.ok(
        &Cast::d(),
        Operation::AdministrativeClose {
            reason: "merger".into(),
        },
    );
    assert_eq!(w.state(), Some(State::ClosedAdministratively));
    assert!(
        matches!(&w.effects[..], [Effect::Notify { about: Notification::AdministrativelyClosed { .. }, to, .. }] if to.contains(&Cast::c()) && to.contains(&Cast::o()))
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
