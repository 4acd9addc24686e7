//! Issue 11 items 7 and 8: GetCommitment shows what the kernel's view derives — the axes, every
//! gate with its kind, participants, aggregation, answers and status, and each open revoke
//! request with every party it is asked of (seed 000, "Other state axes", "Conditions and
//! gates", "Multi-party aggregation", "Revoke requests").

use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing;
use accord_tests::{TestNode, WorkClient};

fn party(name: &str) -> PartyRef {
    PartyRef {
        organisation: "acme".into(),
        name: name.into(),
    }
}

fn p(name: &str) -> Option<PartyRef> {
    Some(party(name))
}

async fn submit(
    c: &mut WorkClient,
    who: &Signer,
    author: &str,
    commitment: &str,
    op: Operation,
    n: u8,
) -> work::SubmitResponse {
    submit_on(c, who, author, commitment, op, n, Vec::new()).await
}

async fn submit_on(
    c: &mut WorkClient,
    who: &Signer,
    author: &str,
    commitment: &str,
    op: Operation,
    n: u8,
    basis: Vec<prost::bytes::Bytes>,
) -> work::SubmitResponse {
    let r = Record {
        basis,
        author: p(author),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        nonce: vec![n].into(),
        operation: Some(op),
        ..Default::default()
    };
    let resp = c
        .submit(work::SubmitRequest {
            record: Some(signing::sign_record(who, &r)),
        })
        .await
        .unwrap()
        .into_inner();
    let o = resp.outcome.clone().unwrap();
    assert!(
        o.applied,
        "{author} {n}: {} {}",
        o.rejection_code, o.rejection_detail
    );
    resp
}

async fn state(c: &mut WorkClient, id: &str) -> work::GetCommitmentResponse {
    c.get_commitment(work::GetCommitmentRequest {
        commitment_id: id.into(),
    })
    .await
    .unwrap()
    .into_inner()
}

fn terms() -> Option<rec::Terms> {
    Some(rec::Terms {
        title: "report".into(),
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn gates_axes_and_revoke_parties_are_shown() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .party("carol")
        .party("dave")
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let bob = Signer::from_skey(node.party_skey("bob").trim()).unwrap();
    let carol = Signer::from_skey(node.party_skey("carol").trim()).unwrap();
    let mut c = node.work().await.unwrap();

    // c-1: requested of bob, promised, a 2-participant all-gate, an executor's running claim.
    let req = Operation::Request(rec::Request {
        candidate: p("bob"),
        principal: p("dave"),
        terms: terms(),
        ..Default::default()
    });
    submit(&mut c, &alice, "alice", "c-1", req, 0).await;
    let s = state(&mut c, "c-1").await;
    assert_eq!(s.candidates, vec![party("bob")]);
    assert_eq!(s.principal, p("dave"));
    assert_eq!(
        s.accountable,
        p("alice"),
        "the obligee is accountable by default"
    );
    assert!(s.gates.is_empty());

    submit(
        &mut c,
        &bob,
        "bob",
        "c-1",
        Operation::Promise(rec::Promise {}),
        1,
    )
    .await;
    let gate = submit(
        &mut c,
        &alice,
        "alice",
        "c-1",
        Operation::OpenCondition(rec::OpenCondition {
            condition: Some(rec::Condition {
                description: "sign-off".into(),
                addressed_to: p("carol"),
                kind: rec::GateKind::Approval as i32,
                participants: vec![party("carol"), party("dave")],
                aggregation: Some(rec::Aggregation {
                    rule: rec::AggregationRule::All as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }),
        2,
    )
    .await;
    submit(
        &mut c,
        &bob,
        "bob",
        "c-1",
        Operation::Observation(rec::Observation {
            execution: rec::ExecutionReport::Running as i32,
            heartbeat_interval_ms: 3_600_000,
            ..Default::default()
        }),
        3,
    )
    .await;

    let s = state(&mut c, "c-1").await;
    assert_eq!(s.execution, "running");
    assert_eq!(s.control, "not_declared", "no control claim yet");
    assert_eq!(
        s.liveness, "live",
        "a heartbeat within its declared interval"
    );
    assert_eq!(s.category, "waiting", "an open gate that is not satisfied");
    assert_eq!(s.gates.len(), 1);
    let g = &s.gates[0];
    assert_eq!(g.record_id, gate.record_id);
    assert_eq!(g.owner, p("alice"));
    assert_eq!(g.description, "sign-off");
    assert_eq!(g.kind, "approval");
    assert_eq!(g.aggregation, "all");
    assert_eq!(g.status, "waiting");
    let parts: Vec<_> = g
        .participants
        .iter()
        .map(|gp| (gp.party.clone().unwrap().name, gp.status.clone()))
        .collect();
    assert_eq!(
        parts,
        vec![
            ("carol".to_string(), "open".to_string()),
            ("dave".to_string(), "open".to_string())
        ]
    );
    assert!(g.answers.is_empty());

    // carol accepts on the current terms: her standing and the answer show; the gate still waits
    // for dave.
    let answer = submit_on(
        &mut c,
        &carol,
        "carol",
        "c-1",
        Operation::GateDecision(rec::GateDecision {
            answer: rec::GateAnswer::Accept as i32,
            content_digest: s.version.clone(),
            ..Default::default()
        }),
        4,
        vec![gate.record_id.clone()],
    )
    .await;
    let s = state(&mut c, "c-1").await;
    let g = &s.gates[0];
    assert_eq!(g.status, "waiting");
    assert_eq!(g.participants[0].status, "accepted");
    assert_eq!(g.participants[1].status, "open");
    assert_eq!(g.answers.len(), 1);
    assert_eq!(g.answers[0].record_id, answer.record_id);
    assert_eq!(g.answers[0].by, p("carol"));
    assert_eq!(g.answers[0].answer, "accept");
    assert!(g.answers[0].valid);

    // c-2: a queue request with two candidates; the revoke request is asked of both.
    let req = Operation::Request(rec::Request {
        queue: Some(rec::Queue {
            name: "ops".into(),
            owner: p("alice"),
            candidates: vec![party("bob"), party("carol")],
            ..Default::default()
        }),
        terms: terms(),
        ..Default::default()
    });
    submit(&mut c, &alice, "alice", "c-2", req, 5).await;
    let rv = submit(
        &mut c,
        &alice,
        "alice",
        "c-2",
        Operation::RevokeRequest(rec::RevokeRequest {
            reason: "no longer needed".into(),
        }),
        6,
    )
    .await;
    let s = state(&mut c, "c-2").await;
    assert_eq!(s.candidates, vec![party("bob"), party("carol")]);
    assert_eq!(s.open_revokes.len(), 1);
    let r = &s.open_revokes[0];
    assert_eq!(r.record_id, rv.record_id);
    assert_eq!(r.kind, "revoke_request");
    assert_eq!(r.by, p("alice"));
    assert_eq!(r.reason, "no longer needed");
    assert_eq!(r.asked_of_all, vec![party("bob"), party("carol")]);
    assert_eq!(r.asked_of, p("bob"));
    assert_eq!(s.execution, "not_started");
}
