use super::*;
use crate::clock::ManualClock;
use accord_proto::Signer;
use accord_proto::merkle::{MemoryTree, leaf_hash};

const ORIGIN: &str = "example.com/log";

fn open(dir: &std::path::Path, limits: Limits) -> (Arc<Witness>, Signer) {
    let mut rng = rand::rngs::OsRng;
    let log = Signer::generate(ORIGIN, &mut rng).unwrap();
    let w = Witness::open(WitnessOptions {
        data_dir: dir.to_owned(),
        cosigners: vec![Cosigner::generate("w", &mut rng).unwrap()],
        logs: vec![LogConfig::from_verifiers(ORIGIN, vec![log.verifier()]).unwrap()],
        limits,
        clock: Arc::new(ManualClock::new(1_000)),
    })
    .unwrap();
    (Arc::new(w), log)
}

fn request(log: &Signer, n: u8) -> AddCheckpoint {
    let mut t = MemoryTree::new();
    for i in 0..n {
        t.push(leaf_hash(&[i])).unwrap();
    }
    AddCheckpoint {
        old_size: 0,
        proof: vec![],
        checkpoint: Checkpoint::new(ORIGIN, t.size(), t.root())
            .sign(log)
            .unwrap(),
    }
}

/// Waits (yielding, no timers) until `cond` holds.
async fn until(cond: impl Fn() -> bool) {
    while !cond() {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn per_origin_queue_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (w, log) = open(
        dir.path(),
        Limits {
            max_in_flight: 10,
            max_queued_per_origin: 1,
        },
    );
    let (_, slot) = w.known(ORIGIN).unwrap();
    let held = slot.latest.clone().lock_owned().await;
    let first = tokio::spawn({
        let (w, req) = (w.clone(), request(&log, 3));
        async move { w.add_checkpoint(req).await }
    });
    until(|| slot.queue.available_permits() == 0).await;
    let second = w.add_checkpoint(request(&log, 3)).await;
    assert!(
        matches!(
            second,
            Err(Error::Overloaded {
                scope: LimitScope::Origin
            })
        ),
        "{second:?}"
    );
    drop(held);
    assert_eq!(first.await.unwrap().unwrap().size, 3);
}

#[tokio::test(flavor = "current_thread")]
async fn global_limit_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (w, log) = open(
        dir.path(),
        Limits {
            max_in_flight: 1,
            max_queued_per_origin: 10,
        },
    );
    let (_, slot) = w.known(ORIGIN).unwrap();
    let held = slot.latest.clone().lock_owned().await;
    let first = tokio::spawn({
        let (w, req) = (w.clone(), request(&log, 2));
        async move { w.add_checkpoint(req).await }
    });
    until(|| w.global.available_permits() == 0).await;
    let second = w.add_checkpoint(request(&log, 2)).await;
    assert!(
        matches!(
            second,
            Err(Error::Overloaded {
                scope: LimitScope::Global
            })
        ),
        "{second:?}"
    );
    drop(held);
    assert_eq!(first.await.unwrap().unwrap().size, 2);
    // Permits come back once the step is done.
    assert_eq!(w.global.available_permits(), 1);
}

/// A caller dropped once it holds the origin's lock (its step handed to the blocking pool) does
/// not cancel the step: the checkpoint is stored and the cache shows it, the two agreeing.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_caller_still_completes_the_step() {
    use std::task::{Context, Poll, Waker};
    let dir = tempfile::tempdir().unwrap();
    let (w, log) = open(dir.path(), Limits::default());
    let (_, slot) = w.known(ORIGIN).unwrap();
    let held = slot.latest.clone().lock_owned().await;
    // The caller is polled by hand, so the test knows how far it got: first it queues for the
    // lock the test holds ...
    let mut caller = Box::pin(w.add_checkpoint(request(&log, 5)));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(caller.as_mut().poll(&mut cx).is_pending());
    assert!(slot.queue.available_permits() < Limits::default().max_queued_per_origin);
    // ... then, the lock handed to it, one more poll takes it and starts the step, and the
    // caller is dropped there.
    drop(held);
    if let Poll::Ready(r) = caller.as_mut().poll(&mut cx) {
        panic!("the step cannot have finished within one poll: {r:?}");
    }
    drop(caller);
    // The step completes without its caller: the lock comes back holding size 5, and the store
    // holds the same checkpoint.
    let latest = slot.latest.lock().await.clone();
    assert_eq!(
        latest.as_ref().map(|l| l.size),
        Some(5),
        "the step was cancelled"
    );
    let stored = w.store.load_checkpoints().unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored.first().map(|(_, l)| l.clone()), latest);
    // Its permits came back too.
    assert_eq!(
        slot.queue.available_permits(),
        Limits::default().max_queued_per_origin
    );
}

#[test]
fn consistency_rules() {
    let mut t = MemoryTree::new();
    for i in 0..5u8 {
        t.push(leaf_hash(&[i])).unwrap();
    }
    let cp = |size, root| Checkpoint::new(ORIGIN, size, root);
    // From nothing: any tree, empty proof.
    assert!(check_consistency(0, &EMPTY_ROOT, &cp(5, t.root()), &[]).is_ok());
    assert!(check_consistency(0, &EMPTY_ROOT, &cp(5, t.root()), &[[0; 32]]).is_err());
    assert!(check_consistency(0, &EMPTY_ROOT, &cp(0, EMPTY_ROOT), &[]).is_ok());
    assert!(check_consistency(0, &EMPTY_ROOT, &cp(0, [1; 32]), &[]).is_err());
    // Same size: same root only.
    assert!(check_consistency(5, &t.root(), &cp(5, t.root()), &[]).is_ok());
    assert!(check_consistency(5, &t.root(), &cp(5, [1; 32]), &[]).is_err());
}

/// Many origins adding checkpoints at once (group-committed together): every origin's
/// checkpoints are accepted in order, a stale `old_size` is refused (per-origin monotonicity),
/// and after a reopen each origin holds its largest checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_origins_stay_monotonic_per_origin() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::OsRng;
    let logs: Vec<(String, Signer)> = (0..6)
        .map(|i| {
            let origin = format!("example.com/log{i}");
            let s = Signer::generate(&origin, &mut rng).unwrap();
            (origin, s)
        })
        .collect();
    let options = |cosigner: Cosigner| WitnessOptions {
        data_dir: dir.path().to_owned(),
        cosigners: vec![cosigner],
        logs: logs
            .iter()
            .map(|(o, s)| LogConfig::from_verifiers(o, vec![s.verifier()]).unwrap())
            .collect(),
        limits: Limits::default(),
        clock: Arc::new(ManualClock::new(1_000)),
    };
    let cosigner = Cosigner::generate("w", &mut rng).unwrap();
    let w = Arc::new(Witness::open(options(cosigner.clone())).unwrap());
    let tasks: Vec<_> = logs
        .iter()
        .cloned()
        .map(|(origin, log)| {
            let w = w.clone();
            tokio::spawn(async move {
                let mut t = MemoryTree::new();
                let mut held = 0;
                for step in 0..12u8 {
                    for i in 0..3 {
                        t.push(leaf_hash(&[step, i])).unwrap();
                    }
                    let proof = accord_proto::merkle::consistency_proof(&t, held, t.size()).unwrap();
                    let note = Checkpoint::new(&origin, t.size(), t.root()).sign(&log).unwrap();
                    let req = AddCheckpoint {
                        old_size: held,
                        proof: proof.clone(),
                        checkpoint: note.clone(),
                    };
                    let c = w.add_checkpoint(req).await.unwrap();
                    assert_eq!(c.size, t.size());
                    // The same request again: its old size is no longer what the witness holds.
                    let again = w
                        .add_checkpoint(AddCheckpoint {
                            old_size: held,
                            proof,
                            checkpoint: note,
                        })
                        .await;
                    if held != t.size() {
                        assert!(
                            matches!(again, Err(Error::SizeMismatch { held: h, .. }) if h == t.size()),
                            "{again:?}"
                        );
                    }
                    held = t.size();
                }
                (origin, held)
            })
        })
        .collect();
    let mut finals = Vec::new();
    for t in tasks {
        finals.push(t.await.unwrap());
    }
    for (origin, size) in &finals {
        assert_eq!(w.latest(origin).await.unwrap().unwrap().size, *size);
    }
    w.flush().unwrap();
    drop(w);
    let w = Witness::open(options(cosigner)).unwrap();
    for (origin, size) in &finals {
        assert_eq!(w.latest(origin).await.unwrap().unwrap().size, *size);
    }
}

/// A witness for `n` logs `example.com/log{i}`.
fn open_logs(dir: &std::path::Path, n: usize) -> (Arc<Witness>, Vec<(String, Signer)>) {
    let mut rng = rand::rngs::OsRng;
    let logs: Vec<(String, Signer)> = (0..n)
        .map(|i| {
            let origin = format!("example.com/log{i}");
            let s = Signer::generate(&origin, &mut rng).unwrap();
            (origin, s)
        })
        .collect();
    let w = Witness::open(WitnessOptions {
        data_dir: dir.to_owned(),
        cosigners: vec![Cosigner::generate("w", &mut rng).unwrap()],
        logs: logs
            .iter()
            .map(|(o, s)| LogConfig::from_verifiers(o, vec![s.verifier()]).unwrap())
            .collect(),
        limits: Limits::default(),
        clock: Arc::new(ManualClock::new(1_000)),
    })
    .unwrap();
    (Arc::new(w), logs)
}

/// add-checkpoint of a tree of `size` leaves for `origin`, from `old` (with its proof).
fn request_from(origin: &str, log: &Signer, old: u64, size: u8) -> AddCheckpoint {
    let mut t = MemoryTree::new();
    for i in 0..size {
        t.push(leaf_hash(&[i])).unwrap();
    }
    let proof = if old == 0 {
        vec![]
    } else {
        accord_proto::merkle::consistency_proof(&t, old, t.size()).unwrap()
    };
    AddCheckpoint {
        old_size: old,
        proof,
        checkpoint: Checkpoint::new(origin, t.size(), t.root())
            .sign(log)
            .unwrap(),
    }
}

/// `req` with one bit of the log's signature flipped.
fn with_bad_signature(mut req: AddCheckpoint) -> AddCheckpoint {
    let note = Note::parse(req.checkpoint.as_bytes()).unwrap();
    let mut sig = note.signatures()[0].clone();
    sig.signature[7] ^= 1;
    let mut bad = Note::new(note.text()).unwrap();
    bad.add_signature(sig).unwrap();
    req.checkpoint = bad.to_string();
    req
}

/// Requests queued while a verification round runs are verified in one batch; one bad log
/// signature among them gets its own 403, and the others are cosigned and stored.
#[tokio::test(flavor = "current_thread")]
async fn one_bad_signature_in_a_batch_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (w, logs) = open_logs(dir.path(), 4);
    w.signatures.set_running(true);
    let tasks: Vec<_> = logs[..3]
        .iter()
        .enumerate()
        .map(|(i, (origin, log))| {
            let req = request_from(origin, log, 0, 3);
            let req = if i == 1 { with_bad_signature(req) } else { req };
            let w = w.clone();
            tokio::spawn(async move { w.add_checkpoint(req).await })
        })
        .collect();
    until(|| w.signatures.queued() == 3).await;
    // This request leads: it verifies itself, then the three queued ones in one round.
    w.signatures.set_running(false);
    let (origin, log) = &logs[3];
    assert!(
        w.add_checkpoint(request_from(origin, log, 0, 2))
            .await
            .is_ok()
    );
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert!(
        matches!(&results[1], Err(Error::Untrusted { origin, .. }) if origin == "example.com/log1"),
        "{:?}",
        results[1]
    );
    for i in [0, 2] {
        assert_eq!(results[i].as_ref().map(|c| c.size).ok(), Some(3), "{i}");
    }
    let stored: BTreeMap<_, _> = w.store.load_checkpoints().unwrap().into_iter().collect();
    assert_eq!(
        stored.keys().collect::<Vec<_>>(),
        ["example.com/log0", "example.com/log2", "example.com/log3"]
    );
    assert_eq!(w.latest("example.com/log1").await.unwrap(), None);
}

/// Two checkpoints of one origin verified in one round keep their order: the second is checked
/// against the first (its old size is the first's size) and both are cosigned.
#[tokio::test(flavor = "current_thread")]
async fn two_checkpoints_of_one_origin_in_one_batch_keep_order() {
    let dir = tempfile::tempdir().unwrap();
    let (w, logs) = open_logs(dir.path(), 2);
    let (origin, log) = &logs[0];
    w.signatures.set_running(true);
    let first = tokio::spawn({
        let (w, req) = (w.clone(), request_from(origin, log, 0, 3));
        async move { w.add_checkpoint(req).await }
    });
    let second = tokio::spawn({
        let (w, req) = (w.clone(), request_from(origin, log, 3, 5));
        async move { w.add_checkpoint(req).await }
    });
    until(|| w.signatures.queued() == 2).await;
    w.signatures.set_running(false);
    let (o1, l1) = &logs[1];
    w.add_checkpoint(request_from(o1, l1, 0, 1)).await.unwrap();
    assert_eq!(first.await.unwrap().unwrap().size, 3);
    assert_eq!(second.await.unwrap().unwrap().size, 5);
    assert_eq!(w.latest(origin).await.unwrap().unwrap().size, 5);
    let stored: BTreeMap<_, _> = w.store.load_checkpoints().unwrap().into_iter().collect();
    assert_eq!(stored.get(origin.as_str()).map(|l| l.size), Some(5));
}

/// Nothing is answered before the batch's synced write: when it fails, every request of the
/// batch gets an error and nothing is held or stored; the origins are free again afterwards.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_write_fails_every_request_of_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (w, logs) = open_logs(dir.path(), 3);
    let gate = w.committer.gate.lock().await;
    let tasks: Vec<_> = logs
        .iter()
        .map(|(origin, log)| {
            let (w, req) = (w.clone(), request_from(origin, log, 0, 4));
            tokio::spawn(async move { w.add_checkpoint(req).await })
        })
        .collect();
    until(|| w.committer.queued() == 3).await;
    w.store
        .fail_writes
        .store(true, std::sync::atomic::Ordering::SeqCst);
    drop(gate);
    for t in tasks {
        let r = t.await.unwrap();
        assert!(matches!(r, Err(Error::Internal(_))), "{r:?}");
    }
    for (origin, _) in &logs {
        assert_eq!(w.latest(origin).await.unwrap(), None, "{origin}");
    }
    assert!(w.store.load_checkpoints().unwrap().is_empty());
    assert_eq!(
        w.list_logs().unwrap().iter().map(|l| l.size).sum::<u64>(),
        0
    );
    w.store
        .fail_writes
        .store(false, std::sync::atomic::Ordering::SeqCst);
    for (origin, log) in &logs {
        let c = w
            .add_checkpoint(request_from(origin, log, 0, 4))
            .await
            .unwrap();
        assert_eq!(c.size, 4);
    }
}
