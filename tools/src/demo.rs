//! `accordctl demo`: Accord's main job on one machine. Starts a node in a temporary directory on
//! 127.0.0.1:0, runs a commitment's lifecycle between two of its parties (request → promise →
//! state → accept), shows an invalid operation being rejected and recorded, and prints every
//! record with its outcome and durability as the checkpointer and witnesses advance it.

use crate::inproc::InProcNode;
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::{self as work, work_service_client::WorkServiceClient};
use accord_proto::signing;
use anyhow::Result;
use std::time::Duration;
use tonic::transport::Channel;

fn party(org: &str, name: &str) -> Option<PartyRef> {
    Some(PartyRef {
        organisation: org.into(),
        name: name.into(),
    })
}

fn rec(author: &str, commitment: &str, op: Operation) -> Record {
    Record {
        author: party("acme", author),
        declared_at_unix_ms: accord_node::clock::now_ms(),
        commitment_id: commitment.into(),
        operation: Some(op),
        ..Default::default()
    }
}

async fn submit(
    c: &mut WorkServiceClient<Channel>,
    who: &Signer,
    r: Record,
) -> Result<work::SubmitResponse> {
    let op = r.operation.as_ref().map(op_name).unwrap_or("?");
    let author = r.author.clone().unwrap_or_default();
    let resp = c
        .submit(work::SubmitRequest {
            record: Some(signing::sign_record(who, &r)),
        })
        .await?
        .into_inner();
    let o = resp.outcome.clone().unwrap_or_default();
    println!(
        "  #{:<3} {:<18} by {}/{:<6} {}  {}",
        resp.sequence,
        op,
        author.organisation,
        author.name,
        hex::encode(&resp.record_id[..6]),
        if o.applied {
            "applied".to_string()
        } else {
            format!("REJECTED ({}: {})", o.rejection_code, o.rejection_detail)
        }
    );
    Ok(resp)
}

fn op_name(op: &Operation) -> &'static str {
    match op {
        Operation::Request(_) => "request",
        Operation::Promise(_) => "promise",
        Operation::State(_) => "state",
        Operation::Accept(_) => "accept",
        Operation::Reject(_) => "reject",
        Operation::Counter(_) => "counter",
        Operation::AcceptCounter(_) => "accept_counter",
        _ => "operation",
    }
}

/// Runs the demo.
pub async fn run() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    println!(
        "Accord demo — everything runs on this machine, in {}",
        tmp.path().display()
    );
    let node = InProcNode::start(tmp.path(), "acme", &["alice", "bob"], |t| {
        *t = t.replace(
            "checkpoint_interval_ms = 1000",
            "checkpoint_interval_ms = 200",
        );
    })
    .await?;
    println!("node acme serving gRPC over TLS on {}", node.addr);
    let (alice, bob) = (node.party("alice")?, node.party("bob")?);
    let mut c = WorkServiceClient::new(node.channel().await?);

    println!("\nalice asks bob for a commitment; bob promises, states fulfilment, alice accepts:");
    let mut ids = Vec::new();
    let req = rec::Request {
        candidate: party("acme", "bob"),
        terms: Some(rec::Terms {
            title: "Quarterly report".into(),
            description: "Draft and deliver".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    ids.push(
        submit(
            &mut c,
            &alice,
            rec("alice", "report-q3", Operation::Request(req)),
        )
        .await?,
    );
    ids.push(
        submit(
            &mut c,
            &bob,
            rec("bob", "report-q3", Operation::Promise(rec::Promise {})),
        )
        .await?,
    );
    println!(
        "\nan invalid operation — alice tries to state fulfilment of bob's promise — is rejected and recorded:"
    );
    ids.push(
        submit(
            &mut c,
            &alice,
            rec(
                "alice",
                "report-q3",
                Operation::State(rec::State {
                    fulfillment_refs: vec!["doc://x".into()],
                }),
            ),
        )
        .await?,
    );
    println!();
    ids.push(
        submit(
            &mut c,
            &bob,
            rec(
                "bob",
                "report-q3",
                Operation::State(rec::State {
                    fulfillment_refs: vec!["doc://report-q3.pdf".into()],
                }),
            ),
        )
        .await?,
    );
    ids.push(
        submit(
            &mut c,
            &alice,
            rec(
                "alice",
                "report-q3",
                Operation::Accept(rec::Accept::default()),
            ),
        )
        .await?,
    );

    let view = c
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: "report-q3".into(),
        })
        .await?
        .into_inner();
    println!(
        "\ncommitment report-q3: state {} (terminal: {}), category {}",
        view.state, view.terminal, view.category
    );
    for h in &view.history {
        let o = h.outcome.clone().unwrap_or_default();
        println!(
            "  history #{:<3} {:<14} {}",
            h.sequence,
            h.operation,
            if o.applied { "applied" } else { "rejected" }
        );
    }

    println!("\ndurability as the checkpointer signs the Merkle log:");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let d = c
            .get_durability(work::GetDurabilityRequest {
                record_id: ids[4].record_id.clone(),
            })
            .await?
            .into_inner();
        if d.durability() >= work::Durability::Included || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for r in &ids {
        let d = c
            .get_durability(work::GetDurabilityRequest {
                record_id: r.record_id.clone(),
            })
            .await?
            .into_inner();
        println!(
            "  #{:<3} {}  {:?}{}",
            d.sequence,
            hex::encode(&r.record_id[..6]),
            d.durability(),
            if d.inclusion_proof.is_empty() && d.checkpoint.is_empty() {
                String::new()
            } else {
                format!(" (inclusion proof: {} hashes)", d.inclusion_proof.len())
            }
        );
    }
    node.stop().await?;
    println!("\nnode stopped cleanly; the temporary directory is removed.");
    Ok(())
}
