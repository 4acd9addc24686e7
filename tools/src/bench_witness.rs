//! `accordctl bench witness`: add-checkpoint per second on a real witness (RocksDB, synced
//! writes), and the time from `recorded` to `witnessed` for a node with two witnesses (K=2) at
//! the default checkpoint interval.

use crate::inproc::{InProcNode, InProcWitness, init_node};
use accord_proto::checkpoint::{Checkpoint, Cosigner};
use accord_proto::merkle::{self, MemoryTree};
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
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
    #[arg(long, default_value_t = 5)]
    pub samples: usize,
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

/// Runs the benchmark.
pub async fn run(a: WitnessArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let logs: Vec<Signer> = (0..a.origins.max(1))
        .map(|i| Signer::generate(&format!("bench.example/log{i}"), &mut rand::rngs::OsRng))
        .collect::<Result<_, _>>()?;
    let witness = Arc::new(Witness::open(WitnessOptions {
        data_dir: tmp.path().join("witness"),
        cosigner: Cosigner::generate("bench.example/witness", &mut rand::rngs::OsRng)?,
        logs: logs
            .iter()
            .map(|l| LogConfig::from_verifiers(l.name(), vec![l.verifier()]))
            .collect::<Result<_, _>>()?,
        limits: accord_witness::Limits::default(),
        clock: Arc::new(accord_witness::SystemClock),
    })?);
    let chains: Vec<Vec<AddCheckpoint>> = logs
        .iter()
        .map(|l| chain(l, a.checkpoints))
        .collect::<Result<_>>()?;

    // One origin: each request verifies the log signature and the proof, cosigns, and syncs.
    let t = Instant::now();
    for req in chains[0].iter().cloned() {
        witness.add_checkpoint(req).await?;
    }
    let one = a.checkpoints as f64 / t.elapsed().as_secs_f64();

    // Several origins at once (each origin's requests are serialised by the witness).
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
    let many = ((chains.len() - 1) as u64 * a.checkpoints) as f64 / t.elapsed().as_secs_f64();
    drop(witness);

    // recorded → witnessed with the default checkpoint interval and two witnesses.
    let root = tmp.path().join("e2e");
    std::fs::create_dir_all(&root)?;
    let (_, vkey) = init_node(&root, "acme", &["alice"])?;
    let w1 = InProcWitness::start(&root, "w1.example", "acme.accord/log", &vkey).await?;
    let w2 = InProcWitness::start(&root, "w2.example", "acme.accord/log", &vkey).await?;
    let entries = format!("{}{}", w1.node_config_entry(), w2.node_config_entry());
    let node = InProcNode::start_initialised(&root, "acme", |t| {
        *t = t.replace("k = 0", "k = 2");
        t.push_str(&entries);
    })
    .await?;
    let alice = node.party("alice")?;
    let mut c = node.work().await?;
    let mut times = Vec::new();
    for i in 0..a.samples {
        let r = Record {
            author: Some(PartyRef {
                organisation: "acme".into(),
                name: "alice".into(),
            }),
            commitment_id: format!("bench-{i}"),
            operation: Some(Operation::Request(rec::Request {
                candidate: Some(PartyRef {
                    organisation: "acme".into(),
                    name: "bob".into(),
                }),
                terms: Some(rec::Terms {
                    title: "t".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..Default::default()
        };
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
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    node.stop().await?;
    w1.stop().await?;
    w2.stop().await?;
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let max = times.iter().cloned().fold(0.0, f64::max);

    println!("accordctl bench witness");
    println!(
        "  add-checkpoint/s, one origin (verify log sig + proof, cosign, synced write): {one:>8.0}"
    );
    println!(
        "  add-checkpoint/s, {} origins concurrently:                              {many:>8.0}",
        chains.len() - 1
    );
    println!(
        "  recorded → witnessed (K=2, default 1000 ms checkpoint interval), {} samples: mean {mean:.0} ms, max {max:.0} ms",
        times.len()
    );
    Ok(())
}
