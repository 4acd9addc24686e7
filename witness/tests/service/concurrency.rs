//! The check and the store are one atomic step per origin: racing add-checkpoints for one origin
//! never get two different roots co-signed for one size, and never roll the held size back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use accord_proto::checkpoint::Cosigner;
use accord_proto::merkle::Hash;
use accord_proto::pb::witness::v1 as pb;
use accord_witness::{Clock, Error, Limits, LogConfig, ManualClock, Witness, WitnessOptions};
use pb::witness_service_client::WitnessServiceClient;

use accord_proto::checkpoint::{Checkpoint, verify_cosignature};
use accord_proto::note::NoteSignature;

use crate::common::{TestLog, TestWitness, assert_cosigned};

/// Every (size, root) co-signed so far; panics on a second root for a size.
#[derive(Default)]
struct Ledger(HashMap<u64, HashSet<Hash>>);

impl Ledger {
    fn record(&mut self, size: u64, root: Hash) {
        let roots = self.0.entry(size).or_default();
        roots.insert(root);
        assert_eq!(roots.len(), 1, "two roots co-signed for size {size}");
    }
}

/// Contenders for one round, all claiming `held` as the old size: forks of the same new size and
/// honest extensions of different sizes.
fn contenders(log: &TestLog, held: u64, round: usize) -> Vec<TestLog> {
    let mut out = Vec::new();
    for i in 0..8 {
        let mut fork = log.fork(&format!("round{round}-fork{i}"));
        fork.grow_to(held + 5);
        out.push(fork);
    }
    for i in 1..=8 {
        let mut honest = log.clone();
        honest.grow_to(held + i);
        out.push(honest);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_requests_in_process_cosign_one_root_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/race");
    let witness = Arc::new(
        Witness::open(WitnessOptions {
            data_dir: dir.path().join("data"),
            cosigners: vec![Cosigner::generate("w", &mut rand::rngs::OsRng).unwrap()],
            logs: vec![LogConfig::new(log.origin(), &[log.vkey()]).unwrap()],
            limits: Limits {
                max_in_flight: 1024,
                max_queued_per_origin: 1024,
            },
            clock: Arc::new(ManualClock::new(1)),
        })
        .unwrap(),
    );
    let mut ledger = Ledger::default();
    log.grow_to(3);
    let first = witness.add_checkpoint(log.request(0)).await.unwrap();
    ledger.record(first.size, first.root);
    let mut held = 3;

    for round in 0..10 {
        let all = contenders(&log, held, round);
        let tasks: Vec<_> = all
            .iter()
            .map(|c| {
                let (w, req) = (witness.clone(), c.request(held));
                tokio::spawn(async move { w.add_checkpoint(req).await })
            })
            .collect();
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.unwrap() {
                Ok(c) => {
                    ledger.record(c.size, c.root);
                    winners.push(i);
                }
                Err(Error::SizeMismatch { old_size, .. }) => assert_eq!(old_size, held),
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one request moves the state"
        );
        log = all[winners[0]].clone();
        held = log.tree.size();
        let latest = witness.latest(log.origin()).await.unwrap().unwrap();
        assert_eq!((latest.size, latest.root), (held, log.tree.root()));

        // Same-size race: the held root is co-signed again, forks of that size never are.
        let mut same = Vec::new();
        for i in 0..6 {
            let mut fork = TestLog::with_signer(log.signer.clone(), &format!("same{round}-{i}"));
            fork.grow_to(held);
            same.push((false, fork));
            same.push((true, log.clone()));
        }
        let tasks: Vec<_> = same
            .iter()
            .map(|(honest, c)| {
                let (w, req, honest) = (witness.clone(), c.request(held), *honest);
                tokio::spawn(async move { (honest, w.add_checkpoint(req).await) })
            })
            .collect();
        for t in tasks {
            match t.await.unwrap() {
                (true, Ok(c)) => ledger.record(c.size, c.root),
                (false, Err(Error::Inconsistent { .. })) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_requests_over_grpc_cosign_one_root_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TestLog::new("example.com/race");
    let w = TestWitness::start_with(
        dir.path(),
        &[&log],
        &[("max_queued_per_origin = 16", "max_queued_per_origin = 256")],
    )
    .await;
    let client = WitnessServiceClient::new(w.channel().await);
    let mut ledger = Ledger::default();
    let mut held = 0;
    for round in 0..4 {
        let all = contenders(&log, held, round);
        let tasks: Vec<_> = all
            .iter()
            .map(|c| {
                let mut client = client.clone();
                let req = c.request(held);
                let msg = pb::AddCheckpointRequest {
                    old_size: req.old_size,
                    consistency_proof: req.proof.iter().map(|h| h.to_vec().into()).collect(),
                    checkpoint: req.checkpoint,
                };
                tokio::spawn(async move { client.add_checkpoint(msg).await })
            })
            .collect();
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.unwrap() {
                Ok(resp) => {
                    // What was co-signed is what the answer proves, not what this client sent:
                    // the returned line must verify with the witness key over the contender's
                    // checkpoint body, at the witness's clock.
                    let lines = resp.into_inner().cosignatures;
                    assert_cosigned(&w.verifier, &all[i], &lines, w.clock.now());
                    let sig = NoteSignature::parse_line(lines.trim_end()).unwrap();
                    let body = all[i].checkpoint().to_body().unwrap();
                    verify_cosignature(&w.verifier, &body, &sig).unwrap();
                    let cosigned = Checkpoint::parse(&body).unwrap();
                    ledger.record(cosigned.size, cosigned.root);
                    winners.push(i);
                }
                Err(s) => {
                    // A loser is told the size moved (C2SP 409 → ABORTED) and to what: a size
                    // beyond the one it claimed.
                    assert_eq!(s.code(), tonic::Code::Aborted, "{s:?}");
                    let now_held: u64 = s
                        .metadata()
                        .get(accord_witness::error::TLOG_SIZE_METADATA)
                        .and_then(|v| v.to_str().ok()?.parse().ok())
                        .unwrap_or_else(|| panic!("no held size in {s:?}"));
                    assert!(now_held > held, "held {now_held} after {held}");
                }
            }
        }
        assert_eq!(winners.len(), 1, "round {round}");
        log = all[winners[0]].clone();
        held = log.tree.size();
    }
    w.stop().await;
}
