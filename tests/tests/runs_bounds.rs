//! Issue 27, item 3: runs live in storage with a bounded cache, and every free-text field of a
//! run record is bounded at the edge. (Before: 150 runs with ~900 KB triggers took a node from
//! 75 to 444 MiB, every run held in memory.)

use crate::runs_common;

use accord_proto::pb::record::v1 as rec;
use accord_proto::pb::run::v1 as pb;
use accord_tests::TestNode;
use accord_tests::metrics::{metrics_on, scrape, serve_node, value};
use runs_common::{applied, client, num, start_req};
use tonic::Code;

/// README "Limits" (run records): the longest free text, bytes.
const MAX_TEXT: usize = 4096;
/// README "Limits": the longest label (tool, kind, persistence mode), bytes.
const MAX_LABEL: usize = 256;
const F: &str = "record.payload.operation";

fn meta(s: &tonic::Status, key: &str) -> String {
    s.metadata()
        .get(key)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn refused(r: Result<tonic::Response<impl std::fmt::Debug>, tonic::Status>, field: &str) {
    let e = r.expect_err(field);
    assert_eq!(e.code(), Code::InvalidArgument, "{field}: {e:?}");
    assert_eq!(meta(&e, "accord-reason"), "invalid_argument", "{e:?}");
    assert_eq!(meta(&e, "accord-field"), format!("{F}.{field}"), "{e:?}");
    assert!(e.message().len() <= 512, "the error never echoes the input");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_over_long_run_field_is_refused_naming_the_field_and_nothing_is_written() {
    let node = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    let mut c = client(&node, &node.party_token("alice")).await;
    let long = "t".repeat(MAX_TEXT + 1);

    let mut too_long = start_req("r-long", "", "");
    too_long.start.as_mut().unwrap().trigger = long.clone();
    refused(c.create_run(too_long).await, "run_start.trigger");
    let e = c
        .get_run(pb::GetRunRequest {
            run: "r-long".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "nothing was written: {e:?}");
    let mut label = start_req("r-long", "", "");
    label.start.as_mut().unwrap().persistence = "p".repeat(MAX_LABEL + 1);
    refused(c.create_run(label).await, "run_start.persistence");

    // At the bound it is accepted.
    let mut at_bound = start_req("r-1", "", "");
    at_bound.start.as_mut().unwrap().trigger = "t".repeat(MAX_TEXT);
    assert!(applied(&c.create_run(at_bound).await.unwrap().into_inner()));

    let run = || "r-1".to_string();
    refused(
        c.transition(pb::TransitionRequest {
            transition: Some(rec::RunTransition {
                run: run(),
                to: num("queued"),
                context: Some(rec::RunTransitionContext {
                    reason: long.clone(),
                    ..Default::default()
                }),
            }),
        })
        .await,
        "run_transition.context.reason",
    );
    refused(
        c.add_action(pb::AddActionRequest {
            action: Some(rec::RunAction {
                run: run(),
                tool: "shell".into(),
                description: long.clone(),
                ..Default::default()
            }),
        })
        .await,
        "run_action.description",
    );
    refused(
        c.add_proposal(pb::AddProposalRequest {
            proposal: Some(rec::RunProposal {
                run: run(),
                summary: long.clone(),
                ..Default::default()
            }),
        })
        .await,
        "run_proposal.summary",
    );
    refused(
        c.add_evidence(pb::AddEvidenceRequest {
            evidence: Some(rec::RunEvidence {
                run: run(),
                description: long.clone(),
                ..Default::default()
            }),
        })
        .await,
        "run_evidence.description",
    );
    refused(
        c.add_output(pb::AddOutputRequest {
            output: Some(rec::RunOutput {
                run: run(),
                summary: long.clone(),
                ..Default::default()
            }),
        })
        .await,
        "run_output.summary",
    );
    refused(
        c.add_audit_event(pb::AddAuditEventRequest {
            event: Some(rec::RunAuditEvent {
                run: run(),
                kind: "tool_timeout".into(),
                detail: long.clone(),
            }),
        })
        .await,
        "run_audit_event.detail",
    );
    // None of them reached the ledger: the run is as started.
    let r = c
        .get_run(pb::GetRunRequest { run: run() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            r.state,
            r.transitions.len(),
            r.actions.len(),
            r.audit_events.len()
        ),
        (num("pending"), 0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_runs_keeps_the_run_cache_within_its_bound_and_reads_come_from_storage() {
    const CACHE: usize = 16;
    const RUNS: usize = 600;
    let mut node = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| {
            metrics_on(t);
            t.push_str(&format!("\n[projection]\ncache_runs = {CACHE}\n"));
        })
        .init()
        .unwrap();
    let (_proc, metrics) = serve_node(&mut node).await.unwrap();
    let c = client(&node, &node.party_token("alice")).await;
    let started = |i: usize| {
        let mut r = start_req(&format!("r-{i:04}"), "", if i == 0 { "" } else { "r-0000" });
        r.start.as_mut().unwrap().trigger = format!("{i:04}").repeat(MAX_TEXT / 4);
        r
    };
    let mut c0 = c.clone();
    assert!(applied(
        &c0.create_run(started(0)).await.unwrap().into_inner()
    ));
    for group in (1..RUNS).collect::<Vec<_>>().chunks(32) {
        let mut tasks = Vec::new();
        for &i in group {
            let mut c = c.clone();
            let req = started(i);
            tasks.push(tokio::spawn(async move { c.create_run(req).await }));
        }
        for t in tasks {
            assert!(applied(&t.await.unwrap().unwrap().into_inner()));
        }
    }
    let cached = value(
        &scrape(metrics).unwrap(),
        "accord_projection_cached_runs",
        &[],
    )
    .expect("accord_projection_cached_runs");
    assert!(
        cached <= CACHE as f64,
        "{cached} runs cached with projection.cache_runs = {CACHE}"
    );
    // Every run is still there, read from storage: the first (long evicted) and its children,
    // counted from the stored index.
    let w = c0
        .get_prior_work(pb::GetPriorWorkRequest {
            run: "r-0000".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(w.child_runs, RUNS as u64 - 1);
    let receipt = c0
        .get_receipt(pb::GetReceiptRequest {
            run: "r-0001".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(receipt.trigger, "0001".repeat(MAX_TEXT / 4));
}
