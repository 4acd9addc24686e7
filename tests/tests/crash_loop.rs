//! Issue 16, crash-loop durability with real processes: for a number of cycles, concurrent
//! clients work against an `accord-node` (and an `accord-witness`) that is SIGKILLed at a random
//! moment and restarted from its data directory.
//!
//! Node, after every restart: each append acknowledged before any kill (answered `recorded` or
//! better, applied by the kernel) is in the ledger at the sequence it was acknowledged with, and
//! applied (its commitment's derived state is `requested`); sequences are dense from 0; the
//! latest checkpoint is signed by the node key, covers the ledger, and is consistent — by a
//! proof from LogService, verified here — with every checkpoint the clients saw before.
//!
//! Witness, after every restart: the size it holds for the log never goes back below any size
//! it co-signed, the checkpoint it holds is the log's own at that size, every cosignature a
//! client got back verified with the witness key, and it goes on co-signing growth.
//!
//! `ACCORD_CRASHLOOP_CYCLES` (default 3) sets the cycles; `ACCORD_CRASHLOOP_SEED` replays a run
//! (the seed is printed). `scripts/crashloop.sh --cycles N` runs the long version and prints
//! the `crash-loop:` figures lines recorded in RELIABILITY.md.

use accord_proto::checkpoint::{Checkpoint, open_checkpoint, verify_cosignature};
use accord_proto::merkle::{self, Hash, MemoryTree};
use accord_proto::note::{Note, NoteSignature, Signer, Verifier};
use accord_proto::pb::log::v1::{self as logpb, log_service_client::LogServiceClient};
use accord_proto::pb::record::v1::Record;
use accord_proto::pb::witness::v1::{self as wpb, witness_service_client::WitnessServiceClient};
use accord_proto::pb::work::v1::{self as work, Durability};
use accord_proto::signing;
use accord_tests::{TestNode, TestWitness, WorkClient, eventually};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLIENTS: usize = 4;
const WAIT: Duration = Duration::from_secs(60);

fn cycles() -> usize {
    std::env::var("ACCORD_CRASHLOOP_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn rng(what: &str) -> StdRng {
    let seed = std::env::var("ACCORD_CRASHLOOP_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().r#gen::<u64>());
    eprintln!("crash-loop {what}: seed {seed} (ACCORD_CRASHLOOP_SEED={seed} replays it)");
    StdRng::seed_from_u64(seed)
}

/// Set just before the process is SIGKILLed: from then on a client may stop.
type Killed = Arc<AtomicBool>;

/// A call failed: only a transport error (the connection gone, no answer from the server)
/// after the kill may end a client. A server's answer, or any failure before the kill, fails
/// the test with its cause.
fn ended_by_kill(killed: &Killed, what: &str, s: &tonic::Status) {
    assert!(
        killed.load(Ordering::SeqCst),
        "{what} failed before the kill: {s:?}"
    );
    let transport = std::error::Error::source(s).is_some()
        || matches!(s.code(), tonic::Code::Unavailable | tonic::Code::Cancelled);
    assert!(
        transport && s.metadata().get("accord-reason").is_none(),
        "{what} failed after the kill with a server's answer, not a transport error: {s:?}"
    );
}

fn request(commitment: &str) -> Record {
    accord_tests::records::alice_asks_bob(commitment, commitment)
}

/// An acknowledged append.
#[derive(Clone, Debug)]
struct Ack {
    id: Vec<u8>,
    sequence: u64,
    commitment: String,
}

/// A checkpoint a client saw: (size, root).
type Seen = (u64, Hash);

/// Submits records one after another until the node stops answering; every answer must say
/// `recorded` (or better) and applied before it counts as acknowledged.
async fn client(
    mut c: WorkClient,
    alice: Signer,
    tag: String,
    acks: Arc<Mutex<Vec<Ack>>>,
    n: Arc<AtomicUsize>,
    killed: Killed,
) {
    for i in 0.. {
        let commitment = format!("{tag}-{i}");
        let signed = signing::sign_record(&alice, &request(&commitment));
        let r = match c
            .submit(work::SubmitRequest {
                record: Some(signed),
            })
            .await
        {
            Ok(r) => r,
            Err(s) => {
                // Killed: this one is not acknowledged.
                return ended_by_kill(&killed, &format!("Submit of {commitment}"), &s);
            }
        };
        let r = r.into_inner();
        assert!(
            matches!(
                r.durability(),
                Durability::Recorded | Durability::Included | Durability::Witnessed
            ),
            "{commitment} acknowledged at {:?}",
            r.durability()
        );
        let outcome = r.outcome.expect("an acknowledgement carries the outcome");
        assert!(
            outcome.applied,
            "{commitment} rejected: {}",
            outcome.rejection_code
        );
        assert!(!r.duplicate, "{commitment} is new");
        acks.lock().unwrap().push(Ack {
            id: r.record_id.to_vec(),
            sequence: r.sequence,
            commitment,
        });
        n.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls the latest checkpoint until the node stops answering, keeping every one it sees (its
/// note verified with the node key).
async fn watcher(
    mut l: LogServiceClient<tonic::transport::Channel>,
    origin: String,
    node_key: Verifier,
    seen: Arc<Mutex<Vec<Seen>>>,
    killed: Killed,
) {
    let mut last = None;
    loop {
        let r = match l.get_checkpoint(logpb::GetCheckpointRequest {}).await {
            Ok(r) => r,
            Err(s) => return ended_by_kill(&killed, "GetCheckpoint", &s),
        };
        if let Some(cp) = r.into_inner().latest
            && last != Some(cp.size)
        {
            let keys = std::slice::from_ref(&node_key);
            let opened = open_checkpoint(cp.note.as_bytes(), &origin, keys, &[])
                .expect("the node's checkpoint verifies with its key");
            let c = opened.checkpoint;
            assert_eq!((c.size, c.root.to_vec()), (cp.size, cp.root.to_vec()));
            seen.lock().unwrap().push((c.size, c.root));
            last = Some(cp.size);
        }
        // A poll interval, not a readiness wait: the watcher samples what clients can see.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn log_client(node: &TestNode) -> LogServiceClient<tonic::transport::Channel> {
    LogServiceClient::new(node.channel().await.unwrap())
}

/// Every check after a restart; returns the ledger size.
async fn check_node(
    node: &TestNode,
    acks: &[Ack],
    new: &[Ack],
    seen: &[Seen],
    node_key: &Verifier,
) -> u64 {
    let mut c = node.work().await.unwrap();
    // Dense sequences from 0; the id and outcome at each.
    let mut s = c
        .list_records(work::ListRecordsRequest {
            from_sequence: 0,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut ledger: Vec<(Vec<u8>, bool)> = Vec::new();
    while let Some(e) = s.message().await.unwrap() {
        assert_eq!(e.sequence, ledger.len() as u64, "sequences are dense");
        let applied = e.outcome.is_some_and(|o| o.applied);
        ledger.push((e.record_id.to_vec(), applied));
    }
    let n = ledger.len() as u64;
    // Every append acknowledged in any cycle so far: at its sequence, applied.
    for a in acks {
        let at = ledger.get(a.sequence as usize).unwrap_or_else(|| {
            panic!(
                "acknowledged {} (#{}) lost: ledger has {n}",
                a.commitment, a.sequence
            )
        });
        assert_eq!(
            at.0, a.id,
            "{} is not at its acknowledged sequence {}",
            a.commitment, a.sequence
        );
        assert!(at.1, "{} not applied after restart", a.commitment);
    }
    // The replayed kernel derived each commitment acknowledged in this cycle, and a sample of
    // the earlier ones (all of them in short runs).
    let step = (acks.len() / 200).max(1);
    for a in new.iter().chain(acks.iter().step_by(step)) {
        let cm = c
            .get_commitment(work::GetCommitmentRequest {
                commitment_id: a.commitment.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("{} has no derived state: {e}", a.commitment))
            .into_inner();
        assert_eq!(cm.state, "requested", "{}", a.commitment);
    }
    // The checkpoint after the restart covers the ledger and extends every one seen before.
    let mut l = log_client(node).await;
    let latest = eventually(WAIT, || {
        let mut l = l.clone();
        async move {
            let cp = l
                .get_checkpoint(logpb::GetCheckpointRequest {})
                .await?
                .into_inner()
                .latest;
            Ok::<_, tonic::Status>(cp.filter(|cp| cp.size == n))
        }
    })
    .await
    .expect("a checkpoint covering the recovered ledger");
    let opened = open_checkpoint(
        latest.note.as_bytes(),
        &node.origin(),
        std::slice::from_ref(node_key),
        &[],
    )
    .expect("the checkpoint after restart verifies");
    let root = opened.checkpoint.root;
    let mut distinct: Vec<Seen> = seen.to_vec();
    distinct.sort();
    distinct.dedup();
    for (size, old_root) in distinct {
        assert!(
            size <= n,
            "a checkpoint of size {size} was seen, the ledger has {n}"
        );
        if size == 0 {
            assert_eq!(old_root, merkle::EMPTY_ROOT);
            continue;
        }
        let p = l
            .get_consistency_proof(logpb::GetConsistencyProofRequest {
                size1: size,
                size2: n,
            })
            .await
            .unwrap()
            .into_inner();
        let proof: Vec<Hash> = p
            .hashes
            .iter()
            .map(|h| h.as_ref().try_into().expect("32-byte hash"))
            .collect();
        merkle::verify_consistency(size, n, &proof, &old_root, &root)
            .unwrap_or_else(|e| panic!("checkpoint {size} → {n} inconsistent: {e}"));
    }
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn node_killed_at_random_keeps_every_acknowledged_append() {
    let mut rng = rng("node");
    let mut node = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| {
            *t = t.replace(
                "checkpoint_interval_ms = 1000",
                "checkpoint_interval_ms = 50",
            )
        })
        .start()
        .await
        .unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    let node_key = Verifier::from_vkey(&node.vkey()).unwrap();
    let acks = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cycles = cycles();
    let mut size = 0;
    for cycle in 0..cycles {
        let target = rng.gen_range(5..60usize);
        let before = acks.lock().unwrap().len();
        let n = Arc::new(AtomicUsize::new(0));
        let killed = Killed::default();
        let c = node.work().await.unwrap();
        let mut tasks = Vec::new();
        for k in 0..CLIENTS {
            let tag = format!("c{cycle}-{k}");
            tasks.push(tokio::spawn(client(
                c.clone(),
                alice.clone(),
                tag,
                acks.clone(),
                n.clone(),
                killed.clone(),
            )));
        }
        tasks.push(tokio::spawn(watcher(
            log_client(&node).await,
            node.origin(),
            node_key.clone(),
            seen.clone(),
            killed.clone(),
        )));
        // The random moment: after `target` acknowledgements, with the clients mid-flight.
        eventually(WAIT, || {
            let n = n.clone();
            async move { (n.load(Ordering::SeqCst) >= target).then_some(()) }
        })
        .await
        .expect("the clients make progress");
        killed.store(true, Ordering::SeqCst);
        node.kill9();
        for t in tasks {
            t.await.expect("a client or the watcher failed a check");
        }
        node.respawn_on_new_port().await.unwrap();
        let acked = acks.lock().unwrap().clone();
        let seen_now = seen.lock().unwrap().clone();
        let new = &acked[before..];
        size = check_node(&node, &acked, new, &seen_now, &node_key).await;
        assert!(size >= acked.len() as u64);
        eprintln!(
            "crash-loop node: cycle {cycle}: killed after {target}+ acks; {} acknowledged in all, ledger {size}, {} checkpoints seen, all consistent",
            acked.len(),
            seen_now.len()
        );
    }
    let acked = acks.lock().unwrap().len();
    eprintln!("crash-loop: node cycles={cycles} acknowledged={acked} ledger={size} lost=0");
}

/// The test's own log, which the witness is configured to witness.
struct Log {
    signer: Signer,
    tree: MemoryTree,
    roots: Vec<Hash>, // roots[i] = root at size i
}

impl Log {
    fn grow(&mut self) -> u64 {
        let n = self.tree.size();
        self.tree.push(merkle::leaf_hash(&n.to_be_bytes())).unwrap();
        self.roots.push(self.tree.root());
        self.tree.size()
    }

    fn body(&self, size: u64) -> String {
        Checkpoint::new(self.signer.name(), size, self.roots[size as usize])
            .to_body()
            .unwrap()
    }

    fn request(&self, old: u64, size: u64) -> wpb::AddCheckpointRequest {
        let mut note = Note::new(&self.body(size)).unwrap();
        note.sign(&self.signer).unwrap();
        let proof = if old == 0 {
            Vec::new()
        } else {
            merkle::consistency_proof(&self.tree, old, size).unwrap()
        };
        wpb::AddCheckpointRequest {
            old_size: old,
            consistency_proof: proof.iter().map(|h| h.to_vec().into()).collect(),
            checkpoint: note.to_string(),
        }
    }
}

/// Grows the log and asks the witness to co-sign, until the witness stops answering. Each
/// cosignature it gets back is verified with the witness key over the exact body sent.
async fn witness_client(
    mut w: WitnessServiceClient<tonic::transport::Channel>,
    log: Arc<Mutex<Log>>,
    held: Arc<Mutex<u64>>,
    key: Verifier,
    cosigned: Arc<Mutex<Vec<u64>>>,
    n: Arc<AtomicUsize>,
    killed: Killed,
) {
    loop {
        let (req, size, body) = {
            let mut l = log.lock().unwrap();
            let size = l.grow();
            let old = *held.lock().unwrap();
            (l.request(old, size), size, l.body(size))
        };
        match w.add_checkpoint(req).await {
            Ok(r) => {
                let lines = r.into_inner().cosignatures;
                let sig =
                    NoteSignature::parse_line(lines.trim_end()).expect("one cosignature line");
                verify_cosignature(&key, &body, &sig).expect("the cosignature verifies");
                cosigned.lock().unwrap().push(size);
                let mut h = held.lock().unwrap();
                *h = (*h).max(size);
                n.fetch_add(1, Ordering::SeqCst);
            }
            Err(s) if s.code() == tonic::Code::Aborted => {
                // Another client moved the witness: learn its size from the answer.
                let now: u64 = s
                    .metadata()
                    .get("tlog-size")
                    .and_then(|v| v.to_str().ok()?.parse().ok())
                    .expect("a size mismatch names the held size");
                let mut h = held.lock().unwrap();
                *h = (*h).max(now);
            }
            Err(s) if s.code() == tonic::Code::ResourceExhausted => tokio::task::yield_now().await,
            Err(s) => return ended_by_kill(&killed, &format!("AddCheckpoint of {size}"), &s),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn witness_killed_at_random_never_goes_back() {
    let mut rng = rng("witness");
    let signer = Signer::generate("crash.example/log", &mut rand::rngs::OsRng).unwrap();
    let mut w = TestWitness::start("w1.example", signer.name(), &signer.verifier().to_vkey())
        .await
        .unwrap();
    let key = Verifier::from_vkey(&w.vkey()).unwrap();
    let log = Arc::new(Mutex::new(Log {
        signer: signer.clone(),
        tree: MemoryTree::new(),
        roots: vec![merkle::root_from_leaf_hashes(&[])],
    }));
    let held = Arc::new(Mutex::new(0u64));
    let cosigned = Arc::new(Mutex::new(Vec::new()));
    let cycles = cycles();
    for cycle in 0..cycles {
        let target = rng.gen_range(3..30usize);
        let n = Arc::new(AtomicUsize::new(0));
        let killed = Killed::default();
        let ch = w.channel().await.unwrap();
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                tokio::spawn(witness_client(
                    WitnessServiceClient::new(ch.clone()),
                    log.clone(),
                    held.clone(),
                    key.clone(),
                    cosigned.clone(),
                    n.clone(),
                    killed.clone(),
                ))
            })
            .collect();
        eventually(WAIT, || {
            let n = n.clone();
            async move { (n.load(Ordering::SeqCst) >= target).then_some(()) }
        })
        .await
        .expect("the witness co-signs");
        killed.store(true, Ordering::SeqCst);
        w.kill9();
        for t in tasks {
            t.await.expect("a client failed a check");
        }
        w.respawn_on_new_ports().await.unwrap();
        let max_cosigned = cosigned.lock().unwrap().iter().copied().max().unwrap_or(0);
        let mut c = WitnessServiceClient::new(w.channel().await.unwrap());
        let latest = c
            .get_latest(wpb::GetLatestRequest {
                origin: signer.name().into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            latest.size >= max_cosigned,
            "cycle {cycle}: the witness holds {} after co-signing {max_cosigned}",
            latest.size
        );
        // What it holds is the log's own checkpoint at that size (no other root).
        let held_cp = Checkpoint::parse(&latest.checkpoint).expect("held checkpoint body");
        assert_eq!(held_cp.size, latest.size);
        assert_eq!(
            held_cp.root,
            log.lock().unwrap().roots[latest.size as usize]
        );
        *held.lock().unwrap() = latest.size;
        eprintln!(
            "crash-loop witness: cycle {cycle}: killed after {target}+ cosignatures; held {} ≥ {max_cosigned}",
            latest.size
        );
    }
    // And it goes on co-signing consistent growth from what it holds.
    let mut c = WitnessServiceClient::new(w.channel().await.unwrap());
    let req = {
        let mut l = log.lock().unwrap();
        let size = l.grow();
        l.request(*held.lock().unwrap(), size)
    };
    c.add_checkpoint(req)
        .await
        .expect("co-signs after the last restart");
    let total = cosigned.lock().unwrap().len();
    eprintln!("crash-loop: witness cycles={cycles} cosigned={total} size_went_back=0");
}
