//! Issue 11 over gRPC between two organisations' nodes: an approval gate answered at acme for
//! work held at globex, invalidated by a one-parameter amend and answered again (the "Done when"
//! scenario), and a control handover end to end (seed 000, "Conditions and gates", "Control
//! handover"). After each step both nodes are asserted to derive the same gate or axis.

use crate::federation_common;

use accord_proto::pb::record::v1::{self as rec, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_tests::TestNode;
use federation_common::*;

async fn view(node: &TestNode, c: &str) -> work::GetCommitmentResponse {
    work(node)
        .await
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: c.into(),
        })
        .await
        .expect("commitment")
        .into_inner()
}

/// Waits until both nodes derive what `check` wants of commitment `c`; returns both views.
async fn both<F>(
    a: &TestNode,
    b: &TestNode,
    c: &str,
    what: &str,
    check: F,
) -> [work::GetCommitmentResponse; 2]
where
    F: Fn(&work::GetCommitmentResponse) -> bool,
{
    let mut out = Vec::new();
    for n in [a, b] {
        let got = accord_tests::eventually(WAIT, || async {
            let v = view(n, c).await;
            check(&v).then_some(v)
        })
        .await;
        match got {
            Ok(v) => out.push(v),
            Err(e) => panic!("{}: {what}: {e}; now {:?}", n.name, view(n, c).await),
        }
    }
    [out.remove(0), out.remove(0)]
}

fn gate_of<'a>(v: &'a work::GetCommitmentResponse, gate: &[u8; 32]) -> &'a work::Gate {
    v.gates
        .iter()
        .find(|g| g.record_id.as_ref() == gate)
        .expect("the gate is listed")
}

/// alice's approval of the content as it is now, on acme.
async fn approve(a: &TestNode, c: &str, gate: [u8; 32], version: &[u8]) -> [u8; 32] {
    declare(
        a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[gate],
            Operation::GateDecision(rec::GateDecision {
                answer: rec::GateAnswer::Accept as i32,
                content_digest: version.to_vec().into(),
                ..Default::default()
            }),
        ),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_gate_answered_at_one_organisation_is_invalidated_by_an_amend_and_answered_again()
 {
    let c = "gate-1";
    let (a, b) = promised_between(&["alice"], c).await;

    // globex/bob, holding the work, opens an approval gate addressed to acme/alice.
    let gate = declare(
        &b,
        "bob",
        record(
            "globex",
            "bob",
            c,
            &[],
            Operation::OpenCondition(rec::OpenCondition {
                condition: Some(rec::Condition {
                    description: "approve the plan".into(),
                    addressed_to: Some(party("acme", "alice")),
                    kind: rec::GateKind::Approval as i32,
                    ..Default::default()
                }),
            }),
        ),
    )
    .await;
    let [va, vb] = both(&a, &b, c, "the gate waits", |v| {
        v.gates
            .iter()
            .any(|g| g.record_id.as_ref() == gate && g.status == "waiting")
    })
    .await;
    for v in [&va, &vb] {
        let g = gate_of(v, &gate);
        assert_eq!(g.kind, "approval");
        assert_eq!(g.addressed_to, Some(party("acme", "alice")));
        assert!(g.answers.is_empty());
        assert_eq!(v.category, "waiting");
    }
    assert_eq!(va.version, vb.version, "both nodes are on the same terms");
    let v1 = va.version.clone();

    // acme/alice approves on her node; globex derives the same.
    let first = approve(&a, c, gate, &v1).await;
    let [va, vb] = both(&a, &b, c, "the gate is satisfied", |v| {
        v.gates
            .iter()
            .any(|g| g.record_id.as_ref() == gate && g.status == "satisfied")
    })
    .await;
    for v in [&va, &vb] {
        let g = gate_of(v, &gate);
        assert_eq!(g.answers.len(), 1);
        assert_eq!(g.answers[0].record_id.as_ref(), first);
        assert_eq!(g.answers[0].answer, "accept");
        assert!(g.answers[0].valid);
        assert_eq!(g.answers[0].terms_version, v1);
        assert_ne!(v.category, "waiting");
    }

    // alice amends one parameter of the terms: the approval no longer holds, at both nodes.
    let mut terms = rec::Terms {
        title: format!("{c} terms"),
        ..Default::default()
    };
    terms.parameters.insert("budget".into(), "101".into());
    let amend = declare(
        &a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[],
            Operation::Amend(rec::Amend {
                supersedes: v1.clone(),
                terms: Some(terms),
                participants: Vec::new(),
            }),
        ),
    )
    .await;
    let [va, vb] = both(&a, &b, c, "the gate waits again", |v| {
        v.version.as_ref() == amend
            && v.gates
                .iter()
                .any(|g| g.record_id.as_ref() == gate && g.status == "waiting")
    })
    .await;
    for v in [&va, &vb] {
        let g = gate_of(v, &gate);
        assert_eq!(g.answers.len(), 1, "the old answer stays recorded");
        assert!(
            !g.answers[0].valid,
            "an answer on the old content is not valid"
        );
        assert_eq!(v.category, "waiting");
    }

    // Answered again on the new content: satisfied again at both.
    let second = approve(&a, c, gate, &amend).await;
    let [va, vb] = both(&a, &b, c, "the gate is satisfied again", |v| {
        v.gates
            .iter()
            .any(|g| g.record_id.as_ref() == gate && g.status == "satisfied")
    })
    .await;
    for v in [&va, &vb] {
        let g = gate_of(v, &gate);
        let valid: Vec<_> = g.answers.iter().filter(|x| x.valid).collect();
        assert_eq!(valid.len(), 1);
        assert_eq!(valid[0].record_id.as_ref(), second);
        assert_eq!(valid[0].terms_version.as_ref(), amend);
    }
}

fn observe(execution: rec::ExecutionReport) -> Operation {
    Operation::Observation(rec::Observation {
        execution: execution as i32,
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn control_handover_end_to_end_between_two_organisations() {
    let c = "handover-1";
    let (a, b) = promised_between(&["alice"], c).await;

    // globex/bob executes; acme sees it running.
    declare(
        &b,
        "bob",
        record(
            "globex",
            "bob",
            c,
            &[],
            observe(rec::ExecutionReport::Running),
        ),
    )
    .await;
    both(&a, &b, c, "running", |v| v.execution == "running").await;

    // acme/alice asks for a pause; globex/bob accepts and confirms it.
    let pause = declare(
        &a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[],
            Operation::StopRequest(rec::StopRequest {
                mode: rec::StopMode::Pause as i32,
                reason: "inspect".into(),
            }),
        ),
    )
    .await;
    let [_, vb] = both(&a, &b, c, "the pause is pending", |v| {
        v.stop
            .as_ref()
            .is_some_and(|s| s.record_id.as_ref() == pause && s.mode == "pause")
    })
    .await;
    // seed 000, "Stop requests": without the executor's confirming claim the axis is unknown.
    assert_eq!(vb.execution, "unknown", "no confirmation yet");
    declare(
        &b,
        "bob",
        record(
            "globex",
            "bob",
            c,
            &[pause],
            Operation::StopResponse(rec::StopResponse {
                answer: rec::StopAnswer::Accept as i32,
                reason: String::new(),
            }),
        ),
    )
    .await;
    declare(
        &b,
        "bob",
        record(
            "globex",
            "bob",
            c,
            &[],
            observe(rec::ExecutionReport::Paused),
        ),
    )
    .await;
    both(&a, &b, c, "paused and confirmed", |v| {
        v.execution == "paused"
            && v.stop
                .as_ref()
                .is_some_and(|s| s.response == "accept" && !s.confirmed_record_id.is_empty())
    })
    .await;

    // alice takes control: the control axis shows manual with her as holder, at both nodes.
    let lease = declare(
        &a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[pause],
            Operation::ControlLease(rec::ControlLease {
                holder: Some(party("acme", "alice")),
                until_unix_ms: 0,
            }),
        ),
    )
    .await;
    let [va, vb] = both(&a, &b, c, "manual control", |v| v.control == "manual").await;
    for v in [&va, &vb] {
        assert_eq!(v.control_holder, Some(party("acme", "alice")));
        let h = v.handover.as_ref().expect("handover under way");
        assert_eq!(h.lease_record_id.as_ref(), lease);
        assert!(v.flags.iter().any(|f| f == "taken_over"), "{:?}", v.flags);
    }

    // She hands control back with a note, then the re-check decides to continue.
    let back = declare(
        &a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[lease],
            Operation::HandBackControl(rec::HandBackControl {
                handoff_note: "valve replaced; resume from step 4".into(),
            }),
        ),
    )
    .await;
    let [va, vb] = both(&a, &b, c, "handed back", |v| {
        v.handover
            .as_ref()
            .is_some_and(|h| h.handed_back_record_id.as_ref() == back)
    })
    .await;
    for v in [&va, &vb] {
        let h = v.handover.as_ref().unwrap();
        assert_eq!(h.handed_back_note, "valve replaced; resume from step 4");
        assert_ne!(v.control, "manual", "control was handed back");
    }
    let recheck = declare(
        &a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[back],
            Operation::Recheck(rec::Recheck {
                outcome: rec::RecheckOutcome::Continue as i32,
                note: String::new(),
            }),
        ),
    )
    .await;
    let [va, vb] = both(&a, &b, c, "re-checked: continue", |v| v.handover.is_none()).await;
    // Seed 000: "Continuing after a stop is a separate resume_after_stop Declaration and never
    // happens on its own" — the re-check's "continue" does not end the stop.
    for v in [&va, &vb] {
        assert_eq!(v.control_holder, None);
        let s = v.stop.as_ref().expect("the stop is still shown");
        assert!(
            s.resumed_record_id.is_empty(),
            "the re-check {recheck:?} ended the stop"
        );
    }
    let resume = declare(
        &a,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[pause],
            Operation::ResumeAfterStop(rec::ResumeAfterStop {
                reason: "re-checked".into(),
            }),
        ),
    )
    .await;
    both(&a, &b, c, "resumed after the stop", |v| {
        v.stop
            .as_ref()
            .is_some_and(|s| s.resumed_record_id.as_ref() == resume)
    })
    .await;
    // globex/bob was told control was taken (his attention list, on his node).
    let mut bob = b.work_party("bob").await.unwrap();
    let items = bob
        .list_attention(work::ListAttentionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items;
    assert!(
        items
            .iter()
            .any(|i| i.about == "control_taken" && i.record_id.as_ref() == lease),
        "{items:?}"
    );
    assert!(
        items
            .iter()
            .any(|i| i.about == "stop_requested" && i.record_id.as_ref() == pause),
        "{items:?}"
    );
}
