//! `accordctl bench scale` (issue 15, item 6): builds a ledger of N real signed records —
//! distinct commitments, each with a lifecycle (request, promise, state, accept) — through the
//! node's real write path ([`accord_node::import::bulk`]: Submit's checks, the kernel, the group
//! commit with the persisted projection), then starts the node as a child process and measures
//! what must not grow with the ledger: start-up to health SERVING, resident memory after start-up
//! and after reading 10,000 random commitments, bytes on disk per record, and `GetCommitment`
//! p99 on a cold cache.

use crate::inproc::{InProcNode, init_node};
use accord_node::config::Config;
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{
    self as rec, PartyRef, Record, SignedRecord, record::Operation,
};
use accord_proto::pb::work::v1::GetCommitmentRequest;
use accord_proto::signing;
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rand::Rng;
use std::path::Path;
use std::time::Instant;

/// Options of `accordctl bench scale`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScaleArgs {
    /// Records in the ledger (four per commitment). Default 10^6, or 10^5 with --quick.
    #[arg(long)]
    pub records: Option<u64>,
    /// 10^5 records (unless --records says otherwise), for CI.
    #[arg(long)]
    pub quick: bool,
    /// Approximate encoded size of each commitment's request record, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Random `GetCommitment` reads after the restart.
    #[arg(long, default_value_t = 10_000)]
    pub reads: u64,
    /// Keep the node's directory here instead of a temporary one (reused if it already holds
    /// a ledger of this size: only the measurements run).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Print one JSON object as the last line (same as `--output json`).
    #[arg(long)]
    pub json: bool,
    /// The node's store: `rocksdb` (its default) or `postgres` (issue 31; with --pg-url naming
    /// an empty database, and --pg-password-file unless the server trusts the connection).
    #[arg(long, default_value = "rocksdb", value_parser = ["rocksdb", "postgres"])]
    pub backend: String,
    /// With --backend postgres: the database, `postgres://user@host:port/db` (no password).
    #[arg(long, required_if_eq("backend", "postgres"))]
    pub pg_url: Option<String>,
    /// With --backend postgres: a file holding the database password.
    #[arg(long)]
    pub pg_password_file: Option<std::path::PathBuf>,
}

/// `(rows, bytes)` of the node's table in the database at `url`: its rows, and what
/// PostgreSQL keeps for it (`pg_total_relation_size`: the heap, TOAST and the primary key's
/// index). `(0, 0)` before the node created it.
async fn pg_table(url: &str, password_file: Option<&Path>) -> Result<(i64, i64)> {
    let mut cfg: tokio_postgres::Config = url.parse().context("--pg-url")?;
    if let Some(p) = password_file {
        let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
        cfg.password(text.lines().next().unwrap_or("").as_bytes());
    }
    let (client, conn) = cfg
        .connect(tokio_postgres::NoTls)
        .await
        .context("--pg-url")?;
    tokio::spawn(conn);
    let exists: bool = client
        .query_one("SELECT to_regclass('accord_kv') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok((0, 0));
    }
    let row = client
        .query_one(
            "SELECT count(*), pg_total_relation_size('accord_kv') FROM accord_kv",
            &[],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

const ORG: &str = "scale";

fn party(name: &str) -> Option<PartyRef> {
    Some(PartyRef {
        organisation: ORG.into(),
        name: name.into(),
    })
}

fn record(author: &str, commitment: &str, op: Operation) -> Record {
    Record {
        author: party(author),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        operation: Some(op),
        ..Default::default()
    }
}

/// The id of the `i`-th commitment.
fn commitment_id(i: u64) -> String {
    format!("scale-{i:010}")
}

/// Prose-like text of `len` bytes for commitment `i`: words drawn from a 256-word vocabulary
/// (about 8 bits of entropy per word), so it compresses as text does, not as a repeated string
/// would (the same text as the ledger's space measurement, `ledger/store.rs`).
fn prose(i: u64, len: usize) -> String {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(i);
    let vocab: Vec<String> = (0..256u32)
        .map(|i| {
            let n = 3 + (i % 7) as usize;
            (0..n)
                .map(|j| char::from(b'a' + ((i * 7 + j as u32 * 13) % 26) as u8))
                .collect()
        })
        .collect();
    let mut s = String::new();
    while s.len() < len {
        s.push_str(&vocab[rng.gen_range(0..vocab.len())]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

/// The lifecycle of commitment `i`: alice requests, bob promises and states, alice accepts (even
/// `i`) or rejects the statement (odd `i`: it stays open); the last commitment may be cut short
/// to reach exactly `records`.
fn lifecycle(alice: &Signer, bob: &Signer, i: u64, size: usize, n: usize) -> Vec<SignedRecord> {
    let id = commitment_id(i);
    let mut req = rec::Request {
        candidate: party("bob"),
        terms: Some(rec::Terms {
            title: format!("scale {i}"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let base = prost::Message::encoded_len(&record("alice", &id, Operation::Request(req.clone())));
    if let Some(t) = &mut req.terms {
        t.description = prose(i, size.saturating_sub(base + 3));
    }
    let steps = [
        (alice, record("alice", &id, Operation::Request(req))),
        (bob, record("bob", &id, Operation::Promise(rec::Promise {}))),
        (
            bob,
            record(
                "bob",
                &id,
                Operation::State(rec::State {
                    fulfillment_refs: vec![format!("doc://scale/{i}")],
                }),
            ),
        ),
        // Every other commitment stays open: its statement is rejected (back to promised, with
        // nothing due), so the Work service tick has open commitments to (not) look at.
        if i.is_multiple_of(2) {
            (
                alice,
                record("alice", &id, Operation::Accept(rec::Accept::default())),
            )
        } else {
            (
                alice,
                record(
                    "alice",
                    &id,
                    Operation::Reject(rec::Reject {
                        reason: "redo".into(),
                    }),
                ),
            )
        },
    ];
    steps
        .into_iter()
        .take(n)
        .map(|(k, r)| signing::sign_record(k, &r))
        .collect()
}

/// Bytes of every file under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Resident memory of process `pid`, MiB (`VmRSS` of /proc/PID/status).
pub fn rss_mib(pid: u32) -> Result<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")?;
    Ok(kb / 1024.0)
}

/// Builds a ledger of `records` records for the node initialised under `root/ORG` (its config
/// at `cfg`); returns the seconds it took.
pub async fn build(root: &Path, records: u64, size: usize) -> Result<(f64, f64)> {
    let dir = root.join(ORG);
    let cfg = dir.join(accord_daemon::layout::node::CONFIG);
    let config = Config::load(&cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
    let key = |p: &str| -> Result<Signer> {
        let t = std::fs::read_to_string(dir.join(accord_daemon::layout::node::party_skey(p)))?;
        Ok(Signer::from_skey(t.trim())?)
    };
    let signers = std::sync::Arc::new((key("alice")?, key("bob")?));
    let commitments = records.div_ceil(4);
    let started = Instant::now();
    let bar = crate::output::bar(commitments, "building the ledger");
    let bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (b, counted) = (bar.clone(), bytes.clone());
    let done = accord_node::import::bulk(config, commitments, 4, move |i| {
        b.inc(1);
        // Progress for a run in the background (the bar is hidden without a terminal).
        if b.is_hidden() && i > 0 && i.is_multiple_of(250_000) {
            eprintln!(
                "bench scale: {} records made after {:.0} s",
                i * 4,
                started.elapsed().as_secs_f64()
            );
        }
        let n = (records - i * 4).min(4) as usize;
        let l = lifecycle(&signers.0, &signers.1, i, size, n);
        let len: usize = l.iter().map(prost::Message::encoded_len).sum();
        counted.fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
        l
    })
    .await
    .map_err(|e| anyhow::anyhow!("import: {e}"))?;
    bar.finish_and_clear();
    anyhow::ensure!(
        done.records == records && done.applied == records,
        "imported {} records, {} applied; expected {records}",
        done.records,
        done.applied
    );
    Ok((
        started.elapsed().as_secs_f64(),
        bytes.load(std::sync::atomic::Ordering::Relaxed) as f64 / records as f64,
    ))
}

/// Initialises a node for the scale bench under `root` (parties alice and bob).
pub fn init(root: &Path) -> Result<()> {
    init_node(root, ORG, &["alice", "bob"])?;
    Ok(())
}

/// The figures of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figures {
    /// Records in the ledger.
    pub records: u64,
    /// Seconds the build took (0 when an existing ledger was reused).
    pub build_s: f64,
    /// Spawn of `accord-node serve` to health SERVING, ms.
    pub startup_ms: f64,
    /// Resident memory after start-up, MiB.
    pub rss_mib: f64,
    /// Resident memory after the random reads, MiB.
    pub rss_mib_after_reads: f64,
    /// Bytes on disk (the whole data directory) per record, once compacted (cold data: every
    /// overwritten commitment version and the write-ahead log gone).
    pub bytes_per_record: f64,
    /// The same just after the build, before compaction (0 when an existing ledger was reused).
    pub bytes_per_record_uncompacted: f64,
    /// `GetCommitment` p99 over the random reads on a cold cache, µs.
    pub get_commitment_p99_us: u64,
    /// Its median, µs.
    pub get_commitment_p50_us: u64,
    /// One Work service clock tick with nothing due (half the commitments open), µs (mean of
    /// 100, measured in-process on the stopped node's store).
    pub tick_us: f64,
    /// Mean encoded size of the ledger's signed records, bytes (0 when reused).
    pub record_bytes_mean: f64,
    /// After the reads: RocksDB's memory by property (`accord_rocksdb_memory_bytes`), MiB.
    pub rocksdb_memory_mib: std::collections::BTreeMap<String, f64>,
    /// The store: `rocksdb` or `postgres` (whose bytes are the table's, the server's memory
    /// not counted in the RSS).
    pub backend: String,
}

/// `accord_rocksdb_memory_bytes` of the node's metrics listener at `addr`, MiB by property.
async fn rocksdb_memory(
    addr: std::net::SocketAddr,
) -> Result<std::collections::BTreeMap<String, f64>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(addr).await?;
    c.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut body = String::new();
    c.read_to_string(&mut body).await?;
    Ok(body
        .lines()
        .filter_map(|l| l.strip_prefix("accord_rocksdb_memory_bytes{property=\""))
        .filter_map(|rest| {
            let (name, value) = rest.split_once("\"} ")?;
            Some((
                name.to_string(),
                value.trim().parse::<f64>().ok()? / 1048576.0,
            ))
        })
        .collect())
}

/// Compacts the (stopped) node's store under `root` to its bottommost level; returns the data
/// directory's bytes before.
fn compact(root: &Path) -> Result<u64> {
    let data = Config::load(&root.join(ORG).join(accord_daemon::layout::node::CONFIG))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .data_dir;
    let before = disk_bytes(&data);
    accord_node::import::compact(&data).map_err(|e| anyhow::anyhow!("compact: {e}"))?;
    Ok(before)
}

/// Restarts the node built under `root` as a child process and measures it.
pub async fn measure(root: &Path, records: u64, reads: u64) -> Result<(Figures, InProcNode)> {
    let data = Config::load(&root.join(ORG).join(accord_daemon::layout::node::CONFIG))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .data_dir;
    let bytes = disk_bytes(&data);
    let started = Instant::now();
    // The metrics listener (for RocksDB's memory by property); the line goes before any table.
    let node = InProcNode::start_child(root, ORG, |t| {
        if !t.contains("\nmetrics_listen = ") && !t.starts_with("metrics_listen = ") {
            *t = format!("metrics_listen = \"127.0.0.1:0\"\n{t}");
        }
    })
    .await?;
    let startup_ms = started.elapsed().as_secs_f64() * 1000.0;
    let pid = node.pid().context("child pid")?;
    let rss = rss_mib(pid)?;
    let mut work = node.work().await?;
    let mut hist = Histogram::<u64>::new(3)?;
    let commitments = records.div_ceil(4).max(1);
    let mut rng = rand::thread_rng();
    for _ in 0..reads {
        let id = commitment_id(rng.gen_range(0..commitments));
        let t = Instant::now();
        let r = work
            .get_commitment(GetCommitmentRequest {
                commitment_id: id.clone(),
            })
            .await
            .with_context(|| format!("GetCommitment {id}"))?;
        hist.record(t.elapsed().as_micros() as u64)?;
        anyhow::ensure!(r.into_inner().commitment_id == id, "wrong commitment");
    }
    let after = rss_mib(pid)?;
    let memory = match node.metrics_addr {
        Some(addr) => rocksdb_memory(addr).await.unwrap_or_default(),
        None => Default::default(),
    };
    Ok((
        Figures {
            records,
            build_s: 0.0,
            startup_ms,
            rss_mib: rss,
            rss_mib_after_reads: after,
            bytes_per_record: bytes as f64 / records.max(1) as f64,
            bytes_per_record_uncompacted: 0.0,
            get_commitment_p99_us: hist.value_at_quantile(0.99),
            get_commitment_p50_us: hist.value_at_quantile(0.5),
            tick_us: 0.0,
            record_bytes_mean: 0.0,
            rocksdb_memory_mib: memory,
            backend: String::new(),
        },
        node,
    ))
}

/// `accordctl bench scale`.
pub async fn run(a: ScaleArgs, out: crate::output::Output) -> Result<()> {
    let out = out.or_json(a.json);
    let records = a
        .records
        .unwrap_or(if a.quick { 100_000 } else { 1_000_000 });
    anyhow::ensure!(records > 0, "--records must be > 0");
    let tmp;
    let root = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let postgres = a.backend == "postgres";
    let (url, password_file) = (a.pg_url.as_deref(), a.pg_password_file.as_deref());
    let storage = crate::bench::storage_section(&a.backend, url, password_file)?;
    if let (true, Some(url)) = (postgres, url) {
        anyhow::ensure!(
            pg_table(url, password_file).await?.0 == 0,
            "--pg-url: the database already holds a ledger; name an empty one"
        );
    }
    let marker = root.join("scale-records");
    // A ledger in PostgreSQL is never reused (the database is checked empty above).
    let reuse = !postgres
        && std::fs::read_to_string(&marker)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            == Some(records);
    let (build_s, record_bytes_mean) = if reuse {
        (0.0, 0.0)
    } else {
        if root.join(ORG).exists() {
            std::fs::remove_dir_all(root.join(ORG))?;
        }
        std::fs::create_dir_all(&root)?;
        init(&root)?;
        let cfg = root.join(ORG).join(accord_daemon::layout::node::CONFIG);
        let text = std::fs::read_to_string(&cfg)?;
        std::fs::write(&cfg, text + &storage)?;
        let s = build(&root, records, a.size).await?;
        std::fs::write(&marker, records.to_string())?;
        s
    };
    // RocksDB is compacted to its bottommost level; PostgreSQL's table is measured as it is.
    let uncompacted = if reuse || postgres {
        0
    } else {
        compact(&root)?
    };

    let (mut f, node) = measure(&root, records, a.reads).await?;
    f.backend = a.backend.clone();
    if let (true, Some(url)) = (postgres, url) {
        let (_, table) = pg_table(url, password_file).await?;
        f.bytes_per_record += table as f64 / records as f64;
    }
    f.build_s = build_s;
    f.bytes_per_record_uncompacted = uncompacted as f64 / records as f64;
    f.record_bytes_mean = record_bytes_mean;
    node.stop().await?;
    let config = Config::load(&root.join(ORG).join(accord_daemon::layout::node::CONFIG))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    f.tick_us = accord_node::import::tick_us(config, 100)
        .await
        .map_err(|e| anyhow::anyhow!("tick: {e}"))?
        .0;
    if out == crate::output::Output::Json {
        crate::output::json(&serde_json::to_value(&f)?);
    } else {
        crate::output::fields(&[
            ("records", f.records.to_string()),
            ("store", f.backend.clone()),
            ("build", format!("{:.1} s", f.build_s)),
            ("start-up to SERVING", format!("{:.0} ms", f.startup_ms)),
            ("RSS after start-up", format!("{:.1} MiB", f.rss_mib)),
            (
                "RSS after reads",
                format!("{:.1} MiB", f.rss_mib_after_reads),
            ),
            (
                "bytes on disk / record",
                format!("{:.0}", f.bytes_per_record),
            ),
            (
                "Work service tick (nothing due)",
                format!("{:.0} µs", f.tick_us),
            ),
            (
                "mean record size",
                format!("{:.0} bytes", f.record_bytes_mean),
            ),
            (
                "GetCommitment p50 / p99 (cold)",
                format!(
                    "{} / {} µs",
                    f.get_commitment_p50_us, f.get_commitment_p99_us
                ),
            ),
        ]);
    }
    Ok(())
}
