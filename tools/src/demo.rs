//! `accordctl demo`: Accord's main job on one machine. Two organisations' nodes (acme, globex)
//! and two independent witnesses run in this process on 127.0.0.1:0, in a temporary directory.
//! A commitment crosses the organisations — alice@acme requests, bob@globex promises and states,
//! alice accepts — and every record is printed with its outcome and its durability as it advances:
//! recorded → included → witnessed on its author's node, federated → admitted at the peer. An
//! invalid operation is rejected and recorded; both nodes derive the same state.

use crate::creds::WorkClient;
use crate::inproc::{InProcNode, InProcWitness, add_peer, init_node};
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing;
use anyhow::Result;
use std::time::Duration;

fn party(org: &str, name: &str) -> Option<PartyRef> {
    Some(PartyRef {
        organisation: org.into(),
        name: name.into(),
    })
}

fn rec(org: &str, author: &str, op: Operation) -> Record {
    Record {
        author: party(org, author),
        declared_at_unix_ms: accord_node::clock::Clock::system().now_ms(),
        commitment_id: "report-q3".into(),
        operation: Some(op),
        ..Default::default()
    }
}

struct Submitted {
    node: &'static str,
    op: &'static str,
    id: Vec<u8>,
}

async fn submit(
    c: &mut WorkClient,
    node: &'static str,
    who: &Signer,
    r: Record,
    op: &'static str,
) -> Result<Submitted> {
    let author = r.author.clone().unwrap_or_default();
    let resp = c
        .submit(work::SubmitRequest {
            record: Some(signing::sign_record(who, &r)),
        })
        .await?
        .into_inner();
    let o = resp.outcome.clone().unwrap_or_default();
    println!(
        "  {node:<7} #{:<3} {op:<8} by {}/{:<6} {}  {}",
        resp.sequence,
        author.organisation,
        author.name,
        hex::encode(&resp.record_id[..6]),
        if o.applied {
            "recorded, applied".to_string()
        } else if o.rejection_code == "awaiting_sequence" {
            // Issue 26: the commitment's home orders its records; its decision follows.
            "recorded, awaiting the commitment's home to order it".to_string()
        } else {
            format!("recorded, REJECTED ({})", o.rejection_code)
        }
    );
    Ok(Submitted {
        node,
        op,
        id: resp.record_id.to_vec(),
    })
}

async fn durability(c: &mut WorkClient, id: &[u8]) -> Result<work::GetDurabilityResponse> {
    Ok(c.get_durability(work::GetDurabilityRequest {
        record_id: id.to_vec().into(),
    })
    .await?
    .into_inner())
}

fn label(d: work::Durability) -> &'static str {
    use work::Durability as D;
    match d {
        D::Recorded => "recorded",
        D::Included => "included",
        D::Witnessed => "witnessed",
        D::Federated => "federated",
        D::Admitted => "admitted",
        D::Quarantined => "quarantined",
        D::Rejected => "rejected",
        D::ActedUpon => "acted upon",
        _ => "received",
    }
}

/// Runs the demo.
pub async fn run() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path();
    println!(
        "Accord demo — two organisations and two witnesses on this machine, in {}\n",
        root.display()
    );
    let progress = crate::output::bar(6, "starting");
    let (_, acme_key) = init_node(root, "acme", &["alice"])?;
    let (_, globex_key) = init_node(root, "globex", &["bob"])?;
    let logs = [
        ("acme.accord/log", acme_key.as_str()),
        ("globex.accord/log", globex_key.as_str()),
    ];
    progress.inc(1);
    let w1 = InProcWitness::start_for(root, "witness-one.example", &logs).await?;
    progress.inc(1);
    let w2 = InProcWitness::start_for(root, "witness-two.example", &logs).await?;
    progress.inc(1);
    let entries = format!("{}{}", w1.node_config_entry(), w2.node_config_entry());
    let tune = |t: &mut String| {
        *t = t
            .replace(
                "checkpoint_interval_ms = 1000",
                "checkpoint_interval_ms = 250",
            )
            .replace("k = 0", "k = 2");
        t.push_str(&entries);
    };
    let acme = InProcNode::start_initialised(root, "acme", tune).await?;
    progress.inc(1);
    let globex = InProcNode::start_initialised(root, "globex", tune).await?;
    progress.inc(1);
    println!(
        "witnesses on {} and {} co-sign both logs (policy: K = 2 of 2)",
        w1.grpc, w2.grpc
    );
    println!("node acme   on {} (gRPC over TLS)", acme.addr);
    println!("node globex on {} (gRPC over TLS)", globex.addr);
    let mut ca = acme.work().await?;
    let mut cg = globex.work().await?;
    add_peer(&acme, &globex, &["bob"]).await?;
    add_peer(&globex, &acme, &["alice"]).await?;
    progress.finish_and_clear();
    println!("the nodes are peers (mutual TLS; each knows the other's keys)\n");

    let (alice, bob) = (acme.party("alice")?, globex.party("bob")?);
    let mut ids = Vec::new();
    println!("alice@acme asks bob@globex for the Q3 report:");
    let req = rec::Request {
        candidate: party("globex", "bob"),
        terms: Some(rec::Terms {
            title: "Quarterly report".into(),
            description: "Draft and deliver".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    ids.push(
        submit(
            &mut ca,
            "acme",
            &alice,
            rec("acme", "alice", Operation::Request(req)),
            "request",
        )
        .await?,
    );
    // bob's node must know the commitment before bob can promise: wait for the request's admission.
    wait_for(&mut ca, &ids[0].id, work::Durability::Admitted).await?;
    println!("\nbob@globex promises, on his own node:");
    ids.push(
        submit(
            &mut cg,
            "globex",
            &bob,
            rec("globex", "bob", Operation::Promise(rec::Promise {})),
            "promise",
        )
        .await?,
    );
    wait_for(&mut cg, &ids[1].id, work::Durability::Admitted).await?;
    println!(
        "\nan invalid operation — alice tries to state fulfilment of bob's promise — is rejected and recorded:"
    );
    let bad = rec(
        "acme",
        "alice",
        Operation::State(rec::State {
            fulfillment_refs: vec!["doc://x".into()],
        }),
    );
    submit(&mut ca, "acme", &alice, bad, "state").await?;
    println!("\nbob states fulfilment; alice accepts:");
    let stated = rec(
        "globex",
        "bob",
        Operation::State(rec::State {
            fulfillment_refs: vec!["doc://report-q3.pdf".into()],
        }),
    );
    ids.push(submit(&mut cg, "globex", &bob, stated, "state").await?);
    wait_for(&mut cg, &ids[2].id, work::Durability::Admitted).await?;
    ids.push(
        submit(
            &mut ca,
            "acme",
            &alice,
            rec("acme", "alice", Operation::Accept(rec::Accept::default())),
            "accept",
        )
        .await?,
    );

    println!(
        "\ndurability of each record on its author's node, once its checkpoint is co-signed by both witnesses:"
    );
    wait_for(&mut ca, &ids[3].id, work::Durability::Admitted).await?;
    for s in &ids {
        let c = if s.node == "acme" { &mut ca } else { &mut cg };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let d = loop {
            let d = durability(c, &s.id).await?;
            let cosigned = d.checkpoint.contains("witness-one.example")
                && d.checkpoint.contains("witness-two.example");
            if cosigned || tokio::time::Instant::now() > deadline {
                break d;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let peers: Vec<String> = d
            .peers
            .iter()
            .map(|p| {
                format!(
                    "{} at {}{}",
                    label(p.durability()),
                    p.peer,
                    if p.code.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", p.code)
                    }
                )
            })
            .collect();
        let local = if d.checkpoint.is_empty() {
            "recorded".to_string()
        } else {
            let w = if d.checkpoint.matches('\u{2014}').count() >= 3 {
                "witnessed"
            } else {
                "included"
            };
            format!(
                "{w} (cosigned checkpoint + {}-hash inclusion proof)",
                d.inclusion_proof.len()
            )
        };
        println!(
            "  {:<7} {:<8} {}  local: {local}; peer: {}",
            s.node,
            s.op,
            hex::encode(&s.id[..6]),
            peers.join(", ")
        );
    }

    let va = ca
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: "report-q3".into(),
        })
        .await?
        .into_inner();
    let vg = cg
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: "report-q3".into(),
        })
        .await?
        .into_inner();
    println!("\ncommitment report-q3 as each node derives it from the same records:");
    println!(
        "  acme:   state {} (terminal {}), category {}",
        va.state, va.terminal, va.category
    );
    println!(
        "  globex: state {} (terminal {}), category {}",
        vg.state, vg.terminal, vg.category
    );

    globex.stop().await?;
    acme.stop().await?;
    w1.stop().await?;
    w2.stop().await?;
    println!("\nnodes and witnesses stopped cleanly; the temporary directory is removed.");
    Ok(())
}

/// Waits (bounded) until the record's durability reaches `want` (on its own axis), printing the
/// steps it passes through.
async fn wait_for(c: &mut WorkClient, id: &[u8], want: work::Durability) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let d = durability(c, id).await?;
        let mut now = vec![label(d.durability())];
        now.extend(d.peers.iter().map(|p| label(p.durability())));
        for l in now {
            if !seen.contains(&l) {
                seen.push(l);
            }
        }
        if d.durability() == want || d.peers.iter().any(|p| p.durability() == want) {
            println!(
                "           {} → {}",
                hex::encode(&id[..6]),
                seen.join(" → ")
            );
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!(
                "record {} did not reach {:?} in 30 s (got {:?})",
                hex::encode(id),
                want,
                seen
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
