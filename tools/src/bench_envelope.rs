//! `accordctl bench envelope`: two nodes, acme and globex (child processes by default, like
//! `bench federation`), peered over mutual TLS. Each envelope is a `budget_transfer` of 1 from
//! a commitment's budget at acme to one at globex, started at acme (the coordinator; both
//! organisations participate). Reports envelopes COMMITTED per second at both organisations
//! under concurrent starts, and the start → COMMITTED latency (at the coordinator, and at the
//! participant) one envelope at a time. Issue 13's design target: commit within three
//! federation round trips plus one group commit per phase at each participant.

use crate::inproc::{InProcNode, Placement, admin_request};
use accord_proto::pb::envelope::v1::{self as pb, envelope_service_client::EnvelopeServiceClient};
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::DeclareRequest;
use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Options of `accordctl bench envelope`.
#[derive(Debug, Clone, clap::Args)]
pub struct EnvelopeArgs {
    /// Envelopes in the throughput phase.
    #[arg(long, default_value_t = 500)]
    pub envelopes: usize,
    /// Concurrent starting clients at acme.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Envelopes in the latency phase (one at a time).
    #[arg(long, default_value_t = 100)]
    pub latency_envelopes: usize,
    /// Run both nodes inside accordctl's process instead of as `accord-node serve` children.
    #[arg(long)]
    pub in_process: bool,
    /// A short run so that CI runs every bench once.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object as the last line (same as `--output json`).
    #[arg(long)]
    pub json: bool,
}

fn token(node: &InProcNode, party: &str) -> Result<String> {
    Ok(
        std::fs::read_to_string(node.dir.join(format!("parties/{party}.token")))?
            .trim()
            .to_string(),
    )
}

fn authed<T>(t: T, token: &str) -> Result<tonic::Request<T>> {
    let mut r = tonic::Request::new(t);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(r)
}

/// `party` of `node` requests commitment `c` from itself with a large budget.
async fn budget(node: &InProcNode, party: &str, c: &str) -> Result<()> {
    request(node, party, c, (&node.name, party)).await
}

/// `party` of `node` requests commitment `c` from `candidate` (org, party) with a large budget.
async fn request(node: &InProcNode, party: &str, c: &str, candidate: (&str, &str)) -> Result<()> {
    let r = Record {
        author: Some(PartyRef {
            organisation: node.name.clone(),
            name: party.into(),
        }),
        commitment_id: c.into(),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: candidate.0.into(),
                name: candidate.1.into(),
            }),
            terms: Some(rec::Terms {
                title: "envelope bench budget".into(),
                budget: Some(rec::Budget {
                    amount: 1_000_000_000,
                    unit: "EUR".into(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let mut w = accord_proto::pb::work::v1::work_service_client::WorkServiceClient::new(
        node.channel().await?,
    );
    let resp = w
        .declare(authed(
            DeclareRequest { record: Some(r) },
            &token(node, party)?,
        )?)
        .await?
        .into_inner();
    if !resp.outcome.is_some_and(|o| o.applied) {
        return Err(anyhow!(
            "the budget commitment was not applied at {}",
            node.name
        ));
    }
    Ok(())
}

fn transfer(id: &str) -> pb::StartRequest {
    let change = |kind: pb::ChangeKind, account: &str| pb::EnvelopeChange {
        kind: kind as i32,
        account: account.into(),
        amount: 1,
        ..Default::default()
    };
    pb::StartRequest {
        envelope: id.into(),
        envelope_type: "budget_transfer".into(),
        participants: vec![
            pb::EnvelopeParticipant {
                participant: "acme".into(),
                changes: vec![change(pb::ChangeKind::Debit, "bench-src")],
            },
            pb::EnvelopeParticipant {
                participant: "globex".into(),
                changes: vec![change(pb::ChangeKind::Credit, "bench-dst")],
            },
        ],
    }
}

async fn phase(c: &mut EnvelopeServiceClient<Channel>, node: &InProcNode, id: &str) -> String {
    let Ok(req) = admin_request(
        node,
        pb::GetRequest {
            envelope: id.into(),
        },
    ) else {
        return String::new();
    };
    match c.get(req).await {
        Ok(r) => r.into_inner().envelope.map(|e| e.phase).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The design target's parts, measured in this run (issue 13 item 9): the time to record one
/// record at acme (Declare: one RPC and one group commit) and the one-way federation delay
/// (from that record being recorded at acme until globex shows its commitment: the sender's
/// batch, the envelope over mutual TLS, globex's admission and its group commits). A round trip
/// is two one-way delays.
async fn round_trips(
    na: &InProcNode,
    nb: &InProcNode,
    n: usize,
) -> Result<(Histogram<u64>, Histogram<u64>)> {
    use accord_proto::pb::work::v1::{
        GetCommitmentRequest, work_service_client::WorkServiceClient,
    };
    let mut commit = Histogram::<u64>::new(3)?;
    let mut one_way = Histogram::<u64>::new(3)?;
    let mut wb = WorkServiceClient::new(nb.channel().await?);
    for i in 0..n {
        let c = format!("rtt-{i}");
        let t0 = Instant::now();
        request(na, "alice", &c, ("globex", "bob")).await?;
        let recorded = Instant::now();
        commit
            .record(recorded.duration_since(t0).as_micros() as u64)
            .ok();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let req = admin_request(
                nb,
                GetCommitmentRequest {
                    commitment_id: c.clone(),
                },
            )?;
            if wb.get_commitment(req).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(anyhow!("{c} never reached globex"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        one_way.record(recorded.elapsed().as_micros() as u64).ok();
    }
    Ok((commit, one_way))
}

/// Waits until `node` holds commitment `c` (federation delivered it).
async fn arrived(node: &InProcNode, c: &str) -> Result<()> {
    use accord_proto::pb::work::v1::{
        GetCommitmentRequest, work_service_client::WorkServiceClient,
    };
    let mut w = WorkServiceClient::new(node.channel().await?);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let req = admin_request(
            node,
            GetCommitmentRequest {
                commitment_id: c.to_string(),
            },
        )?;
        if w.get_commitment(req).await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!("{c} never reached {}", node.name));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn open_count(c: &mut EnvelopeServiceClient<Channel>, node: &InProcNode) -> Result<usize> {
    Ok(c.list(admin_request(node, pb::ListRequest::default())?)
        .await?
        .into_inner()
        .envelopes
        .len())
}

/// `accordctl bench envelope`.
pub async fn run(mut a: EnvelopeArgs, mut out: crate::output::Output) -> Result<()> {
    if a.json {
        out = crate::output::Output::Json;
    }
    if a.quick {
        a.envelopes = a.envelopes.min(100);
        a.latency_envelopes = a.latency_envelopes.min(20);
    }
    let placement = if a.in_process {
        Placement::InProcess
    } else {
        Placement::Child
    };
    let tmp = tempfile::tempdir()?;
    let (na, nb) = crate::inproc::start_pair(tmp.path(), placement, "", "").await?;
    budget(&na, "alice", "bench-src").await?;
    // alice holds both budgets (issue 27: a participant moves a budget only with its holder's
    // consent): she requests bench-dst from bob, and globex holds it once it arrives.
    request(&na, "alice", "bench-dst", ("globex", "bob")).await?;
    arrived(&nb, "bench-dst").await?;
    let alice = token(&na, "alice")?;
    let mut ca = EnvelopeServiceClient::new(na.channel().await?);
    let mut cb = EnvelopeServiceClient::new(nb.channel().await?);
    let (group_commit, one_way) = round_trips(&na, &nb, if a.quick { 10 } else { 50 }).await?;

    // Throughput: many envelopes started concurrently; done when neither node holds an open one
    // and the last started is COMMITTED at both.
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.clients.max(1) {
        let (next, alice, n) = (next.clone(), alice.clone(), a.envelopes);
        let mut c = EnvelopeServiceClient::new(na.channel().await?);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                c.start(authed(transfer(&format!("tp-{i}")), &alice)?)
                    .await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (oa, ob) = (
            open_count(&mut ca, &na).await?,
            open_count(&mut cb, &nb).await?,
        );
        let last = format!("tp-{}", a.envelopes.saturating_sub(1));
        if oa == 0
            && ob == 0
            && phase(&mut ca, &na, &last).await == "COMMITTED"
            && phase(&mut cb, &nb, &last).await == "COMMITTED"
        {
            break;
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "envelopes did not finish: {oa} open at acme, {ob} at globex"
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = a.envelopes as f64 / secs;
    let mut committed = 0;
    for i in 0..a.envelopes {
        if phase(&mut cb, &nb, &format!("tp-{i}")).await == "COMMITTED" {
            committed += 1;
        }
    }

    // Latency: one envelope at a time, polled every millisecond at both nodes.
    let mut at_coord = Histogram::<u64>::new(3)?;
    let mut at_part = Histogram::<u64>::new(3)?;
    let progress = crate::output::bar(a.latency_envelopes as u64, "envelopes one at a time");
    for i in 0..a.latency_envelopes {
        let id = format!("lat-{i}");
        let t0 = Instant::now();
        ca.start(authed(transfer(&id), &alice)?).await?;
        let mut coord_done = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if coord_done.is_none() && phase(&mut ca, &na, &id).await == "COMMITTED" {
                coord_done = Some(t0.elapsed());
            }
            if coord_done.is_some() && phase(&mut cb, &nb, &id).await == "COMMITTED" {
                break;
            }
            if Instant::now() > deadline {
                return Err(anyhow!("{id} did not commit within 60 s"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        at_part.record(t0.elapsed().as_micros() as u64).ok();
        if let Some(d) = coord_done {
            at_coord.record(d.as_micros() as u64).ok();
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    na.stop().await?;
    nb.stop().await?;

    let q = |h: &Histogram<u64>, x: f64| h.value_at_quantile(x) as f64 / 1000.0;
    // The design target: three federation round trips plus one group commit per phase
    // (PREPARING, COMMITTING, COMMITTED) at each participant (the participants commit in
    // parallel, so three group commits on the critical path).
    let rtt_ms = 2.0 * q(&one_way, 0.5);
    let commit_ms = q(&group_commit, 0.5);
    let target_ms = 3.0 * rtt_ms + 3.0 * commit_ms;
    if out == crate::output::Output::Json {
        crate::output::json(&serde_json::json!({
            "bench": "envelope",
            "envelopes": a.envelopes,
            "committed": committed,
            "clients": a.clients,
            "quick": a.quick,
            "placement": if a.in_process { "in_process" } else { "child_process" },
            "committed_per_s": rate,
            "envelopes_committed_per_s": rate,
            "seconds": secs,
            "start_to_committed_p50_ms": q(&at_part, 0.5),
            "start_to_committed_p99_ms": q(&at_part, 0.99),
            "federation_one_way_p50_ms": q(&one_way, 0.5),
            "federation_round_trip_ms": rtt_ms,
            "group_commit_p50_ms": commit_ms,
            "design_target_ms": target_ms,
            "latency": {
                "envelopes": at_part.len(),
                "start_to_committed_coordinator_ms": {"p50": q(&at_coord, 0.5), "p99": q(&at_coord, 0.99)},
                "start_to_committed_participant_ms": {"p50": q(&at_part, 0.5), "p99": q(&at_part, 0.99)},
            },
        }));
        return Ok(());
    }
    println!();
    println!(
        "accordctl bench envelope — budget_transfer acme→globex, {} envelopes, {} clients at acme",
        a.envelopes, a.clients
    );
    println!(
        "  committed at both organisations: {rate:>8.1} envelopes/s  ({secs:.2} s; {committed}/{} COMMITTED at globex)",
        a.envelopes
    );
    println!(
        "  start → COMMITTED, one at a time ({} envelopes): coordinator p50 {:.1} ms p99 {:.1} ms; participant p50 {:.1} ms p99 {:.1} ms",
        at_part.len(),
        q(&at_coord, 0.5),
        q(&at_coord, 0.99),
        q(&at_part, 0.5),
        q(&at_part, 0.99)
    );
    println!(
        "  design target (3 federation round trips + 3 group commits): {target_ms:.1} ms — round trip {rtt_ms:.1} ms (2 × one-way p50 {:.1} ms), group commit p50 {commit_ms:.1} ms",
        q(&one_way, 0.5)
    );
    Ok(())
}
