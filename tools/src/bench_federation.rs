//! `accordctl bench federation`: two in-process nodes, A and B, peered over mutual TLS. Records
//! authored at A by a party of A for a party of B are federated A→B end to end: submitted at A,
//! routed, delivered in signed envelopes, admitted at B (record + admission declaration in B's
//! ledger), and the receipts stored back at A. Reports records per second end to end, and the
//! p50/p99 latency from submit-at-A to admitted-at-B at a paced load, beside this machine's
//! one-core Ed25519 `verify_batch` rate.
//!
//! By default both nodes are `accord-node serve` child processes in a temporary directory; with
//! `--node-a`/`--node-b` the bench targets two running nodes that are already each other's
//! peers instead, reading what a client needs (CA, operator token, party key) from their node
//! directories (`--a-dir`, `--b-dir`).

use crate::inproc::{InProcNode, Placement, admin_request};
use accord_proto::note::Signer;
use accord_proto::pb::admin::v1::{self as admin, admin_service_client::AdminServiceClient};
use accord_proto::pb::record::v1::{
    self as rec, PartyRef, Record, SignedRecord, record::Operation,
};
use accord_proto::pb::work::v1::{
    ListRecordsRequest, SubmitBatchRequest, SubmitRequest, submit_result,
    work_service_client::WorkServiceClient,
};
use accord_proto::signing;
use anyhow::{Context, Result, anyhow};
use hdrhistogram::Histogram;
use prost::Message;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Options of `accordctl bench federation`.
#[derive(Debug, Clone, clap::Args)]
pub struct FederationArgs {
    /// Records in the throughput phase.
    #[arg(long, default_value_t = 20_000)]
    pub records: usize,
    /// Concurrent submitting clients at A.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Records per `SubmitBatch` call at A in the throughput phase (1 = unary `Submit`). Batches
    /// keep A's appends from bounding the figure, which is about federation (issue 14).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// A's `federation.batch_size` (records per envelope); 0 = the node's default.
    #[arg(long, default_value_t = 0)]
    pub envelope: usize,
    /// A's `federation.max_in_flight` (envelopes in flight to B); 0 = the node's default. `1`
    /// is delivery as it was before pipelining (issue 14), for A/B runs of one build.
    #[arg(long, default_value_t = 0)]
    pub in_flight: usize,
    /// Approximate encoded record size in bytes.
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// Records in the latency phase.
    #[arg(long, default_value_t = 500)]
    pub latency_records: usize,
    /// Offered load in the latency phase, records per second (0 = half the measured rate).
    #[arg(long, default_value_t = 0.0)]
    pub latency_rate: f64,
    /// Run both nodes inside accordctl's process instead of as `accord-node serve` children.
    #[arg(long)]
    pub in_process: bool,
    /// A short run (well under 40 s) so that CI runs every bench once.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object as the last line (same as `--output json`).
    #[arg(long)]
    pub json: bool,
    /// Target this running node as A (`https://HOST:PORT`) instead of starting two; B must be
    /// one of its peers and it one of B's.
    #[arg(long, requires_all = ["a_dir", "node_b", "b_dir"], conflicts_with = "in_process")]
    pub node_a: Option<String>,
    /// A's node directory (`accord-node init`'s): its `accord.toml` (the organisation name), CA,
    /// operator token (queue depth) and the key of `--party-a`.
    #[arg(long, requires = "node_a")]
    pub a_dir: Option<std::path::PathBuf>,
    /// The running node B (`https://HOST:PORT`), where admission is observed.
    #[arg(long, requires = "node_a")]
    pub node_b: Option<String>,
    /// B's node directory: its `accord.toml`, CA and operator token (ledger reads).
    #[arg(long, requires = "node_a")]
    pub b_dir: Option<std::path::PathBuf>,
    /// The party of A that authors the records.
    #[arg(long, default_value = "alice")]
    pub party_a: String,
    /// The party of B the records are addressed to.
    #[arg(long, default_value = "bob")]
    pub party_b: String,
    /// The name the running nodes' TLS certificates carry.
    #[arg(long, default_value = "localhost")]
    pub server_name: String,
    /// The receiving node B's store: `rocksdb` (its default) or `postgres` (issue 31; with
    /// --pg-url, and --pg-password-file unless the server trusts the connection): B writes
    /// each envelope's records and their admission declarations, the write side of federation.
    #[arg(long, default_value = "rocksdb", value_parser = ["rocksdb", "postgres"], conflicts_with = "node_a")]
    pub backend: String,
    /// With --backend postgres: B's database, `postgres://user@host:port/db` (no password).
    #[arg(long, required_if_eq("backend", "postgres"))]
    pub pg_url: Option<String>,
    /// With --backend postgres: a file holding the database password.
    #[arg(long)]
    pub pg_password_file: Option<std::path::PathBuf>,
}

/// Who the records are from and for: A's party and B's, and a prefix that makes this run's
/// commitment ids new (a running node keeps the records of earlier runs).
struct Parties<'a> {
    from: (&'a str, &'a str),
    to: (&'a str, &'a str),
    run: &'a str,
}

fn record(p: &Parties<'_>, i: usize, size: usize) -> Record {
    let mut r = Record {
        author: Some(PartyRef {
            organisation: p.from.0.into(),
            name: p.from.1.into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: format!("fed-bench-{}-{i}", p.run),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: p.to.0.into(),
                name: p.to.1.into(),
            }),
            terms: Some(rec::Terms {
                title: format!("bench {i}"),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let base = r.encoded_len();
    if let Some(Operation::Request(q)) = &mut r.operation
        && let Some(t) = &mut q.terms
    {
        t.description = "x".repeat(size.saturating_sub(base + 3));
    }
    r
}

async fn queue_depth(
    c: &mut AdminServiceClient<Channel>,
    node: &InProcNode,
    peer: &str,
) -> Result<u64> {
    Ok(c.get_peer_health(admin_request(
        node,
        admin::GetPeerHealthRequest { name: peer.into() },
    )?)
    .await?
    .into_inner()
    .queue_depth)
}

async fn ledger_size(c: &mut AdminServiceClient<Channel>, node: &InProcNode) -> Result<u64> {
    Ok(
        c.get_status(admin_request(node, admin::GetStatusRequest {})?)
            .await?
            .into_inner()
            .ledger_size,
    )
}

/// `accordctl bench federation`.
pub async fn run(mut a: FederationArgs, mut out: crate::output::Output) -> Result<()> {
    if a.json {
        out = crate::output::Output::Json;
    }
    if a.quick {
        a.records = a.records.min(2_000);
        a.latency_records = a.latency_records.min(200);
    }
    let placement = if a.in_process {
        Placement::InProcess
    } else {
        Placement::Child
    };
    let tmp = tempfile::tempdir()?;
    // `--envelope N`: at most N records per envelope (the sender's `batch_size`).
    let mut extra = if a.envelope > 0 {
        format!("batch_size = {}\n", a.envelope)
    } else {
        String::new()
    };
    if a.in_flight > 0 {
        extra.push_str(&format!("max_in_flight = {}\n", a.in_flight));
    }
    let (na, nb) = match (&a.node_a, &a.a_dir, &a.node_b, &a.b_dir) {
        (Some(ua), Some(da), Some(ub), Some(db)) => (
            InProcNode::running(da, ua, &a.server_name)?,
            InProcNode::running(db, ub, &a.server_name)?,
        ),
        _ => {
            let b_storage = crate::bench::storage_section(
                &a.backend,
                a.pg_url.as_deref(),
                a.pg_password_file.as_deref(),
            )?;
            crate::inproc::start_pair(tmp.path(), placement, &extra, &b_storage).await?
        }
    };
    let remote = a.node_a.is_some();
    let alice: Signer = na.party(&a.party_a)?;
    let mut admin_a = AdminServiceClient::new(na.channel().await?);
    let mut admin_b = AdminServiceClient::new(nb.channel().await?);
    // A must federate to B: its peer health answers for B (an unknown peer is NotFound).
    let q0 = queue_depth(&mut admin_a, &na, &nb.name)
        .await
        .with_context(|| format!("{} has no peer {}: add it first", na.name, nb.name))?;
    if q0 > 0 && remote {
        eprintln!(
            "note: {} already queues {q0} records for {}",
            na.name, nb.name
        );
    }
    let run_id = format!("{:016x}", rand::random::<u64>());
    let parties = Parties {
        from: (&na.name, &a.party_a),
        to: (&nb.name, &a.party_b),
        run: &run_id,
    };
    let chans = [
        na.channel().await?,
        na.channel().await?,
        na.channel().await?,
        na.channel().await?,
    ];

    // Throughput: N records submitted at A by many clients; done when A's outbox for B is
    // empty (every envelope answered with receipts, stored at A) and B holds each record and its
    // admission declaration.
    eprintln!("signing {} records of ~{} bytes ...", a.records, a.size);
    let recs: Arc<Vec<SignedRecord>> = Arc::new(
        (0..a.records)
            .map(|i| signing::sign_record(&alice, &record(&parties, i, a.size)))
            .collect(),
    );
    let b0 = ledger_size(&mut admin_b, &nb).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..a.clients.max(1) {
        let (recs, next) = (recs.clone(), next.clone());
        let mut client = WorkServiceClient::new(chans[c % chans.len()].clone());
        let chunk = a.batch.max(1);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(chunk, Ordering::Relaxed);
                if i >= recs.len() {
                    break;
                }
                if chunk == 1 {
                    client
                        .submit(SubmitRequest {
                            record: Some(recs[i].clone()),
                        })
                        .await?;
                    continue;
                }
                let end = (i + chunk).min(recs.len());
                let results = client
                    .submit_batch(SubmitBatchRequest {
                        records: recs[i..end].to_vec(),
                    })
                    .await?
                    .into_inner()
                    .results;
                if let Some(bad) = results
                    .iter()
                    .find(|r| !matches!(r.result, Some(submit_result::Result::Ok(_))))
                {
                    anyhow::bail!("a record of the batch was not recorded at A: {bad:?}");
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let submitted = start.elapsed();
    let want_b = b0 + 2 * a.records as u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let b = ledger_size(&mut admin_b, &nb).await?;
        let q = queue_depth(&mut admin_a, &na, &nb.name).await?;
        if b >= want_b && q == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "federation did not complete: B has {b}/{want_b} entries, A queues {q}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let rate = a.records as f64 / secs;

    // Latency at a paced load: submit at A, observe the admission declaration in B's ledger.
    let offered = if a.latency_rate > 0.0 {
        a.latency_rate
    } else {
        (rate / 2.0).max(1.0)
    };
    let recs: Vec<SignedRecord> = (0..a.latency_records)
        .map(|i| signing::sign_record(&alice, &record(&parties, a.records + i, a.size)))
        .collect();
    let sent: Arc<Mutex<HashMap<Vec<u8>, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let mut hist = Histogram::<u64>::new(3)?;
    let watcher = {
        let sent = sent.clone();
        let mut work = nb.work().await?;
        let from = ledger_size(&mut admin_b, &nb).await?;
        let n = recs.len();
        tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let mut at = from;
            let deadline = Instant::now() + Duration::from_secs(300);
            while (h.len() as usize) < n && Instant::now() < deadline {
                let mut s = work
                    .list_records(ListRecordsRequest {
                        from_sequence: at,
                        limit: 0,
                    })
                    .await?
                    .into_inner();
                while let Some(e) = s.message().await? {
                    at = e.sequence + 1;
                    let Some(signed) = e.record else { continue };
                    if let Ok(Record {
                        operation: Some(Operation::Admission(adm)),
                        ..
                    }) = Record::decode(signed.payload.as_ref())
                        && let Some(t0) = sent
                            .lock()
                            .ok()
                            .and_then(|m| m.get(adm.record_id.as_ref()).copied())
                    {
                        h.record(t0.elapsed().as_micros() as u64).ok();
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            anyhow::Ok(h)
        })
    };
    let mut client = WorkServiceClient::new(chans[0].clone());
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / offered));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut inflight = Vec::new();
    let progress = crate::output::bar(recs.len() as u64, "paced submissions");
    for r in recs {
        tick.tick().await;
        progress.inc(1);
        let id = signing::record_id(&r.payload_type, &r.payload).to_vec();
        if let Ok(mut m) = sent.lock() {
            m.insert(id, Instant::now());
        }
        let mut c = client.clone();
        inflight.push(tokio::spawn(async move {
            c.submit(SubmitRequest { record: Some(r) })
                .await
                .map(|_| ())
        }));
        client = WorkServiceClient::new(chans[inflight.len() % chans.len()].clone());
    }
    for t in inflight {
        t.await?.context("submit")?;
    }
    progress.finish_and_clear();
    hist.add(watcher.await??)?;
    na.stop().await?;
    nb.stop().await?;

    let verify = crate::bench::ed25519_batch_rate(1, a.size);
    if out == crate::output::Output::Json {
        let q = |x: f64| hist.value_at_quantile(x) as f64 / 1000.0;
        crate::output::json(&serde_json::json!({
            "bench": "federation",
            "records": a.records,
            "quick": a.quick,
            "backend_b": a.backend,
            "placement": if remote { "remote" } else if a.in_process { "in_process" } else { "child_process" },
            "verify_batch_per_s_1core": verify,
            "ratio": rate / verify,
            "p50_ms_half_load": q(0.5),
            "p99_ms_half_load": q(0.99),
            "record_bytes": a.size,
            "clients": a.clients,
            "submit_batch": a.batch,
            "envelope_records": a.envelope,
            "max_in_flight": a.in_flight,
            "federated_per_s": rate,
            "seconds": secs,
            "submit_seconds": submitted.as_secs_f64(),
            "limit": {"what": "Ed25519 verify_batch/s", "cores": 1, "per_s": verify},
            "ratio_to_limit": rate / verify,
            "latency": {
                "offered_per_s": offered,
                "records": hist.len(),
                "submit_to_admitted_ms": {"p50": q(0.5), "p99": q(0.99)},
            },
        }));
        return Ok(());
    }
    println!();
    println!(
        "accordctl bench federation — A→B, {} records of ~{} B, {} clients at A",
        a.records, a.size, a.clients
    );
    println!(
        "  federated end to end (admitted at B, receipts stored at A): {rate:>10.0} records/s  ({:.2} s; submits took {:.2} s)",
        secs,
        submitted.as_secs_f64()
    );
    println!(
        "  Ed25519 verify_batch on one core:                          {verify:>10.0} signatures/s"
    );
    println!(
        "  latency submit-at-A → admitted-at-B at {offered:.0}/s offered ({} records): p50 {:>7.2} ms   p99 {:>7.2} ms",
        hist.len(),
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0
    );
    Ok(())
}
