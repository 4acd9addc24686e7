//! `accordctl bench`: load generators whose figures go into BENCHMARKS.md. Every run is bounded
//! in count and time and talks only to servers it starts itself on 127.0.0.1.

use crate::inproc::{InProcNode, Placement};
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{
    self as rec, PartyRef, Record, SignedRecord, record::Operation,
};
use accord_proto::pb::work::v1::{
    SubmitBatchRequest, SubmitRequest, submit_result, work_service_client::WorkServiceClient,
};
use accord_proto::signing;
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Options of `accordctl bench append`.
#[derive(Debug, Clone, clap::Args)]
pub struct AppendArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Records in each throughput phase (batch, then unary).
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
    /// In the half-load phase, start every client's pacing at once, so that the clients send
    /// their calls in bursts of `clients` (how figures before 2026-12-01 04:00 were taken);
    /// by default the clients are spread evenly over the period.
    #[arg(long)]
    pub burst: bool,
    /// Records per `SubmitBatch` call in the batch phase.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Run the node inside accordctl's process instead of as an `accord-node serve` child.
    #[arg(long)]
    pub in_process: bool,
    /// A short run (well under 40 s) so that CI runs every bench once; figures are not
    /// comparable with a full run.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object as the last line (same as `--output json`).
    #[arg(long)]
    pub json: bool,
    /// Target a running node at this URL instead of starting one (with --ca and --skey).
    #[arg(long, requires_all = ["ca", "skey"])]
    pub node: Option<String>,
    /// The CA certificate (PEM) of the running node's TLS certificate.
    #[arg(long)]
    pub ca: Option<std::path::PathBuf>,
    /// The signing key of one of the running node's parties (key name `org/party`); the
    /// benchmark submits records authored by that party.
    #[arg(long)]
    pub skey: Option<std::path::PathBuf>,
    /// A bearer token to send (Submit needs none: records are authenticated by signature).
    #[arg(long)]
    pub token_file: Option<std::path::PathBuf>,
    /// The TLS server name of the running node.
    #[arg(long, default_value = "localhost")]
    pub server_name: String,
    /// Before the node starts, fill its ledger with this many open commitments (one request by
    /// the node's own party each, ~256 B, nothing ever due), so that the half-load p99 is taken
    /// while the Work service clock ticks over them (issue 14, item 4). Not with --node.
    #[arg(long, default_value_t = 0, conflicts_with = "node")]
    pub open: u64,
    /// The started node's store: `rocksdb` (its default) or `postgres` (issue 31; with
    /// --pg-url, and --pg-password-file unless the server trusts the connection). Not with
    /// --node.
    #[arg(long, default_value = "rocksdb", value_parser = ["rocksdb", "postgres"], conflicts_with = "node")]
    pub backend: String,
    /// With --backend postgres: the database, `postgres://user@host:port/db` (no password).
    #[arg(long, required_if_eq("backend", "postgres"))]
    pub pg_url: Option<String>,
    /// With --backend postgres: a file holding the database password.
    #[arg(long)]
    pub pg_password_file: Option<std::path::PathBuf>,
}

impl AppendArgs {
    /// The `[storage]` section the started node's config gets (empty: RocksDB, the default).
    fn storage_section(&self) -> Result<String> {
        // The prefill writes the node's RocksDB directly (`import::bulk`).
        anyhow::ensure!(
            self.backend != "postgres" || self.open == 0,
            "--open fills a RocksDB ledger only"
        );
        storage_section(
            &self.backend,
            self.pg_url.as_deref(),
            self.pg_password_file.as_deref(),
        )
    }
}

/// A started node's `[storage]` section for `--backend` (empty: RocksDB, the default).
pub fn storage_section(
    backend: &str,
    pg_url: Option<&str>,
    pg_password_file: Option<&std::path::Path>,
) -> Result<String> {
    if backend != "postgres" {
        return Ok(String::new());
    }
    let url = pg_url.context("--pg-url")?;
    let mut s = format!("\n[storage]\nbackend = \"postgres\"\nurl = {url:?}\n");
    if let Some(p) = pg_password_file {
        let p = std::fs::canonicalize(p).with_context(|| format!("{}", p.display()))?;
        s.push_str(&format!("password_file = {:?}\n", p.display().to_string()));
    }
    Ok(s)
}

/// Fills the ledger of the node initialised under `root/name` (not running) with `n` open
/// commitments through the node's real write path ([`accord_node::import::bulk`], as `bench
/// scale` does), each a request by the node's party `alice`; returns the seconds it took.
async fn prefill_open(root: &std::path::Path, name: &str, n: u64) -> Result<f64> {
    let dir = root.join(name);
    let cfg = dir.join(accord_daemon::layout::node::CONFIG);
    let config = accord_node::config::Config::load(&cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
    let skey = std::fs::read_to_string(dir.join(accord_daemon::layout::node::party_skey("alice")))?;
    let key = Signer::from_skey(skey.trim())?;
    let (org, party) = key.name().split_once('/').unwrap_or(("bench", "alice"));
    let (org, party) = (org.to_string(), party.to_string());
    let started = Instant::now();
    let bar = crate::output::bar(n, "filling the ledger with open commitments");
    let progress = bar.clone();
    let done = accord_node::import::bulk(config, n, 4, move |i| {
        progress.inc(1);
        let r = tagged_record(&org, &party, "open", i as usize, 256);
        vec![signing::sign_record(&key, &r)]
    })
    .await
    .map_err(|e| anyhow::anyhow!("prefill: {e}"))?;
    bar.finish_and_clear();
    anyhow::ensure!(
        done.records == n && done.applied == n,
        "prefill recorded {} records, {} applied; expected {n}",
        done.records,
        done.applied
    );
    Ok(started.elapsed().as_secs_f64())
}

fn tagged_record(org: &str, party: &str, tag: &str, i: usize, size: usize) -> Record {
    let mut r = Record {
        author: Some(PartyRef {
            organisation: org.into(),
            name: party.into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: format!("{tag}-{i}"),
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

/// Pre-signs `n` records from `start` (signing is the client's cost, not the node's; it is done
/// before any clock starts).
fn sign_all(key: &Signer, tag: &str, start: usize, n: usize, size: usize) -> Vec<SignedRecord> {
    let (org, party) = key.name().split_once('/').unwrap_or(("bench", "alice"));
    (start..start + n)
        .map(|i| signing::sign_record(key, &tagged_record(org, party, tag, i, size)))
        .collect()
}

/// Measures this machine's Ed25519 batch verification rate (signatures per second) on `threads`
/// threads, with the same message size as the records: the best of three runs of about 0.2 s,
/// since a limit is what the machine can do, and one short run taken while something else
/// held a core (a node's last compaction, a profiler writing its data) read 40 % low.
pub fn ed25519_batch_rate(threads: usize, msg_size: usize) -> f64 {
    (0..3)
        .map(|_| ed25519_batch_rate_once(threads, msg_size))
        .fold(0.0, f64::max)
}

fn ed25519_batch_rate_once(threads: usize, msg_size: usize) -> f64 {
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

/// The node a bench talks to: one it started (child process or in-process), or a running one.
struct Target {
    node: Option<InProcNode>,
    chans: Vec<Channel>,
    key: Signer,
    token: Option<String>,
    /// Seconds spent filling the ledger with `--open` commitments before the node started.
    prefill_s: f64,
}

impl Target {
    async fn open(a: &AppendArgs, tmp: &std::path::Path) -> Result<Target> {
        let token = match &a.token_file {
            Some(f) => Some(std::fs::read_to_string(f)?.trim().to_string()),
            None => None,
        };
        let mut prefill_s = 0.0;
        let (node, key) = match &a.node {
            Some(_) => {
                let skey = a.skey.as_ref().context("--skey")?;
                let key = Signer::from_skey(std::fs::read_to_string(skey)?.trim())?;
                (None, key)
            }
            None => {
                let placement = if a.in_process {
                    Placement::InProcess
                } else {
                    Placement::Child
                };
                // The child's metrics listener, so that the bench can show where an append's
                // time goes (`accord_append_stage_seconds`).
                let storage = a.storage_section()?;
                let metrics = move |t: &mut String| {
                    if let Some(i) = t.find("\nlisten = ") {
                        t.insert_str(i + 1, "metrics_listen = \"127.0.0.1:0\"\n");
                    }
                    t.push_str(&storage);
                };
                let n = if a.open > 0 {
                    crate::inproc::init_node(tmp, "bench", &["alice"])?;
                    prefill_s = prefill_open(tmp, "bench", a.open).await?;
                    match placement {
                        Placement::InProcess => {
                            InProcNode::start_initialised(tmp, "bench", metrics).await?
                        }
                        Placement::Child => InProcNode::start_child(tmp, "bench", metrics).await?,
                    }
                } else {
                    InProcNode::start_placed(tmp, "bench", &["alice"], metrics, placement).await?
                };
                let key = n.party("alice")?;
                (Some(n), key)
            }
        };
        let mut chans = Vec::new();
        for _ in 0..a.connections.max(1) {
            chans.push(match (&node, &a.node) {
                (Some(n), _) => n.channel().await?,
                (None, Some(url)) => {
                    let ca = std::fs::read(a.ca.as_ref().context("--ca")?)?;
                    accord_node::connect(url, &ca, None, &a.server_name).await?
                }
                (None, None) => unreachable!("a node is started or given"),
            });
        }
        Ok(Target {
            node,
            chans,
            key,
            token,
            prefill_s,
        })
    }

    fn client(&self, i: usize) -> Result<crate::creds::WorkClient> {
        let bearer = crate::creds::Bearer::new(self.token.as_deref().unwrap_or(""))?;
        Ok(WorkServiceClient::with_interceptor(
            self.chans[i % self.chans.len()].clone(),
            bearer,
        ))
    }
}

/// Runs `clients` tasks that take records from `recs` (in chunks of `chunk`, by `SubmitBatch`
/// when `chunk > 1`, else by unary `Submit`), optionally paced to `pace` between calls per
/// client; returns the per-call latency histogram and the wall time.
async fn drive(
    target: &Target,
    recs: Arc<Vec<SignedRecord>>,
    clients: usize,
    chunk: usize,
    pace: Option<Duration>,
    burst: bool,
    label: &str,
) -> Result<(Histogram<u64>, Duration)> {
    let next = Arc::new(AtomicUsize::new(0));
    let progress = crate::output::bar(recs.len() as u64, label);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients.max(1) {
        let (recs, next, progress) = (recs.clone(), next.clone(), progress.clone());
        let mut client = target.client(c)?;
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("histogram");
            // Client c starts c/clients of a period late: together the clients offer an even
            // stream of calls, not a burst of `clients` calls at once every period.
            let mut tick = pace.map(|p| {
                let offset = if burst {
                    Duration::ZERO
                } else {
                    p.mul_f64(c as f64 / clients.max(1) as f64)
                };
                let mut t = tokio::time::interval_at(tokio::time::Instant::now() + offset, p);
                t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                t
            });
            loop {
                if let Some(t) = &mut tick {
                    t.tick().await;
                }
                let i = next.fetch_add(chunk, Ordering::Relaxed);
                if i >= recs.len() {
                    break;
                }
                let end = (i + chunk).min(recs.len());
                let t = Instant::now();
                if chunk == 1 {
                    client
                        .submit(SubmitRequest {
                            record: Some(recs[i].clone()),
                        })
                        .await?;
                } else {
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
                        anyhow::bail!("a record of the batch was not recorded: {bad:?}");
                    }
                }
                h.record(t.elapsed().as_micros() as u64).ok();
                progress.inc((end - i) as u64);
            }
            anyhow::Ok(h)
        }));
    }
    let mut hist = Histogram::<u64>::new(3)?;
    for t in tasks {
        hist.add(t.await??)?;
    }
    progress.finish_and_clear();
    Ok((hist, start.elapsed()))
}

/// `accordctl bench append`: recorded appends per second of signed 1 KiB records from many
/// concurrent clients — by `SubmitBatch`, then by unary `Submit` — then unary p50/p99 latency at
/// half the unary rate, beside this machine's Ed25519 `verify_batch` rate measured in the same
/// run. The node runs as a child process unless `--in-process` (or `--node` targets one).
pub async fn append(mut a: AppendArgs, mut out: crate::output::Output) -> Result<()> {
    if a.json {
        out = crate::output::Output::Json;
    }
    if a.quick {
        a.records = a.records.min(4_000);
        a.latency_secs = a.latency_secs.min(2);
    }
    let tmp = tempfile::tempdir()?;
    let target = Target::open(&a, tmp.path()).await?;
    let tag = format!("bench-{:08x}", rand::random::<u32>());
    eprintln!("signing {} records of ~{} bytes ...", 2 * a.records, a.size);
    let batch_recs = Arc::new(sign_all(&target.key, &tag, 0, a.records, a.size));
    let unary_recs = Arc::new(sign_all(&target.key, &tag, a.records, a.records, a.size));

    // The node's stage histograms between phases (a child node only; empty otherwise).
    let metrics_addr = target.node.as_ref().and_then(|n| n.metrics_addr);
    let stages = || async move {
        match metrics_addr {
            Some(addr) => crate::bench_stages::scrape(addr).await.unwrap_or_default(),
            None => crate::bench_stages::Stages::new(),
        }
    };
    let s0 = stages().await;
    let chunk = a.batch.max(1);
    let (batch_hist, secs) = drive(
        &target,
        batch_recs,
        a.clients,
        chunk,
        None,
        false,
        "appending (SubmitBatch)",
    )
    .await?;
    let rate = a.records as f64 / secs.as_secs_f64();
    let s1 = stages().await;
    let (hist, secs) = drive(
        &target,
        unary_recs,
        a.clients,
        1,
        None,
        false,
        "appending (Submit)",
    )
    .await?;
    let rate_unary = a.records as f64 / secs.as_secs_f64();
    let s2 = stages().await;

    // Half load: each client paces itself so that together they offer half the unary rate.
    let half = rate_unary / 2.0;
    let per_client = Duration::from_secs_f64(a.clients.max(1) as f64 / half);
    let n_half = (half * a.latency_secs as f64) as usize;
    let recs = Arc::new(sign_all(&target.key, &tag, 2 * a.records, n_half, a.size));
    let (lat, _) = drive(
        &target,
        recs,
        a.clients,
        1,
        Some(per_client),
        a.burst,
        "appending (half load)",
    )
    .await?;
    let s3 = stages().await;
    let stage_json = serde_json::json!({
        "batch": crate::bench_stages::delta_json(&s0, &s1),
        "unary_full_load": crate::bench_stages::delta_json(&s1, &s2),
        "half_load": crate::bench_stages::delta_json(&s2, &s3),
    });
    let prefill_s = target.prefill_s;
    if let Some(n) = target.node {
        n.stop().await?;
    }

    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(2);
    let verify = ed25519_batch_rate(cores, a.size);
    let (p50, p99) = (
        ms(lat.value_at_quantile(0.5)),
        ms(lat.value_at_quantile(0.99)),
    );
    if out == crate::output::Output::Json {
        crate::output::json(&serde_json::json!({
            "bench": "append",
            "clients": a.clients,
            "records": a.records,
            "record_bytes": a.size,
            "connections": a.connections,
            "batch": chunk,
            "quick": a.quick,
            "placement": if a.node.is_some() { "remote" } else if a.in_process { "in_process" } else { "child_process" },
            "backend": a.backend,
            "appends_per_s": rate,
            "appends_per_s_unary": rate_unary,
            "verify_batch_per_s_2core": verify,
            "verify_cores": cores,
            "ratio": rate / verify,
            "ratio_unary": rate_unary / verify,
            "p50_ms_half_load": p50,
            "p99_ms_half_load": p99,
            "half_load_offered_per_s": half,
            "half_load_records": lat.len(),
            "batch_call_p50_ms": ms(batch_hist.value_at_quantile(0.5)),
            "batch_call_p99_ms": ms(batch_hist.value_at_quantile(0.99)),
            "unary_full_load_p50_ms": ms(hist.value_at_quantile(0.5)),
            "unary_full_load_p99_ms": ms(hist.value_at_quantile(0.99)),
            "half_load_pacing": if a.burst { "burst" } else { "even" },
            "open_commitments": a.open,
            "open_prefill_s": prefill_s,
            "stages": stage_json,
        }));
        return Ok(());
    }
    println!();
    println!(
        "accordctl bench append — {} clients, {} records of ~{} B per phase, {} connections, batches of {chunk}",
        a.clients, a.records, a.size, a.connections
    );
    println!("  recorded appends/s, SubmitBatch (verified, synced group commit): {rate:>10.0}");
    println!(
        "  recorded appends/s, unary Submit:                               {rate_unary:>10.0}"
    );
    println!(
        "  Ed25519 verify_batch/s on {cores} cores:                              {verify:>10.0}"
    );
    println!(
        "  ratio batch appends / batch-verify:                              {:>9.1}%",
        100.0 * rate / verify
    );
    println!(
        "  unary latency at full load: p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(hist.value_at_quantile(0.5)),
        ms(hist.value_at_quantile(0.99))
    );
    println!(
        "  unary latency at half load ({half:.0}/s offered, {} records): p50 {p50:>7.2} ms   p99 {p99:>7.2} ms",
        lat.len(),
    );
    if a.open > 0 {
        println!(
            "  ({} open commitments in the ledger before the node started, filled in {prefill_s:.1} s)",
            a.open
        );
    }
    println!("  where an append's time goes (node's accord_append_stage_seconds, per phase):");
    println!("  {stage_json}");
    Ok(())
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}
