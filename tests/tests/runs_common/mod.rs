//! Helpers shared by the run tests over real nodes (`runs.rs`, `runs_access.rs`,
//! `runs_liveness.rs`): a RunService client per party, the run states by name, and the calls the
//! tests make most.
#![allow(dead_code)]

use crate::federation_common::{declare, party, record, request, signer};
use accord_proto::pb::record::v1 as rec;
use accord_proto::pb::run::v1::{self as pb, run_service_client::RunServiceClient};
use accord_proto::pb::work::v1::{self as work, SubmitResponse};
use accord_proto::signing;
use accord_tests::{Authed, Bearer, TestNode};

pub type Client = RunServiceClient<Authed>;

/// Seed 002, "Run states", in the seed's order (the wire numbers are 1..=14 in this order).
pub const STATES: [&str; 14] = [
    "pending",
    "queued",
    "planning",
    "running",
    "waiting_for_user",
    "awaiting_approval",
    "partially_approved",
    "paused",
    "recovering",
    "completed",
    "failed",
    "rejected",
    "canceled",
    "expired",
];

pub fn num(s: &str) -> i32 {
    STATES.iter().position(|x| *x == s).expect("a state") as i32 + 1
}

pub async fn client(node: &TestNode, token: &str) -> Client {
    RunServiceClient::with_interceptor(node.channel().await.unwrap(), Bearer::new(token))
}

/// A transition context with metadata (review context for approval moves).
pub fn ctx() -> Option<rec::RunTransitionContext> {
    Some(rec::RunTransitionContext {
        reason: "test".into(),
        metadata: [("ticket".to_string(), "T-1".to_string())].into(),
        ..Default::default()
    })
}

pub fn start_req(run: &str, commitment: &str, parent: &str) -> pb::CreateRunRequest {
    pb::CreateRunRequest {
        commitment_id: commitment.into(),
        start: Some(rec::RunStart {
            run: run.into(),
            trigger: "schedule:nightly".into(),
            initiator: "acme/alice".into(),
            parent: parent.into(),
            persistence: "durable".into(),
            replay_confirmed: false,
            heartbeat_interval_ms: 0,
        }),
    }
}

pub async fn start(c: &mut Client, run: &str, commitment: &str, parent: &str) -> SubmitResponse {
    c.create_run(start_req(run, commitment, parent))
        .await
        .unwrap()
        .into_inner()
        .into()
}

pub fn go_req(
    run: &str,
    to: &str,
    context: Option<rec::RunTransitionContext>,
) -> pb::TransitionRequest {
    pb::TransitionRequest {
        transition: Some(rec::RunTransition {
            run: run.into(),
            to: num(to),
            context,
        }),
    }
}

pub async fn go(
    c: &mut Client,
    run: &str,
    to: &str,
    context: Option<rec::RunTransitionContext>,
) -> SubmitResponse {
    c.transition(go_req(run, to, context))
        .await
        .unwrap()
        .into_inner()
        .into()
}

pub fn applied<R: Clone + Into<SubmitResponse>>(r: &R) -> bool {
    let r: SubmitResponse = r.clone().into();
    r.outcome.as_ref().is_some_and(|o| o.applied)
}

/// The kernel's rejection code of a recorded record (empty when applied).
pub fn code<R: Clone + Into<SubmitResponse>>(r: &R) -> String {
    let r: SubmitResponse = r.clone().into();
    r.outcome
        .as_ref()
        .map(|o| o.rejection_code.clone())
        .unwrap_or_default()
}

pub async fn get(c: &mut Client, run: &str) -> pb::GetRunResponse {
    c.get_run(pb::GetRunRequest { run: run.into() })
        .await
        .unwrap()
        .into_inner()
}

/// acme with the parties alice, bob and carol.
pub async fn node() -> TestNode {
    TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .party("carol")
        .start()
        .await
        .unwrap()
}

/// `who` (of acme) signs `op` on `commitment` and submits it through WorkService.Submit; the
/// answer (its record id and the kernel's outcome).
pub async fn submit_as(
    n: &TestNode,
    who: &str,
    commitment: &str,
    op: rec::record::Operation,
) -> work::SubmitResponse {
    let r: rec::Record = record("acme", who, commitment, &[], op);
    let signed = signing::sign_record(&signer(n, who), &r);
    crate::federation_common::work(n)
        .await
        .submit(work::SubmitRequest {
            record: Some(signed),
        })
        .await
        .expect("submit")
        .into_inner()
}

/// carol asks alice for `c` and alice promises: alice is its obligor.
pub async fn alice_promised(n: &TestNode, c: &str) {
    declare(
        n,
        "carol",
        request("acme", "carol", c, party("acme", "alice")),
    )
    .await;
    declare(
        n,
        "alice",
        record(
            "acme",
            "alice",
            c,
            &[],
            rec::record::Operation::Promise(rec::Promise {}),
        ),
    )
    .await;
}

pub async fn commitment(n: &TestNode, id: &str) -> work::GetCommitmentResponse {
    crate::federation_common::work(n)
        .await
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: id.into(),
        })
        .await
        .expect("operator reads it")
        .into_inner()
}
