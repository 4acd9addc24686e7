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
