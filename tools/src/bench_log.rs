//! `accordctl bench log`: the Merkle log's costs on the node's real storage — inclusion and
//! consistency proof time at tree sizes 10^3 and 10^6 (served from RocksDB in O(log n) reads, so
//! the figures must grow like log n), and the cost of signing a checkpoint.

use accord_node::ledger::{AcceptAll, Append, LeafScanNodes, Ledger, OneByOneNodes, TreeNodes};
use accord_proto::checkpoint::Checkpoint;
use accord_proto::merkle;
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::SignedRecord;
use anyhow::Result;
use std::time::Instant;

/// Options of `accordctl bench log`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Tree sizes to measure.
    #[arg(long, value_delimiter = ',', default_value = "1000,1000000")]
    pub sizes: Vec<u64>,
    /// Proofs timed per size.
    #[arg(long, default_value_t = 2000)]
    pub proofs: u64,
    /// A short run (sizes 1000 and 100000, 500 proofs) so that CI runs every bench once.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
}

/// Counts node reads, to show the O(log n) shape independently of caches.
struct Counting<'a>(TreeNodes<'a>, std::cell::Cell<u64>);

impl merkle::NodeSource for Counting<'_> {
    fn node(&self, level: u32, index: u64) -> Result<[u8; 32], accord_proto::Error> {
        self.1.set(self.1.get() + 1);
        self.0.node(level, index)
    }
}

async fn fill(ledger: &Ledger<()>, from: u64, to: u64) -> Result<()> {
    let mut pending = Vec::new();
    for i in from..to {
        let payload = i.to_be_bytes().to_vec();
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&i.to_be_bytes());
        let signed = SignedRecord {
            payload: payload.into(),
            payload_type: "bench".into(),
            signatures: vec![],
        };
        let l = ledger.clone();
        pending.push(tokio::spawn(async move {
            l.append(Append {
                id,
                signed,
                input: (),
                at: None,
            })
            .await
        }));
        if pending.len() >= 8192 {
            for p in pending.drain(..) {
                p.await??;
            }
        }
    }
    for p in pending {
        p.await??;
    }
    Ok(())
}

/// µs per call of `f`, over `n` calls.
fn per_call<T>(n: u64, mut f: impl FnMut() -> Result<T, accord_proto::Error>) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..n {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// One tree size's figures (µs per proof unless named otherwise).
struct Timed {
    /// Inclusion proofs, second pass (caches as a serving node has them).
    inc: f64,
    con: f64,
    root: f64,
    /// Node reads per inclusion proof.
    reads: f64,
    inc_one: f64,
    inc_leaves: f64,
    /// Bytes of the upper-level cache.
    cache: usize,
    /// Inclusion proofs, first pass after the fill.
    inc_cold: f64,
}

/// Runs the benchmark.
pub async fn run(mut a: LogArgs) -> Result<()> {
    if a.quick {
        a.sizes = vec![1_000, 100_000];
        a.proofs = a.proofs.min(500);
    }
    let tmp = tempfile::tempdir()?;
    let mut rows = Vec::new();
    let (ledger, writer) = Ledger::open(
        tmp.path(),
        AcceptAll,
        4096,
        accord_node::clock::Clock::system(),
    )?;
    let mut sizes = a.sizes.clone();
    sizes.sort_unstable();
    println!("accordctl bench log — proofs served from RocksDB (O(log n) node reads each)");
    println!(
        "  {:>10}  {:>14}  {:>14}  {:>12}  {:>16}",
        "tree size", "inclusion µs", "consistency µs", "root µs", "reads/inclusion"
    );
    let mut have = 0;
    for &size in &sizes {
        let t = Instant::now();
        fill(&ledger, have, size).await?;
        let fill_secs = t.elapsed().as_secs_f64();
        have = size;
        let store = ledger.store().clone();
        // Time a settled tree: wait (up to 120 s) for the flushes and compactions of the bulk
        // just written, which would otherwise share the CPU with the first proofs timed.
        let t = Instant::now();
        while store.tree_background_busy()? && t.elapsed().as_secs() < 120 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let settle_s = t.elapsed().as_secs_f64();
        let n = a.proofs;
        let Timed {
            inc,
            con,
            root,
            reads,
            inc_one,
            inc_leaves,
            cache,
            inc_cold,
        } = tokio::task::spawn_blocking(move || -> Result<Timed> {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let mut rnd = move |m: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % m
            };
            // The first pass finds the tree as the fill left it: the upper-level cache
            // empty, the index and filter partitions of the new table files unread. A node
            // serving proofs pays that once; the second pass, over other random leaves
            // (their tiles still cold: each of the 2,000 proofs reads its own), is what it
            // pays from then on, and the figure the ratio is taken over.
            let (tree, leaves, one) = (
                TreeNodes(&store),
                LeafScanNodes(&store),
                OneByOneNodes(&store),
            );
            let inc_cold = per_call(n, || merkle::inclusion_proof(&tree, rnd(size), size))?;
            let inc = per_call(n, || merkle::inclusion_proof(&tree, rnd(size), size))?;
            let inc_leaves = per_call(n, || merkle::inclusion_proof(&leaves, rnd(size), size))?;
            let inc_one = per_call(n, || merkle::inclusion_proof(&one, rnd(size), size))?;
            let con = per_call(n, || {
                merkle::consistency_proof(&tree, 1 + rnd(size - 1), size)
            })?;
            let root = per_call(n, || merkle::root(&tree, 1 + rnd(size)))?;
            let counting = Counting(TreeNodes(&store), std::cell::Cell::new(0));
            let samples = 200;
            for _ in 0..samples {
                merkle::inclusion_proof(&counting, rnd(size), size)?;
            }
            let reads = counting.1.get() as f64 / samples as f64;
            Ok(Timed {
                inc,
                con,
                root,
                reads,
                inc_one,
                inc_leaves,
                cache: store.tree_cache_bytes(),
                inc_cold,
            })
        })
        .await??;
        let fill_rate = (size as f64) / fill_secs.max(1e-9);
        println!(
            "  {size:>10}  {inc:>14.1}  {con:>14.1}  {root:>12.1}  {reads:>16.1}   (filled at {fill_rate:.0} appends/s)",
        );
        println!(
            "  {:>10}  {inc_cold:>14.1}  (inclusion, first pass: caches cold)  {inc_leaves:.1} (lower levels from scanned leaves)  {inc_one:.1} (one read per node)   upper-level cache {:.2} MiB; waited {settle_s:.1} s for compactions",
            "",
            cache as f64 / (1 << 20) as f64
        );
        rows.push(serde_json::json!({
            "size": size, "inclusion_us": inc, "consistency_us": con, "root_us": root,
            "reads_per_inclusion": reads, "fill_appends_per_s": fill_rate,
            "inclusion_us_cold": inc_cold, "inclusion_us_one_by_one": inc_one, "inclusion_us_from_leaves": inc_leaves, "tree_cache_bytes": cache,
            "settle_s": settle_s,
        }));
    }
    ledger.stop().await;
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;

    let signer = Signer::generate("bench.accord/log", &mut rand::rngs::OsRng)?;
    let cp = Checkpoint::new("bench.accord/log", 1_000_000, [7u8; 32]);
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        cp.sign(&signer)?;
    }
    let sign_us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("  checkpoint signing (C2SP signed note, Ed25519): {sign_us:.1} µs each");
    if a.json {
        let f = |k: &str, i: usize| rows[i][k].as_f64().unwrap_or(0.0);
        let last = rows.len().saturating_sub(1);
        crate::output::json(&serde_json::json!({
            "bench": "log",
            "quick": a.quick,
            "sizes": rows,
            "inclusion_time_ratio": f("inclusion_us", last) / f("inclusion_us", 0).max(1e-9),
            "inclusion_time_ratio_cold": f("inclusion_us_cold", last) / f("inclusion_us_cold", 0).max(1e-9),
            "node_reads_ratio": f("reads_per_inclusion", last) / f("reads_per_inclusion", 0).max(1e-9),
            "checkpoint_sign_us": sign_us,
        }));
    }
    Ok(())
}
