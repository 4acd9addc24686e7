//! Issue 15: persisted projections. A node restarted over a large ledger serves from its stored
//! projection — the same `GetCommitment` answers, and no record replayed through the kernel
//! (`accord_projection_replayed_records`, not a time) — and a node killed with SIGKILL while
//! records are being written restarts with a watermark consistent with its ledger, nothing
//! acknowledged lost, and reads equal to a full replay from sequence 0.

use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::{GetCommitmentRequest, GetCommitmentResponse, SubmitRequest};
use accord_proto::signing;
use accord_tests::{TestNode, bin, ensure_fresh_bins, run_bin, tls_channel, work_client};
use anyhow::{Context, Result, anyhow};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `accord-node serve` with metrics on, killed on drop.
struct Served {
    /// The process (killed on drop), started by the shared [`accord_tests::metrics::serve`].
    proc: accord_tests::metrics::Served,
    addr: SocketAddr,
    metrics: SocketAddr,
    dir: PathBuf,
}

/// Starts the node of `dir` (metrics on an ephemeral port) and waits until it serves.
async fn serve(dir: &Path) -> Result<Served> {
    let cfg = dir.join("accord.toml");
    let text = std::fs::read_to_string(&cfg)?;
    // `bench scale` may have put the line first in the file already.
    if !text.lines().any(|l| l.starts_with("metrics_listen = ")) {
        let text = text.replace(
            "# metrics_listen = \"127.0.0.1:9464\"",
            "metrics_listen = \"127.0.0.1:0\"",
        );
        anyhow::ensure!(
            text.contains("\nmetrics_listen = "),
            "metrics line in config"
        );
        std::fs::write(&cfg, text)?;
    }
    let (proc, first, metrics) = accord_tests::metrics::serve("accord-node", &cfg)?;
    let s = Served {
        proc,
        addr: first
            .strip_prefix("listening ")
            .ok_or_else(|| anyhow!("first line {first:?}"))?
            .parse()?,
        metrics,
        dir: dir.to_path_buf(),
    };
    accord_tests::wait_serving(s.channel().await?).await?;
    Ok(s)
}

impl Served {
    async fn channel(&self) -> Result<tonic::transport::Channel> {
        tls_channel(
            self.addr,
            &std::fs::read(self.dir.join("tls/ca.pem"))?,
            None,
        )
        .await
    }

    async fn work(&self) -> Result<accord_tests::WorkClient> {
        let token = std::fs::read_to_string(self.dir.join("admin.token"))?;
        Ok(work_client(self.channel().await?, token.trim()))
    }

    /// One sample of the node's Prometheus metrics.
    fn metric(&self, name: &str) -> Result<f64> {
        accord_tests::metrics::scrape_text(self.metrics)?
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .ok_or_else(|| anyhow!("no {name} in the metrics"))?
            .trim()
            .parse()
            .map_err(|e| anyhow!("{name}: {e}"))
    }

    /// SIGTERM and wait.
    fn terminate(mut self) -> Result<()> {
        Command::new("kill")
            .args(["-TERM", &self.proc.child().id().to_string()])
            .status()?;
        anyhow::ensure!(self.proc.child().wait()?.success(), "graceful exit");
        Ok(())
    }
}

async fn answers(s: &Served, ids: &[String]) -> Result<Vec<GetCommitmentResponse>> {
    let mut w = s.work().await?;
    let mut out = Vec::new();
    for id in ids {
        let r = w
            .get_commitment(GetCommitmentRequest {
                commitment_id: id.clone(),
            })
            .await
            .with_context(|| format!("GetCommitment {id}"))?
            .into_inner();
        out.push(r);
    }
    Ok(out)
}

/// 10^5 records built by `accordctl bench scale --quick` (the bench's builder: real signed
/// records through the node's write path), then two restarts.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_with_100k_records_restarts_from_its_stored_projection() -> Result<()> {
    ensure_fresh_bins();
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("scale");
    let (code, out, err) = run_bin(
        "accordctl",
        &[
            "bench",
            "scale",
            "--quick",
            "--reads",
            "100",
            "--json",
            "--dir",
            root.to_str().context("utf-8 path")?,
        ],
        None,
    )?;
    anyhow::ensure!(code == 0, "bench scale failed: {err}");
    let figures: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or(""))?;
    assert_eq!(figures["records"], 100_000);
    for key in [
        "startup_ms",
        "rss_mib",
        "bytes_per_record",
        "get_commitment_p99_us",
        "tick_us",
    ] {
        assert!(
            figures[key].as_f64().is_some_and(|v| v > 0.0),
            "{key}: {figures}"
        );
    }
    let dir = root.join("scale");
    let ids: Vec<String> = (0..25_000u64)
        .step_by(997)
        .map(|i| format!("scale-{i:010}"))
        .collect();

    let node = serve(&dir).await?;
    assert_eq!(node.metric("accord_ledger_records")?, 100_000.0);
    assert_eq!(
        node.metric("accord_projection_replayed_records")?,
        0.0,
        "start-up replays nothing after a clean stop"
    );
    let before = answers(&node, &ids).await?;
    // The bench accepts even commitments and rejects the statement of odd ones (open again).
    for (i, a) in (0..25_000u64).step_by(997).zip(&before) {
        let state = if i % 2 == 0 { "accepted" } else { "promised" };
        assert!(a.state == state && a.history.len() == 4, "{i}: {a:?}");
    }
    node.terminate()?;

    // A small block cache (`[storage] block_cache_mib`): RocksDB stays within it, index and
    // filter blocks included (they are charged to the cache, not held beside it).
    let cfg = dir.join("accord.toml");
    let mut text = std::fs::read_to_string(&cfg)?;
    text.push_str("\n[storage]\nblock_cache_mib = 4\n");
    std::fs::write(&cfg, text)?;
    let node = serve(&dir).await?;
    assert_eq!(node.metric("accord_projection_replayed_records")?, 0.0);
    assert_eq!(
        answers(&node, &ids).await?,
        before,
        "same answers after the restart"
    );
    // The caches stay within their bounds after the reads.
    assert!(node.metric("accord_projection_cached_commitments")? <= 100_000.0);
    let memory = |p: &str| node.metric(&format!("accord_rocksdb_memory_bytes{{property=\"{p}\"}}"));
    let cache = memory("rocksdb.block-cache-usage")?;
    assert!(
        cache > 0.0 && cache <= 4.0 * 1048576.0,
        "block cache {cache} bytes, bound 4 MiB"
    );
    let readers = memory("rocksdb.estimate-table-readers-mem")?;
    assert!(
        readers < 1048576.0,
        "table readers hold {readers} bytes outside the cache"
    );
    node.terminate()?;
    Ok(())
}

fn request(i: usize) -> Record {
    Record {
        author: Some(PartyRef {
            organisation: "acme".into(),
            name: "alice".into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: format!("crash-{i}"),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: "acme".into(),
                name: "bob".into(),
            }),
            terms: Some(rec::Terms {
                title: format!("crash {i}"),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// SIGKILL while records are being written: the restart finds the stored projection exactly at
/// the ledger's length (same synced batch), every acknowledged record is there, and a full replay
/// from sequence 0 answers the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_killed_while_writing_restarts_equal_to_a_full_replay() -> Result<()> {
    ensure_fresh_bins();
    let n = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .init()?;
    let node = serve(&n.dir).await?;
    let key = Signer::from_skey(n.party_skey("alice").trim())?;
    let mut w = node.work().await?;
    // Writers that keep submitting until the node dies.
    let mut acked = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..8 {
        let mut w = w.clone();
        let key = Signer::from_skey(n.party_skey("alice").trim())?;
        tasks.spawn(async move {
            let mut ok = Vec::new();
            for i in (t..).step_by(8) {
                let r = request(i);
                let signed = signing::sign_record(&key, &r);
                match w
                    .submit(SubmitRequest {
                        record: Some(signed),
                    })
                    .await
                {
                    Ok(_) => ok.push(i),
                    Err(_) => break,
                }
            }
            ok
        });
    }
    // Let some records be acknowledged, then kill the node mid-stream.
    for i in 10_000..10_050 {
        let signed = signing::sign_record(&key, &request(i));
        w.submit(SubmitRequest {
            record: Some(signed),
        })
        .await?;
        acked.push(i);
    }
    drop(node);
    while let Some(r) = tasks.join_next().await {
        acked.extend(r?);
    }
    let ids: Vec<String> = acked.iter().map(|i| format!("crash-{i}")).collect();

    let node = serve(&n.dir).await?;
    let len = node.metric("accord_ledger_records")?;
    assert!(
        len >= ids.len() as f64,
        "{len} records, {} acknowledged",
        ids.len()
    );
    assert_eq!(
        node.metric("accord_projection_replayed_records")?,
        0.0,
        "the projection's watermark is the ledger's length: written in the same batch"
    );
    let stored = answers(&node, &ids).await?;
    assert!(
        stored
            .iter()
            .all(|a| a.state == "requested" && a.history.len() == 1)
    );
    node.terminate()?;

    // The same ledger replayed from sequence 0 into a fresh projection answers the same.
    accord_node::import::forget_projection(&n.dir.join("data"))?;
    let node = serve(&n.dir).await?;
    assert_eq!(node.metric("accord_projection_replayed_records")?, len);
    assert_eq!(answers(&node, &ids).await?, stored, "stored = full replay");
    node.terminate()?;
    Ok(())
}

/// `[storage] block_cache_mib` is validated: 0 and absurd sizes are refused, naming the field;
/// absent, it is the documented default.
#[test]
fn the_block_cache_size_is_validated() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("acme");
    let out = Command::new(bin("accord-node"))
        .args(["init", "--dir"])
        .arg(&dir)
        .args(["--name", "acme", "--listen", "127.0.0.1:0"])
        .output()?;
    anyhow::ensure!(out.status.success(), "init");
    let cfg = dir.join("accord.toml");
    let good = std::fs::read_to_string(&cfg)?;
    let load = |extra: &str| {
        std::fs::write(&cfg, format!("{good}\n{extra}"))?;
        anyhow::Ok(accord_node::config::Config::load(&cfg))
    };
    assert_eq!(
        load("")?
            .map_err(|e| anyhow!("{e}"))?
            .storage
            .block_cache_mib,
        64
    );
    let c = load("[storage]\nblock_cache_mib = 16\n")?.map_err(|e| anyhow!("{e}"))?;
    assert_eq!(c.storage.block_cache_mib, 16);
    for bad in ["0", "65537", "1000000000"] {
        let e = load(&format!("[storage]\nblock_cache_mib = {bad}\n"))?
            .err()
            .with_context(|| format!("{bad} accepted"))?;
        assert_eq!(e.field, "storage.block_cache_mib", "{bad}: {e}");
        assert!(e.reason.contains("between 1 and 65536"), "{bad}: {e}");
    }
    // Not a number the field can hold: the TOML error names the line, counted here from the
    // text written.
    let e = load("[storage]\nblock_cache_mib = -1\n")?
        .err()
        .context("-1 accepted")?;
    let line = std::fs::read_to_string(&cfg)?
        .lines()
        .position(|l| l == "block_cache_mib = -1")
        .context("the line written")?
        + 1;
    assert_eq!(e.field, format!("line {line}"), "{e}");
    Ok(())
}
