//! Conditions and gates (seed 000, "Conditions and gates"): answers, kinds, deadlines and the
//! binding of an answer to the content it answered.

mod common;

use accord_kernel::*;
use common::*;

fn gate_of(w: &World, record: RecordId) -> accord_kernel::view::GateView {
    w.view()
        .gates
        .into_iter()
        .find(|g| g.record == record)
        .expect("gate in view")
}

fn approval(w: &mut World, participants: &[Party]) -> RecordId {
    w.ok(
        &Cast::o(),
        gate(GateKind::Approval, participants, rule(AggregationRule::All)),
    )
}

/// Seed 000: "Answer | Counts as acceptance?": Accept yes; Reject, Closed without an answer,
/// Timed out no.
#[test]
fn only_accept_counts_as_acceptance() {
    #[rustfmt::skip]
    let rows: &[(&str, Option<GateAnswer>, bool, GateStatus)] = &[
        ("accept", Some(GateAnswer::Accept), false, GateStatus::Satisfied),
        ("reject", Some(GateAnswer::Reject), false, GateStatus::Unsatisfiable),
        ("closed without an answer", Some(GateAnswer::ClosedWithoutAnswer), false, GateStatus::Unsatisfiable),
        ("timed out", None, true, GateStatus::Unsatisfiable),
    ];
    for (text, ans, time_out, want) in rows {
        let mut w = promised();
        let g = w.ok(
            &Cast::o(),
            Operation::OpenCondition {
                condition: Condition {
                    description: "sign-off".into(),
                    addressed_to: Some(Cast::w()),
                    kind: GateKind::Approval,
                    deadline: Some(T0 + 100),
                    ..Condition::default()
                },
            },
        );
        assert_eq!(w.view().category, Category::Waiting, "{text}");
        if let Some(a) = ans {
            let v = w.c().terms_version;
            w.ok_with(&Cast::w(), answer(*a, v), &[g], &[]);
        }
        if *time_out {
            w.now = T0 + 100;
        }
        let gv = gate_of(&w, g);
        assert_eq!(gv.status, *want, "{text}");
        let counted = gv.status == GateStatus::Satisfied;
        assert_eq!(counted, *text == "accept", "{text}");
        // Only a satisfied gate stops waiting.
        let waiting = w.view().category == Category::Waiting;
        assert_eq!(waiting, !counted, "{text}");
    }
}

/// "If the content bound to an approval changes after the answer, even by one parameter, the
/// answer stops being valid and the gate waits again."
#[test]
fn an_approval_is_invalidated_by_a_one_parameter_amend() {
    let mut w = promised();
    let g = approval(&mut w, &[Cast::w()]);
    let v1 = w.c().terms_version;
    let ans = w.ok_with(&Cast::w(), answer(GateAnswer::Accept, v1), &[g], &[]);
    assert_eq!(gate_of(&w, g).status, GateStatus::Satisfied);
    assert_eq!(w.view().category, Category::Ready);
    // The obligee changes one parameter.
    let mut t = w.c().terms.clone();
    t.parameters.insert("colour".into(), "blue".into());
    let v2 = w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v1),
            terms: Some(t),
            participants: vec![],
        },
    );
    let gv = gate_of(&w, g);
    assert_eq!(gv.status, GateStatus::Waiting);
    assert_eq!(gv.answers.len(), 1);
    assert_eq!(gv.answers[0].answer.record, ans);
    assert!(
        !gv.answers[0].valid,
        "the answer is bound to the old content"
    );
    assert_eq!(gv.participants, vec![(Cast::w(), Participation::Open)]);
    assert_eq!(w.view().category, Category::Waiting);
    assert!(w.view().open_conditions.iter().any(|oc| oc.record == g));
    // An answer given on the old version is refused; one on the new version counts.
    w.err_with(
        &Cast::w(),
        answer(GateAnswer::Accept, v1),
        &[g],
        &[],
        RejectionCode::StaleVersion,
    );
    w.ok_with(&Cast::w(), answer(GateAnswer::Accept, v2), &[g], &[]);
    assert_eq!(gate_of(&w, g).status, GateStatus::Satisfied);
    // An amend that changes nothing in the content keeps the answer valid.
    let same = w.c().terms.clone();
    w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(w.c().terms_version),
            terms: Some(same),
            participants: vec![],
        },
    );
    assert_eq!(gate_of(&w, g).status, GateStatus::Satisfied);
}

/// The same sentence, "stops being valid": a change and a change back (A → B → A) leave the
/// content as it was answered, yet the answer was invalidated by the first change and stays so;
/// the gate waits for a new answer on the current version.
#[test]
fn an_approval_stays_invalid_after_the_content_changes_back() {
    let mut w = promised();
    let g = approval(&mut w, &[Cast::w()]);
    let v1 = w.c().terms_version;
    let answered = w.c().terms.clone();
    w.ok_with(&Cast::w(), answer(GateAnswer::Accept, v1), &[g], &[]);
    assert_eq!(gate_of(&w, g).status, GateStatus::Satisfied);
    let mut b = answered.clone();
    b.parameters.insert("colour".into(), "blue".into());
    let v2 = w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v1),
            terms: Some(b),
            participants: vec![],
        },
    );
    assert_eq!(gate_of(&w, g).status, GateStatus::Waiting);
    // Back to the content that was answered.
    let v3 = w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v2),
            terms: Some(answered.clone()),
            participants: vec![],
        },
    );
    assert_eq!(w.c().terms, answered, "the content is A again");
    let gv = gate_of(&w, g);
    assert_eq!(
        gv.status,
        GateStatus::Waiting,
        "A -> B -> A brought the approval back"
    );
    assert!(!gv.answers[0].valid);
    assert_eq!(gv.participants, vec![(Cast::w(), Participation::Open)]);
    assert_eq!(w.view().category, Category::Waiting);
    // A new answer on the current version counts.
    w.ok_with(&Cast::w(), answer(GateAnswer::Accept, v3), &[g], &[]);
    assert_eq!(gate_of(&w, g).status, GateStatus::Satisfied);
}

/// satisfy_condition used to delete the condition; now it is an answer bound to the content.
#[test]
fn a_satisfied_condition_waits_again_after_an_amend() {
    let mut w = promised();
    let g = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "site access".into(),
                addressed_to: Some(Cast::w()),
                ..Condition::default()
            },
        },
    );
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[g], &[]);
    assert_eq!(w.view().category, Category::Ready);
    let v1 = w.c().terms_version;
    w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v1),
            terms: Some(terms("build it, bigger")),
            participants: vec![],
        },
    );
    assert_eq!(w.view().category, Category::Waiting);
    w.ok_with(&Cast::w(), Operation::SatisfyCondition, &[g], &[]);
    assert_eq!(w.view().category, Category::Ready);
    // A valid answer is not given twice.
    w.err_with(
        &Cast::w(),
        Operation::SatisfyCondition,
        &[g],
        &[],
        RejectionCode::AlreadyAnswered,
    );
}

/// "A gate's kind is fixed when it is created; if it is wrong, the gate is withdrawn and a new
/// one is opened." No operation changes a kind; the wrong gate is withdrawn.
#[test]
fn a_wrong_kind_is_withdrawn_and_a_new_gate_opened() {
    let mut w = promised();
    let wrong = w.ok(
        &Cast::o(),
        gate(
            GateKind::ExternalCheck,
            &[Cast::w()],
            rule(AggregationRule::All),
        ),
    );
    // An amend may change participants, never the kind.
    let v = w.c().terms_version;
    w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v),
            terms: Some(w.c().terms.clone()),
            participants: vec![GateParticipants {
                gate: wrong,
                participants: vec![Cast::w(), Cast::y()],
            }],
        },
    );
    let gv = gate_of(&w, wrong);
    assert_eq!(gv.condition.kind, GateKind::ExternalCheck);
    assert_eq!(gv.condition.participants, vec![Cast::w(), Cast::y()]);
    w.ok_with(&Cast::o(), Operation::WithdrawCondition, &[wrong], &[]);
    assert!(w.view().gates.iter().all(|g| g.record != wrong));
    let right = approval(&mut w, &[Cast::w()]);
    assert_eq!(gate_of(&w, right).condition.kind, GateKind::Approval);
    w.err(
        &Cast::o(),
        gate(
            GateKind::Unknown(9),
            &[Cast::w()],
            rule(AggregationRule::All),
        ),
        RejectionCode::UnknownGateKind,
    );
}

/// "A gate closes with gate_decision, or with accept or reject for delivery acceptance."
#[test]
fn accept_and_reject_close_a_delivery_acceptance_gate() {
    for (op, want) in [
        (accept_op(), GateStatus::Satisfied),
        (
            Operation::Reject {
                reason: "broken".into(),
            },
            GateStatus::Unsatisfiable,
        ),
    ] {
        let mut w = promised();
        let g = w.ok(
            &Cast::o(),
            gate(
                GateKind::DeliveryAcceptance,
                &[Cast::a()],
                rule(AggregationRule::All),
            ),
        );
        w.ok(&Cast::c(), state_op(&["delivery"]));
        w.ok(&Cast::a(), op);
        let gv = gate_of(&w, g);
        assert_eq!(gv.status, want);
        assert_eq!(gv.answers.len(), 1);
        assert_eq!(gv.answers[0].answer.by, Cast::a());
    }
}

#[test]
fn gate_decision_needs_the_gate_the_digest_and_a_participant() {
    let mut w = promised();
    let g = approval(&mut w, &[Cast::w()]);
    let v = w.c().terms_version;
    w.err_with(
        &Cast::w(),
        answer(GateAnswer::Accept, v),
        &[],
        &[],
        RejectionCode::NoOpenCondition,
    );
    w.err_with(
        &Cast::z(),
        answer(GateAnswer::Accept, v),
        &[g],
        &[],
        RejectionCode::WrongRole,
    );
    w.err_with(
        &Cast::w(),
        Operation::GateDecision {
            answer: GateAnswer::Accept,
            content_digest: None,
            participant: None,
            reason: String::new(),
        },
        &[g],
        &[],
        RejectionCode::MissingDigest,
    );
    w.err_with(
        &Cast::w(),
        answer(GateAnswer::Obsolete, v),
        &[g],
        &[],
        RejectionCode::WrongRole,
    );
    // After the deadline, no answer is taken.
    let mut w = promised();
    let g = w.ok(
        &Cast::o(),
        Operation::OpenCondition {
            condition: Condition {
                description: "sign-off".into(),
                addressed_to: Some(Cast::w()),
                kind: GateKind::Approval,
                deadline: Some(T0 + 5),
                ..Condition::default()
            },
        },
    );
    w.now = T0 + 5;
    let v = w.c().terms_version;
    w.err_with(
        &Cast::w(),
        answer(GateAnswer::Accept, v),
        &[g],
        &[],
        RejectionCode::DeadlinePassed,
    );
}
