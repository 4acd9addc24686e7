//! `accordctl bench witness`: add-checkpoint per second on a real witness (RocksDB, synced
//! writes) with an Ed25519 key, an ML-DSA-44 key and both (c2sp.org/tlog-cosignature), and the
//! time from `recorded` to `witnessed` (p50, p99) for a node with two witnesses (K=2) at the
//! default checkpoint interval, the node and both witnesses running as child processes (issue 14).

use crate::inproc::{InProcNode, init_node};
use accord_proto::checkpoint::{Checkpoint, Cosigner};
use accord_proto::merkle::{self, MemoryTree};
use accord_proto::note::Signer;
use accord_proto::pb::work::v1 as work;
use accord_witness::{AddCheckpoint, LogConfig, Witness, WitnessOptions};
use anyhow::Result;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `accordctl bench witness`.
#[derive(Debug, Clone, clap::Args)]
pub struct WitnessArgs {
    /// add-checkpoint requests per origin.
    #[arg(long, default_value_t = 2000)]
    pub checkpoints: u64,
    /// Origins co-signed concurrently in the second phase.
    #[arg(long, default_value_t = 8)]
    pub origins: usize,
    /// Records whose recorded → witnessed time is measured.
    #[arg(long, default_value_t = 100)]
    pub samples: usize,
    /// The witness key type(s) to measure add-checkpoint with; `all` reports the three.
    #[arg(long, value_enum, default_value_t = BenchAlg::All)]
    pub alg: BenchAlg,
    /// Background appends per second (`SubmitBatch`, every 10 ms) while recorded → witnessed
    /// is measured: about half the node's `bench append` rate measures it "at half load"
    /// (issue 32, item 5). 0: an idle node.
    #[arg(long, default_value_t = 0)]
    pub load: u64,
    /// A short run (under 40 s; CI): 200 checkpoints per origin, Ed25519 only, 20 samples.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object as the last line (same as `--output json`).
    #[arg(long)]
    pub json: bool,
}

/// Which witness keys `bench witness` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchAlg {
    /// One Ed25519 cosignature/v1 key.
    Ed25519,
    /// One ML-DSA-44 subtree/v1 key.
    #[value(name = "ml-dsa-44")]
    MlDsa44,
    /// Both keys (two cosignature lines per checkpoint).
    Both,
    /// Each of the three in turn.
    All,
}

impl BenchAlg {
    fn name(self) -> &'static str {
        match self {
            BenchAlg::Ed25519 => "ed25519",
            BenchAlg::MlDsa44 => "ml-dsa-44",
            BenchAlg::Both => "both",
            BenchAlg::All => "all",
        }
    }

    fn cosigners(self, name: &str) -> Result<Vec<Cosigner>> {
        let mut rng = rand::rngs::OsRng;
        Ok(match self {
            BenchAlg::Ed25519 => vec![Cosigner::generate(name, &mut rng)?],
            BenchAlg::MlDsa44 => vec![Cosigner::generate_ml_dsa_44(name, &mut rng)?],
            _ => vec![
                Cosigner::generate(name, &mut rng)?,
                Cosigner::generate_ml_dsa_44(name, &mut rng)?,
            ],
        })
    }
}

/// CPU seconds this process has used so far, all threads (`utime + stime` of /proc/self/stat,
/// in USER_HZ = 100 ticks a second, the Linux ABI's fixed unit); `None` where /proc is absent.
fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis
    // start at field 3 (state), so utime and stime (fields 14 and 15) are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace().skip(11);
    let utime: f64 = f.next()?.parse().ok()?;
    let stime: f64 = f.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// What one key type's add-checkpoint phases measured.
#[derive(Debug, Clone, Copy)]
struct Rates {
    /// add-checkpoint/s, one origin's chain alone.
    one: f64,
    /// add-checkpoint/s, the other origins' chains at once.
    many: f64,
    /// The many-origins phase's add-checkpoints per CPU second of this process (the witness's
    /// work: the requests are built before the clock starts, so the callers cost next to
    /// nothing): the witness's rate per core, whatever the number of cores it had.
    many_per_cpu_s: Option<f64>,
    /// Cores the process kept busy in that phase, on average.
    many_cores: Option<f64>,
}

/// add-checkpoint/s for one origin alone and for the other origins concurrently, on a fresh
/// witness with the keys of `alg`.
async fn add_checkpoint_rates(
    dir: &std::path::Path,
    alg: BenchAlg,
    logs: &[Signer],
    chains: &[Vec<AddCheckpoint>],
    per_origin: u64,
) -> Result<Rates> {
    let witness = Arc::new(Witness::open(WitnessOptions {
        data_dir: dir.join(format!("witness-{}", alg.name())),
        cosigners: alg.cosigners("bench.example/witness")?,
        logs: logs
            .iter()
            .map(|l| LogConfig::from_verifiers(l.name(), vec![l.verifier()]))
            .collect::<Result<_, _>>()?,
        limits: accord_witness::Limits::default(),
        clock: Arc::new(accord_witness::SystemClock),
    })?);

    // One origin: each request verifies the log signature and the proof, cosigns, and syncs.
    let t = Instant::now();
    for req in chains[0].iter().cloned() {
        witness.add_checkpoint(req).await?;
    }
    let one = per_origin as f64 / t.elapsed().as_secs_f64();

    // Several origins at once (each origin's requests are serialised by the witness).
    let cpu0 = process_cpu_s();
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in chains.iter().skip(1) {
        let (w, c) = (witness.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            for req in c {
                w.add_checkpoint(req).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = match (cpu0, process_cpu_s()) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    };
    let done = ((chains.len() - 1) as u64 * per_origin) as f64;
    Ok(Rates {
        one,
        many: done / secs,
        many_per_cpu_s: cpu.map(|c| done / c),
        many_cores: cpu.map(|c| c / secs),
    })
}

/// A log's checkpoints, each with its consistency proof from the previous one.
fn chain(log: &Signer, n: u64) -> Result<Vec<AddCheckpoint>> {
    let mut tree = MemoryTree::new();
    let mut out = Vec::new();
    for i in 1..=n {
        tree.push(merkle::leaf_hash(&i.to_be_bytes()))?;
        let root = merkle::root(&tree, i)?;
        let checkpoint = Checkpoint::new(log.name(), i, root).sign(log)?;
        let proof = if i == 1 {
            Vec::new()
        } else {
            merkle::consistency_proof(&tree, i - 1, i)?
        };
        out.push(AddCheckpoint {
            old_size: i - 1,
            proof,
            checkpoint,
        });
    }
    Ok(out)
}

/// `accord-witness serve` as a child process (the binary beside `accordctl`), stopped on drop.
struct ChildWitness {
    dir: std::path::PathBuf,
    grpc: std::net::SocketAddr,
    vkey: String,
    child: Option<std::process::Child>,
}

impl ChildWitness {
    /// Initialises witness `name` under `root` for the log `origin` (key `log_vkey`), starts it
    /// and reads the gRPC address from its first line (`listening grpc=ADDR http=ADDR`).
    async fn start(
        root: &std::path::Path,
        name: &str,
        origin: &str,
        log_vkey: &str,
    ) -> Result<Self> {
        use anyhow::Context;
        use std::io::BufRead;
        let dir = root.join(format!("witness-{name}"));
        let made = accord_witness::init::init(&accord_witness::init::InitOptions {
            dir: dir.clone(),
            name: name.into(),
            sans: Vec::new(),
            grpc_listen: "127.0.0.1:0".into(),
            http_listen: "127.0.0.1:0".into(),
        })?;
        let mut text = std::fs::read_to_string(&made.config_path)?;
        text.push_str(&format!(
            "\n[[logs]]\norigin = \"{origin}\"\nvkeys = [\"{log_vkey}\"]\n"
        ));
        std::fs::write(&made.config_path, text)?;
        let bin = std::env::current_exe()?.with_file_name("accord-witness");
        anyhow::ensure!(
            bin.exists(),
            "{} not found; build it first (cargo build --bins)",
            bin.display()
        );
        let mut child = std::process::Command::new(&bin)
            .args(["serve", "--config"])
            .arg(&made.config_path)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let mut w = ChildWitness {
            dir,
            grpc: "127.0.0.1:0".parse()?,
            vkey: made.vkey,
            child: Some(child),
        };
        let line = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::task::spawn_blocking(move || {
                let mut line = String::new();
                std::io::BufReader::new(stdout)
                    .read_line(&mut line)
                    .map(|_| line)
            }),
        )
        .await
        .context("accord-witness did not report its address within 60 s")???;
        w.grpc = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix("grpc="))
            .with_context(|| format!("unexpected first line from accord-witness: {line:?}"))?
            .parse()?;
        Ok(w)
    }

    /// The `[[witnesses.list]]` entry that puts this witness in a node's policy.
    fn node_config_entry(&self) -> String {
        format!(
            "\n[[witnesses.list]]\nvkey = \"{}\"\nendpoint = \"https://{}\"\nca = \"{}\"\n",
            self.vkey,
            self.grpc,
            self.dir
                .join(accord_daemon::layout::witness::TLS_CA)
                .display()
        )
    }

    /// SIGTERM and wait.
    async fn stop(mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()?;
            let status = tokio::task::spawn_blocking(move || child.wait()).await??;
            anyhow::ensure!(status.success(), "accord-witness exited with {status}");
        }
        Ok(())
    }
}

impl Drop for ChildWitness {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `q` quantile of sorted `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Runs the benchmark.
pub async fn run(mut a: WitnessArgs, mut out: crate::output::Output) -> Result<()> {
    if a.json {
        out = crate::output::Output::Json;
    }
    if a.quick {
        a.checkpoints = a.checkpoints.min(200);
        a.samples = a.samples.min(20);
        if a.alg == BenchAlg::All {
            a.alg = BenchAlg::Ed25519;
        }
    }
    let tmp = tempfile::tempdir()?;
    let logs: Vec<Signer> = (0..a.origins.max(1))
        .map(|i| Signer::generate(&format!("bench.example/log{i}"), &mut rand::rngs::OsRng))
        .collect::<Result<_, _>>()?;
    let chains: Vec<Vec<AddCheckpoint>> = logs
        .iter()
        .map(|l| chain(l, a.checkpoints))
        .collect::<Result<_>>()?;
    let algs: &[BenchAlg] = match a.alg {
        BenchAlg::All => &[BenchAlg::Ed25519, BenchAlg::MlDsa44, BenchAlg::Both],
        ref one => std::slice::from_ref(one),
    };
    let mut rates = Vec::new();
    for &alg in algs {
        let r = add_checkpoint_rates(tmp.path(), alg, &logs, &chains, a.checkpoints).await?;
        rates.push((alg, r));
    }

    // recorded → witnessed with the default checkpoint interval and two witnesses.
    let root = tmp.path().join("e2e");
    std::fs::create_dir_all(&root)?;
    let (_, vkey) = init_node(&root, "acme", &["alice"])?;
    let w1 = ChildWitness::start(&root, "w1.example", "acme.accord/log", &vkey).await?;
    let w2 = ChildWitness::start(&root, "w2.example", "acme.accord/log", &vkey).await?;
    let entries = format!("{}{}", w1.node_config_entry(), w2.node_config_entry());
    let node = InProcNode::start_child(&root, "acme", |t| {
        *t = t.replace("k = 0", "k = 2");
        t.push_str(&entries);
    })
    .await?;
    let alice = node.party("alice")?;
    let mut c = node.work().await?;
    // Enough pre-signed records for the load to last well past the samples (~60 ms each).
    let load = match a.load {
        0 => None,
        per_s => {
            let n = per_s * (a.samples as u64 * 60 / 1000 + 10);
            let records = tokio::task::spawn_blocking({
                let alice = alice.clone();
                move || crate::bench_load::records(&alice, "acme", "alice", n)
            })
            .await?;
            Some(crate::bench_load::Load::start(
                node.work().await?,
                records,
                per_s,
            ))
        }
    };
    let mut times = Vec::new();
    for i in 0..a.samples {
        let r = crate::bench_load::request("acme", "alice", "bob", format!("bench-{i}"));
        let t = Instant::now();
        let resp = c
            .submit(work::SubmitRequest {
                record: Some(accord_proto::signing::sign_record(&alice, &r)),
            })
            .await?
            .into_inner();
        loop {
            let d = c
                .get_durability(work::GetDurabilityRequest {
                    record_id: resp.record_id.clone(),
                })
                .await?
                .into_inner();
            if d.durability() == work::Durability::Witnessed {
                break;
            }
            if t.elapsed() > Duration::from_secs(30) {
                anyhow::bail!("record not witnessed within 30 s");
            }
            // Polling is the measurement here: a 1 ms step bounds its error.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let load_per_s = match load {
        Some(l) => l.stop().await?,
        None => 0.0,
    };
    node.stop().await?;
    w1.stop().await?;
    w2.stop().await?;
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let max = times.iter().cloned().fold(0.0, f64::max);
    times.sort_by(f64::total_cmp);
    let (p50, p99) = (quantile(&times, 0.5), quantile(&times, 0.99));

    let origins = chains.len() - 1;
    if out == crate::output::Output::Json {
        let r = rates[0].1;
        let by_alg: serde_json::Map<String, serde_json::Value> = rates
            .iter()
            .map(|(alg, r)| {
                (
                    alg.name().to_owned(),
                    serde_json::json!({"add_checkpoint_per_s_one_origin": r.one,
                        "add_checkpoint_per_s_many_origins": r.many,
                        "add_checkpoint_per_cpu_s_many_origins": r.many_per_cpu_s,
                        "cores_busy_many_origins": r.many_cores}),
                )
            })
            .collect();
        crate::output::json(&serde_json::json!({
            "bench": "witness",
            "checkpoints_per_origin": a.checkpoints,
            "origins": origins,
            "alg": rates[0].0.name(),
            "add_checkpoint_per_s_one_origin": r.one,
            "add_checkpoint_per_s_many_origins": r.many,
            "add_checkpoint_per_cpu_s_many_origins": r.many_per_cpu_s,
            "cores_busy_many_origins": r.many_cores,
            "by_alg": by_alg,
            "recorded_to_witnessed_p50_ms": p50,
            "recorded_to_witnessed_p99_ms": p99,
            "recorded_to_witnessed_ms": {"samples": times.len(), "mean": mean, "max": max},
            "recorded_to_witnessed_load_per_s": load_per_s,
            "quick": a.quick,
        }));
        return Ok(());
    }
    println!("accordctl bench witness");
    for (alg, r) in &rates {
        println!(
            "  [{:>9}] add-checkpoint/s, one origin (verify log sig + proof, cosign, synced write): {:>8.0}",
            alg.name(),
            r.one
        );
        println!(
            "  [{:>9}] add-checkpoint/s, {origins} origins concurrently:                              {:>8.0}",
            alg.name(),
            r.many
        );
        if let (Some(per_cpu), Some(cores)) = (r.many_per_cpu_s, r.many_cores) {
            println!(
                "  [{:>9}]   … per CPU second of the witness: {per_cpu:.0} ({cores:.2} cores busy)",
                alg.name()
            );
        }
    }
    println!(
        "  recorded → witnessed (K=2, two Ed25519 witnesses and the node as child processes, default checkpoint interval, background load {load_per_s:.0} appends/s), {} samples: p50 {p50:.0} ms, p99 {p99:.0} ms, mean {mean:.0} ms, max {max:.0} ms",
        times.len()
    );
    Ok(())
}
