//! Issue 27, item 1 (and item 4's run rows), over a real node: who may do what on a run is the
//! seed's and the kernel's, not the organisation's. Every attempt of the table that got
//! through is refused here, with the refusal's code and nothing changed:
//!
//! | attempt (issue 27) | test |
//! | --- | --- |
//! | bob transitions alice's run (no role on it) | `bob_cannot_drive_alices_run` |
//! | bob starts a run executing x1 (no role on x1) and completes it | `bob_cannot_execute_a_commitment_he_has_no_role_on` |
//! | carol appends an audit event to alice's run, then asks for the receipt | `writing_a_record_grants_no_reading` |
//! | rejected writes on a run bob cannot read; a wrong-commitment `Submit` | `refusals_say_nothing_about_what_exists` |
//!
//! The expectations are the issue's words: "transitions, actions, proposals, evidence and
//! outputs come from the run's executor"; "Creating a run for a commitment needs a role on it
//! that allows execution (its obligor …)"; "writing a record never grants reading";
//! "Refusals say nothing about what exists (the same answer as an unknown run, as reads
//! already do); errors never echo identifiers the caller may not read" — reads answer NOT_FOUND
//! with `accord-reason: not_found` (README, "Errors"). Records that reach the kernel without the
//! RunService (`Submit`) are recorded with the kernel's code, the same for a run or commitment
//! that does not exist as for one the author may not act on (`unknown_run`,
//! `unknown_commitment`).
//!
//! Each test fails against the rule it guards (mutations tried, then reverted): the executor's
//! records allowed to the executor's whole organisation (`run::who::may_write_as`) — the first,
//! third and fourth fail, the fourth with the issue's `invalid_state "running -> pending…"`;
//! execution allowed to the obligor's organisation (`Role::Executor` in `run::who::may_execute`)
//! — the second fails (bob's run applied); runs readable by the executing organisation's parties
//! (`services/run.rs` `readable`) — the third fails (carol gets the receipt); the
//! wrong-commitment detail naming the executed commitment (`run::apply_run`) — the fourth fails.

use crate::federation_common;
use crate::runs_common;

use accord_proto::pb::record::v1::{self as rec, record::Operation};
use accord_proto::pb::run::v1 as pb;
use accord_proto::pb::work::v1 as work;
use federation_common::{WAIT, ledger, reason};
use runs_common::*;
use tonic::Code;

/// Code, `accord-reason` and message of a refused call.
fn refused<T: std::fmt::Debug>(
    r: Result<tonic::Response<T>, tonic::Status>,
) -> (Code, String, String) {
    let s = r.expect_err("refused");
    (s.code(), reason(&s), s.message().to_string())
}

/// `a` about `id_a` and `b` about `id_b` are the same answer.
fn same_answer(a: &(Code, String, String), id_a: &str, b: &(Code, String, String), id_b: &str) {
    assert_eq!(
        (a.0, a.1.as_str(), a.2.replace(id_a, "<id>")),
        (b.0, b.1.as_str(), b.2.replace(id_b, "<id>")),
        "answers differ"
    );
}

/// Every write a party can ask the RunService for on an existing run.
const WRITES: [&str; 7] = [
    "transition",
    "action",
    "proposal",
    "decision",
    "evidence",
    "output",
    "audit_event",
];

/// Each run write answers its own message with `SubmitResponse`'s fields (issue 28).
fn answer<T: Into<work::SubmitResponse>>(
    r: Result<tonic::Response<T>, tonic::Status>,
) -> Result<tonic::Response<work::SubmitResponse>, tonic::Status> {
    r.map(|r| r.map(Into::into))
}

async fn write(
    c: &mut Client,
    kind: &str,
    run: &str,
) -> Result<tonic::Response<work::SubmitResponse>, tonic::Status> {
    let run = run.to_string();
    match kind {
        "transition" => answer(c.transition(go_req(&run, "paused", ctx())).await),
        "action" => answer(
            c.add_action(pb::AddActionRequest {
                action: Some(rec::RunAction {
                    run,
                    tool: "mailer".into(),
                    ..Default::default()
                }),
            })
            .await,
        ),
        "proposal" => answer(
            c.add_proposal(pb::AddProposalRequest {
                proposal: Some(rec::RunProposal {
                    run,
                    summary: "ship".into(),
                    ..Default::default()
                }),
            })
            .await,
        ),
        "decision" => answer(
            c.add_decision(pb::AddDecisionRequest {
                decision: Some(rec::RunDecision {
                    run,
                    proposal: vec![1; 32].into(),
                    verdict: rec::RunVerdict::Approve as i32,
                    reason: "ok".into(),
                }),
            })
            .await,
        ),
        "evidence" => answer(
            c.add_evidence(pb::AddEvidenceRequest {
                evidence: Some(rec::RunEvidence {
                    run,
                    kind: rec::EvidenceKind::Log as i32,
                    description: "log".into(),
                    ..Default::default()
                }),
            })
            .await,
        ),
        "output" => answer(
            c.add_output(pb::AddOutputRequest {
                output: Some(rec::RunOutput {
                    run,
                    summary: "done".into(),
                    ..Default::default()
                }),
            })
            .await,
        ),
        "audit_event" => answer(
            c.add_audit_event(pb::AddAuditEventRequest {
                event: Some(rec::RunAuditEvent {
                    run,
                    kind: "tool_timeout".into(),
                    detail: "x".into(),
                }),
            })
            .await,
        ),
        _ => unreachable!("{kind}"),
    }
}

/// What a run's claims may change on its commitment.
fn axes(c: &work::GetCommitmentResponse) -> (String, String, String, Vec<String>) {
    (
        c.state.clone(),
        c.execution.clone(),
        c.liveness.clone(),
        c.flags.clone(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn bob_cannot_drive_alices_run() {
    let n = node().await;
    let mut alice = client(&n, &n.party_token("alice")).await;
    let mut bob = client(&n, &n.party_token("bob")).await;
    assert!(applied(&start(&mut alice, "a1", "", "").await));
    assert!(applied(&go(&mut alice, "a1", "running", None).await));
    let before = get(&mut alice, "a1").await;
    let records = ledger(&n).await.len();
    for kind in WRITES {
        let on_it = refused(write(&mut bob, kind, "a1").await);
        assert_eq!(
            (on_it.0, on_it.1.as_str()),
            (Code::NotFound, "not_found"),
            "{kind}"
        );
        same_answer(
            &on_it,
            "a1",
            &refused(write(&mut bob, kind, "nope").await),
            "nope",
        );
    }
    assert_eq!(get(&mut alice, "a1").await, before, "the run is unchanged");
    assert_eq!(ledger(&n).await.len(), records, "nothing was written");
    // Its executor still drives it.
    assert!(applied(&go(&mut alice, "a1", "paused", None).await));
}

#[tokio::test(flavor = "multi_thread")]
async fn bob_cannot_execute_a_commitment_he_has_no_role_on() {
    let n = node().await;
    alice_promised(&n, "x1").await;
    let mut bob = client(&n, &n.party_token("bob")).await;
    let mut op = client(&n, &n.admin_token()).await;
    let x1 = axes(&commitment(&n, "x1").await);
    let records = ledger(&n).await.len();
    // bob is of alice's organisation, but not x1's obligor: as for a commitment that does not
    // exist.
    let start_x1 = refused(bob.create_run(start_req("bx", "x1", "")).await);
    assert_eq!(
        (start_x1.0, start_x1.1.as_str()),
        (Code::NotFound, "not_found")
    );
    let start_nope = refused(bob.create_run(start_req("bx", "nope", "")).await);
    same_answer(&start_x1, "x1", &start_nope, "nope");
    // … and he cannot complete it: there is no run.
    for to in ["running", "completed"] {
        let e = refused(bob.transition(go_req("bx", to, None)).await);
        assert_eq!((e.0, e.1.as_str()), (Code::NotFound, "not_found"));
    }
    assert_eq!(ledger(&n).await.len(), records, "nothing was written");
    // Signed by bob and submitted: recorded, refused as for an unknown commitment.
    let start_op = || {
        Operation::RunStart(rec::RunStart {
            run: "bx".into(),
            ..Default::default()
        })
    };
    let on_x1 = submit_as(&n, "bob", "x1", start_op())
        .await
        .outcome
        .expect("outcome");
    let on_nope = submit_as(&n, "bob", "nope", start_op())
        .await
        .outcome
        .expect("outcome");
    assert!(!on_x1.applied);
    assert_eq!(on_x1.rejection_code, "unknown_commitment");
    assert_eq!(
        on_x1.rejection_detail.replace("x1", "<id>"),
        on_nope.rejection_detail.replace("nope", "<id>")
    );
    let none = refused(op.get_run(pb::GetRunRequest { run: "bx".into() }).await);
    assert_eq!(none.0, Code::NotFound, "no run exists");
    assert_eq!(
        axes(&commitment(&n, "x1").await),
        x1,
        "x1's axes are unchanged"
    );
    assert!(
        !commitment(&n, "x1")
            .await
            .history
            .iter()
            .any(|h| h.operation == "observation"),
        "no claim was written on x1"
    );

    // Its obligor executes it: the seed's execution axis follows her run ("running").
    let mut alice = client(&n, &n.party_token("alice")).await;
    assert!(applied(&start(&mut alice, "ax", "x1", "").await));
    assert!(applied(&go(&mut alice, "ax", "running", None).await));
    accord_tests::eventually(WAIT, || async {
        (commitment(&n, "x1").await.execution == "running").then_some(())
    })
    .await
    .expect("x1 running");
    assert!(
        !commitment(&n, "x1")
            .await
            .flags
            .contains(&"contradiction".to_string())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn writing_a_record_grants_no_reading() {
    let n = node().await;
    let mut alice = client(&n, &n.party_token("alice")).await;
    let mut carol = client(&n, &n.party_token("carol")).await;
    assert!(applied(&start(&mut alice, "a1", "", "").await));
    assert!(applied(&go(&mut alice, "a1", "running", None).await));
    assert!(applied(
        &write(&mut alice, "action", "a1")
            .await
            .unwrap()
            .into_inner()
    ));
    let before = get(&mut alice, "a1").await;
    let records = ledger(&n).await.len();
    let event = refused(write(&mut carol, "audit_event", "a1").await);
    assert_eq!((event.0, event.1.as_str()), (Code::NotFound, "not_found"));
    same_answer(
        &event,
        "a1",
        &refused(write(&mut carol, "audit_event", "nope").await),
        "nope",
    );
    assert_eq!(ledger(&n).await.len(), records, "nothing was written");
    // The same event signed by carol and submitted: recorded, refused as on an unknown run.
    let audit = |run: &str| {
        Operation::RunAuditEvent(rec::RunAuditEvent {
            run: run.into(),
            kind: "tool_timeout".into(),
            detail: "x".into(),
        })
    };
    let on_a1 = submit_as(&n, "carol", "", audit("a1"))
        .await
        .outcome
        .expect("outcome");
    let on_nope = submit_as(&n, "carol", "", audit("nope"))
        .await
        .outcome
        .expect("outcome");
    assert!(!on_a1.applied);
    assert_eq!(on_a1.rejection_code, "unknown_run");
    assert_eq!(
        on_a1.rejection_detail.replace("a1", "<id>"),
        on_nope.rejection_detail.replace("nope", "<id>")
    );
    assert_eq!(get(&mut alice, "a1").await, before, "the run is unchanged");
    // She reads nothing of it: receipt, run and prior work answer as for an unknown run.
    let receipt = refused(
        carol
            .get_receipt(pb::GetReceiptRequest { run: "a1".into() })
            .await,
    );
    assert_eq!(
        (receipt.0, receipt.1.as_str()),
        (Code::NotFound, "not_found")
    );
    same_answer(
        &receipt,
        "a1",
        &refused(
            carol
                .get_receipt(pb::GetReceiptRequest { run: "nope".into() })
                .await,
        ),
        "nope",
    );
    assert_eq!(
        refused(carol.get_run(pb::GetRunRequest { run: "a1".into() }).await).0,
        Code::NotFound
    );
    assert_eq!(
        refused(
            carol
                .get_prior_work(pb::GetPriorWorkRequest { run: "a1".into() })
                .await
        )
        .0,
        Code::NotFound
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_say_nothing_about_what_exists() {
    let n = node().await;
    alice_promised(&n, "x1").await;
    let mut alice = client(&n, &n.party_token("alice")).await;
    let mut bob = client(&n, &n.party_token("bob")).await;
    assert!(applied(&start(&mut alice, "ax", "x1", "").await));
    assert!(applied(&go(&mut alice, "ax", "running", None).await));
    let before = get(&mut alice, "ax").await;
    let records = ledger(&n).await.len();
    // running -> pending is undeclared; bob learns that no more than for a run that does not
    // exist.
    let on_ax = refused(bob.transition(go_req("ax", "pending", None)).await);
    assert_eq!((on_ax.0, on_ax.1.as_str()), (Code::NotFound, "not_found"));
    assert!(!on_ax.2.contains("running"), "{}", on_ax.2);
    same_answer(
        &on_ax,
        "ax",
        &refused(bob.transition(go_req("nope", "pending", None)).await),
        "nope",
    );
    assert_eq!(ledger(&n).await.len(), records, "nothing was written");
    // A transition signed by bob naming another commitment, submitted: the same code as on an
    // unknown run, and not a word of x1.
    let pending = |run: &str| {
        Operation::RunTransition(rec::RunTransition {
            run: run.into(),
            to: num("pending"),
            context: None,
        })
    };
    let on_ax = submit_as(&n, "bob", "y9", pending("ax"))
        .await
        .outcome
        .expect("outcome");
    let on_nope = submit_as(&n, "bob", "y9", pending("nope"))
        .await
        .outcome
        .expect("outcome");
    assert_eq!(on_ax.rejection_code, "unknown_run");
    assert_eq!(
        on_ax.rejection_detail.replace("ax", "<id>"),
        on_nope.rejection_detail.replace("nope", "<id>")
    );
    assert!(!on_ax.rejection_detail.contains("x1"), "{on_ax:?}");
    // Its executor's wrong commitment is refused without echoing the one the run executes.
    let own = submit_as(&n, "alice", "y9", pending("ax"))
        .await
        .outcome
        .expect("outcome");
    assert_eq!(own.rejection_code, "wrong_commitment");
    assert!(!own.rejection_detail.contains("x1"), "{own:?}");
    assert_eq!(get(&mut alice, "ax").await, before, "the run is unchanged");
}
