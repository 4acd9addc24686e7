//! `accordctl bench`: load generators whose figures go into BENCHMARKS.md. Every run is bounded
//! in count and time and talks only to servers it starts itself on 127.0.0.1.

use crate::inproc::InProcNode;
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{
    self as rec, PartyRef, Record, SignedRecord, record::Operation,
};
use accord_proto::pb::work::v1::{SubmitRequest, work_service_client::WorkServiceClient};
use accord_proto::signing;
use anyhow::Result;
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Options of `accordctl bench append`.
#[derive(Debug, Clone, clap::Args)]
pub struct AppendArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Records in the throughput phase.
    #[arg(long, default_value_t = 40_000)]
    pub records: usize,
    /// Approximate encoded record size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// gRPC connections the clients share.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Duration of the half-load latency phase, seconds.
    #[arg(long, default_value_t = 5)]
    pub latency_secs: u64,
}

fn record(org: &str, party: &str, i: usize, size: usize) -> Record {
    let mut r = Record {
        author: Some(PartyRef {
            organisation: org.into(),
            name: party.into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: format!("bench-{i}"),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: org.into(),
                name: "bob".into(),
            }),
            terms: Some(rec::Terms {
                title: format!("bench {i}"),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let base = prost::Message::encoded_len(&r);
    if let Some(Operation::Request(q)) = &mut r.operation
        && let Some(t) = &mut q.terms
    {
        t.description = "x".repeat(size.saturating_sub(base + 3));
    }
    r
}

/// Pre-signs `n` records from `start` (signing is the client's cost, not the node's).
fn sign_all(alice: &Signer, start: usize, n: usize, size: usize) -> Vec<SignedRecord> {
    (start..start + n)
        .map(|i| signing::sign_record(alice, &record("bench", "alice", i, size)))
        .collect()
}

/// Measures this machine's Ed25519 batch verification rate (signatures per second) on `threads`
/// threads, with the same message size as the records.
pub fn ed25519_batch_rate(threads: usize, msg_size: usize) -> f64 {
    use ed25519_dalek::{Signer as _, SigningKey};
    let key = SigningKey::generate(&mut rand::rngs::OsRng);
    let msgs: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; msg_size]).collect();
    let sigs: Vec<_> = msgs.iter().map(|m| key.sign(m)).collect();
    let vks = vec![key.verifying_key(); msgs.len()];
    let rounds = 40;
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let refs: Vec<&[u8]> = msgs.iter().map(|m| m.as_slice()).collect();
                for _ in 0..rounds {
                    ed25519_dalek::verify_batch(&refs, &sigs, &vks).expect("valid batch");
                }
            });
        }
    });
    (threads * rounds * msgs.len()) as f64 / start.elapsed().as_secs_f64()
}

/// `accordctl bench append`: recorded appends per second of signed 1 KiB records from many
/// concurrent clients (group commit), then p50/p99 latency at half that load.
pub async fn append(a: AppendArgs, out: crate::output::Output) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let node = InProcNode::start(tmp.path(), "bench", &["alice"], |_| {}).await?;
    let alice = node.party("alice")?;
    let mut chans = Vec::new();
    for _ in 0..a.connections.max(1) {
        chans.push(node.channel().await?);
    }
    eprintln!("signing {} records of ~{} bytes ...", a.records, a.size);
    let recs = Arc::new(sign_all(&alice, 0, a.records, a.size));
    let next = Arc::new(AtomicUsize::new(0));
    let progress = crate::output::bar(a.records as u64, "appending (full load)");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..a.clients {
        let (recs, next, progress) = (recs.clone(), next.clone(), progress.clone());
        let mut client = WorkServiceClient::new(chans[c % chans.len()].clone());
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(r) = recs.get(i) else { break };
                let t = Instant::now();
                client
                    .submit(SubmitRequest {
                        record: Some(r.clone()),
                    })
                    .await?;
                h.record(t.elapsed().as_micros() as u64).ok();
                progress.inc(1);
            }
            anyhow::Ok(h)
        }));
    }
    let mut hist = Histogram::<u64>::new(3)?;
    for t in tasks {
        hist.add(t.await??)?;
    }
    progress.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let rate = a.records as f64 / secs;

    // Half load: each client paces itself so that together they offer rate / 2.
    let half = rate / 2.0;
    let per_client = Duration::from_secs_f64(a.clients as f64 / half);
    let n_half = (half * a.latency_secs as f64) as usize;
    let recs = Arc::new(sign_all(&alice, a.records, n_half, a.size));
    let next = Arc::new(AtomicUsize::new(0));
    let progress = crate::output::bar(n_half as u64, "appending (half load)");
    let mut tasks = Vec::new();
    for c in 0..a.clients {
        let (recs, next, progress) = (recs.clone(), next.clone(), progress.clone());
        let mut client = WorkServiceClient::new(chans[c % chans.len()].clone());
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            let mut tick = tokio::time::interval(per_client);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            loop {
                tick.tick().await;
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(r) = recs.get(i) else { break };
                let t = Instant::now();
                client
                    .submit(SubmitRequest {
                        record: Some(r.clone()),
                    })
                    .await?;
                h.record(t.elapsed().as_micros() as u64).ok();
                progress.inc(1);
            }
            anyhow::Ok(h)
        }));
    }
    let mut lat = Histogram::<u64>::new(3)?;
    for t in tasks {
        lat.add(t.await??)?;
    }
    progress.finish_and_clear();
    node.stop().await?;

    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let verify = ed25519_batch_rate(cores, a.size);
    if out == crate::output::Output::Json {
        crate::output::json(&serde_json::json!({
            "bench": "append",
            "clients": a.clients,
            "records": a.records,
            "record_bytes": a.size,
            "connections": a.connections,
            "appends_per_s": rate,
            "limit": {"what": "Ed25519 verify_batch/s", "cores": cores, "per_s": verify},
            "ratio_to_limit": rate / verify,
            "full_load_latency_ms": {"p50": ms(hist.value_at_quantile(0.5)), "p99": ms(hist.value_at_quantile(0.99))},
            "half_load": {
                "offered_per_s": half,
                "records": lat.len(),
                "latency_ms": {"p50": ms(lat.value_at_quantile(0.5)), "p99": ms(lat.value_at_quantile(0.99))},
            },
        }));
        return Ok(());
    }
    println!();
    println!(
        "accordctl bench append — {} clients, {} records of ~{} B, {} connections",
        a.clients, a.records, a.size, a.connections
    );
    println!("  recorded appends/s (signatures verified, synced group commit): {rate:>10.0}");
    println!("  Ed25519 verify_batch/s on this machine's {cores} cores:            {verify:>10.0}");
    println!(
        "  ratio appends / batch-verify:                                  {:>10.1}%",
        100.0 * rate / verify
    );
    println!(
        "  latency at full load:   p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(hist.value_at_quantile(0.5)),
        ms(hist.value_at_quantile(0.99))
    );
    println!(
        "  latency at half load ({half:.0}/s offered, {} records): p50 {:>7.2} ms   p99 {:>7.2} ms",
        lat.len(),
        ms(lat.value_at_quantile(0.5)),
        ms(lat.value_at_quantile(0.99))
    );
    Ok(())
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}
