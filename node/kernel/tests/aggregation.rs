//! Multi-party aggregation (seed 000, "Multi-party aggregation"), table-driven and with proptest
//! over random answer orders: the outcome never depends on the order, except for Sequential.
//! Gates driven through records are checked against an oracle read from the seed's table (not
//! against `aggregate()`) in `seed_000_aggregation.rs`.

mod common;

use accord_kernel::gates::aggregate;
use accord_kernel::*;
use common::*;
use proptest::prelude::*;

use GateStatus::{Satisfied as Sat, Unsatisfiable as Unsat, Waiting as Wait};
use Participation as P;

fn agg(rule: AggregationRule, k: u32, percent: u32, any_rejection_rejects: bool) -> Aggregation {
    Aggregation {
        rule,
        k,
        percent,
        any_rejection_rejects,
    }
}

/// The seed's table, written out: (policy text, policy, standings, expected).
#[test]
fn the_seed_table() {
    use AggregationRule::*;
    #[rustfmt::skip]
    let rows: &[(&str, Aggregation, &[Participation], GateStatus)] = &[
        ("All: all N accepted", agg(All, 0, 0, false), &[P::Accepted, P::Accepted, P::Accepted], Sat),
        ("All: waiting while one is open", agg(All, 0, 0, false), &[P::Accepted, P::Open, P::Accepted], Wait),
        ("All: any rejection", agg(All, 0, 0, false), &[P::Accepted, P::Rejected, P::Open], Unsat),
        ("All: any timeout", agg(All, 0, 0, false), &[P::Accepted, P::TimedOut, P::Open], Unsat),
        ("All: any close without an answer", agg(All, 0, 0, false), &[P::ClosedWithoutAnswer, P::Open], Unsat),
        ("Any: the first acceptance", agg(Any, 0, 0, false), &[P::Open, P::Accepted, P::Open], Sat),
        ("Any: waiting while one is open", agg(Any, 0, 0, false), &[P::Rejected, P::Open], Wait),
        ("Any: all closed with something other than acceptance", agg(Any, 0, 0, false), &[P::Rejected, P::TimedOut, P::ClosedWithoutAnswer], Unsat),
        ("K of N: K acceptances", agg(KOfN, 2, 0, false), &[P::Accepted, P::Open, P::Accepted], Sat),
        ("K of N: open participants can still reach K", agg(KOfN, 2, 0, false), &[P::Accepted, P::Rejected, P::Open], Wait),
        ("K of N: open participants can no longer reach K", agg(KOfN, 2, 0, false), &[P::Accepted, P::Rejected, P::Rejected], Unsat),
        ("Sequential: the sequence is finished", agg(Sequential, 0, 0, false), &[P::Accepted, P::Accepted], Sat),
        ("Sequential: the current participant is open", agg(Sequential, 0, 0, false), &[P::Accepted, P::Open, P::NotYetOpen], Wait),
        ("Sequential: any non-acceptance in sequence", agg(Sequential, 0, 0, false), &[P::Accepted, P::TimedOut, P::NotYetOpen], Unsat),
        ("Percentage: acceptances >= ceil(N x p): 3 x 50% -> 2", agg(Percentage, 0, 50, false), &[P::Accepted, P::Accepted, P::Open], Sat),
        ("Percentage: 1 of 3 at 50% waits", agg(Percentage, 0, 50, false), &[P::Accepted, P::Open, P::Rejected], Wait),
        ("Percentage: the rest can no longer reach the threshold", agg(Percentage, 0, 50, false), &[P::Accepted, P::Rejected, P::Rejected], Unsat),
        ("Percentage: 4 x 34% -> 2 (ceiling)", agg(Percentage, 0, 34, false), &[P::Accepted, P::Rejected, P::Rejected, P::Rejected], Unsat),
        ("Any rejection rejects (added to Any)", agg(Any, 0, 0, true), &[P::Open, P::Rejected], Unsat),
        ("Any rejection rejects (added to K of N)", agg(KOfN, 1, 0, true), &[P::Accepted, P::Rejected], Unsat),
        ("Any rejection rejects: a timeout is no rejection", agg(Any, 0, 0, true), &[P::TimedOut, P::Open], Wait),
    ];
    for (text, a, parts, want) in rows {
        assert_eq!(aggregate(a, parts), *want, "{text}");
    }
}

fn final_standing() -> impl Strategy<Value = Participation> {
    prop_oneof![
        Just(P::Accepted),
        Just(P::Rejected),
        Just(P::ClosedWithoutAnswer),
        Just(P::TimedOut),
        Just(P::Open),
    ]
}

fn order_free_policy() -> impl Strategy<Value = (Aggregation, usize)> {
    (1usize..7).prop_flat_map(|n| {
        (
            prop_oneof![
                Just(AggregationRule::All),
                Just(AggregationRule::Any),
                Just(AggregationRule::KOfN),
                Just(AggregationRule::Percentage),
            ],
            1..=n as u32,
            1u32..=100,
            any::<bool>(),
        )
            .prop_map(move |(rule, k, percent, rej)| (agg(rule, k, percent, rej), n))
    })
}

proptest! {
    /// All, Any, K of N and Percentage (with or without "any rejection rejects"): the outcome
    /// is the same for every order of the same answers.
    #[test]
    fn the_outcome_never_depends_on_the_order(
        (policy, n) in order_free_policy(),
        parts in proptest::collection::vec(final_standing(), 7),
        perm in Just((0..7).collect::<Vec<usize>>()).prop_shuffle(),
    ) {
        let parts = &parts[..n];
        let shuffled: Vec<Participation> = perm.iter().filter(|i| **i < n).map(|i| parts[*i]).collect();
        prop_assert_eq!(aggregate(&policy, parts), aggregate(&policy, &shuffled));
    }
}

/// Sequential: "the next request opens only after the previous acceptance".
#[test]
fn sequential_opens_the_next_request_after_an_acceptance() {
    let mut w = promised();
    let g = w.ok(
        &Cast::o(),
        gate(
            GateKind::Approval,
            &[Cast::w(), Cast::y(), Cast::z()],
            rule(AggregationRule::Sequential),
        ),
    );
    let v = w.c().terms_version;
    let standings = |w: &World| -> Vec<Participation> {
        w.view().gates[0]
            .participants
            .iter()
            .map(|(_, s)| *s)
            .collect()
    };
    assert_eq!(standings(&w), [P::Open, P::NotYetOpen, P::NotYetOpen]);
    w.err_with(
        &Cast::y(),
        answer(GateAnswer::Accept, v),
        &[g],
        &[],
        RejectionCode::NotYourTurn,
    );
    w.ok_with(&Cast::w(), answer(GateAnswer::Accept, v), &[g], &[]);
    assert_eq!(standings(&w), [P::Accepted, P::Open, P::NotYetOpen]);
    w.ok_with(&Cast::y(), answer(GateAnswer::Accept, v), &[g], &[]);
    w.ok_with(&Cast::z(), answer(GateAnswer::Accept, v), &[g], &[]);
    assert_eq!(w.view().gates[0].status, GateStatus::Satisfied);
}

/// "When the result is decided early, the remaining open participant requests close as
/// obsolete": written by the Work service party, each resting on the gate and the deciding
/// answers.
#[test]
fn an_early_decision_closes_the_rest_as_obsolete() {
    let mut w = promised();
    let people = [Cast::w(), Cast::y(), Cast::z()];
    let g = w.ok(
        &Cast::o(),
        gate(GateKind::Approval, &people, rule(AggregationRule::Any)),
    );
    let v = w.c().terms_version;
    assert!(
        due_work(w.c(), w.now).is_empty(),
        "nothing is due while waiting"
    );
    let yes = w.ok_with(&Cast::y(), answer(GateAnswer::Accept, v), &[g], &[]);
    let due = due_work(w.c(), w.now);
    assert_eq!(due.len(), 2);
    for (a, who) in due.iter().zip([Cast::w(), Cast::z()]) {
        assert_eq!(a.kind, ServiceKind::CloseParticipant);
        assert_eq!(a.basis, vec![g, yes]);
        assert!(matches!(
            &a.op,
            Operation::GateDecision { answer: GateAnswer::Obsolete, participant: Some(p), .. } if *p == who
        ));
    }
    w.tick();
    let gv = &w.view().gates[0];
    assert_eq!(
        gv.participants,
        vec![
            (Cast::w(), P::Obsolete),
            (Cast::y(), P::Accepted),
            (Cast::z(), P::Obsolete)
        ]
    );
    assert_eq!(gv.status, GateStatus::Satisfied);
    assert!(due_work(w.c(), w.now).is_empty());
    // A closed participant's late answer is refused.
    w.err_with(
        &Cast::w(),
        answer(GateAnswer::Reject, v),
        &[g],
        &[],
        RejectionCode::AlreadyAnswered,
    );
    // The Work service party may not close a request that is not left open by a decision.
    let mut w2 = promised();
    let g2 = w2.ok(
        &Cast::o(),
        gate(GateKind::Approval, &people, rule(AggregationRule::Any)),
    );
    let r = Operation::GateDecision {
        answer: GateAnswer::Obsolete,
        content_digest: None,
        participant: Some(Cast::w()),
        reason: String::new(),
    };
    w2.err_with(&Cast::s(), r, &[g2], &[], RejectionCode::NotDue);
}

/// "The participant set and N are fixed at creation and change only through amend";
/// participants may be parties of other organisations.
#[test]
fn participants_change_only_through_amend() {
    let mut w = promised();
    let foreign = p("globex", "gina");
    w.access = w.access.clone().with_organisation("globex");
    let g = w.ok(
        &Cast::o(),
        gate(
            GateKind::Approval,
            &[Cast::w(), foreign.clone()],
            agg(AggregationRule::KOfN, 2, 0, false),
        ),
    );
    // A foreign participant is one of the commitment's parties (records reach it).
    assert!(w.c().parties().contains(&foreign));
    let v = w.c().terms_version;
    w.ok_with(&foreign, answer(GateAnswer::Accept, v), &[g], &[]);
    assert_eq!(w.view().gates[0].status, GateStatus::Waiting);
    // K may not exceed the new N.
    w.err(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v),
            terms: Some(w.c().terms.clone()),
            participants: vec![GateParticipants {
                gate: g,
                participants: vec![foreign.clone()],
            }],
        },
        RejectionCode::InvalidAggregation,
    );
    w.ok(
        &Cast::o(),
        Operation::Amend {
            supersedes: Some(v),
            terms: Some(w.c().terms.clone()),
            participants: vec![GateParticipants {
                gate: g,
                participants: vec![foreign.clone(), Cast::y()],
            }],
        },
    );
    let v2 = w.c().terms_version;
    // The content is unchanged, so the foreign acceptance still counts.
    w.err_with(
        &Cast::w(),
        answer(GateAnswer::Accept, v2),
        &[g],
        &[],
        RejectionCode::WrongRole,
    );
    w.ok_with(&Cast::y(), answer(GateAnswer::Accept, v2), &[g], &[]);
    assert_eq!(w.view().gates[0].status, GateStatus::Satisfied);
    // Invalid policies are refused at creation.
    w.err(
        &Cast::o(),
        gate(
            GateKind::Approval,
            &[Cast::w()],
            agg(AggregationRule::KOfN, 2, 0, false),
        ),
        RejectionCode::InvalidAggregation,
    );
    w.err(
        &Cast::o(),
        gate(
            GateKind::Approval,
            &[Cast::w(), Cast::w()],
            rule(AggregationRule::All),
        ),
        RejectionCode::DuplicateParticipant,
    );
}
