//! The writer's pipeline (issue 14): publication never runs ahead of the synced write, duplicates
//! are found across batches not synced yet, and a failed write fails the batch behind it.

use super::*;
use crate::ledger::{Append, Job};
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::pb::work::v1::LedgerEntry;
use std::sync::Mutex;
use std::sync::mpsc as smpsc;

/// What the test machine saw, in order.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// A batch persisted: its records' sequences.
    Persist(Vec<u64>),
    /// A batch published: its records' sequences, and the records durably in the store then.
    Publish(Vec<u64>, u64),
}

/// A machine that accepts everything and records its persist/publish calls against the store.
struct Recording {
    store: Arc<Store>,
    applied: Vec<u64>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Machine for Recording {
    type Input = ();
    type Pending = Vec<u64>;
    fn apply(&mut self, seq: u64, _: &RecordId, _: &(), _: i64) -> super::super::Outcome {
        self.applied.push(seq);
        super::super::Outcome {
            applied: true,
            ..Default::default()
        }
    }
    fn restore(&mut self, _: &LedgerEntry) {}
    fn persist(&mut self, _: &Store, _: &mut Batch) -> Result<Vec<u64>, Error> {
        let batch = std::mem::take(&mut self.applied);
        self.seen.lock().unwrap().push(Seen::Persist(batch.clone()));
        Ok(batch)
    }
    fn publish(&mut self, pending: Vec<u64>) {
        let synced = self.store.record_count().unwrap();
        self.seen
            .lock()
            .unwrap()
            .push(Seen::Publish(pending, synced));
    }
}

/// A writer on a fresh store whose sync thread, before each write, says so on `entered` and
/// waits for a go on `gate` (so a test holds a batch "in flight").
struct Rig {
    _dir: tempfile::TempDir,
    tx: mpsc::Sender<Job<()>>,
    len: watch::Receiver<u64>,
    seen: Arc<Mutex<Vec<Seen>>>,
    entered: smpsc::Receiver<()>,
    gate: smpsc::Sender<()>,
    fail: Arc<AtomicBool>,
    /// Set: the sync thread no longer waits for the gate.
    open: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

type Answer = oneshot::Receiver<Vec<Result<AppendResult, Error>>>;

impl Rig {
    fn new() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), &[]).unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let machine = Recording {
            store: store.clone(),
            applied: Vec::new(),
            seen: seen.clone(),
        };
        let (len_tx, len) = watch::channel(0);
        let (entered_tx, entered) = smpsc::channel();
        let (gate, gate_rx) = smpsc::channel::<()>();
        let gate_rx = Mutex::new(gate_rx);
        let open = Arc::new(AtomicBool::new(false));
        let is_open = open.clone();
        let hook: SyncHook = Arc::new(move || {
            let _ = entered_tx.send(());
            if !is_open.load(Ordering::SeqCst) {
                let _ = gate_rx.lock().unwrap().recv();
            }
        });
        let fail = Arc::new(AtomicBool::new(false));
        let w = Writer::new(
            store,
            machine,
            0,
            1024,
            len_tx,
            crate::clock::Clock::system(),
        )
        .unwrap()
        .faults(fail.clone())
        .before_sync(hook);
        let (tx, rx) = mpsc::channel(16);
        let thread = std::thread::spawn(move || w.run(rx));
        Rig {
            _dir: dir,
            tx,
            len,
            seen,
            entered,
            gate,
            fail,
            open,
            thread,
        }
    }

    /// Sends one request of records with these ids.
    fn send(&self, ids: &[u8]) -> Answer {
        let appends = ids
            .iter()
            .map(|&i| Append {
                id: [i; 32],
                signed: SignedRecord {
                    payload: vec![i; 8].into(),
                    payload_type: "test".into(),
                    signatures: vec![],
                },
                input: (),
                at: None,
            })
            .collect();
        let (reply, rx) = oneshot::channel();
        self.tx
            .blocking_send(Job::Append(appends, reply, Instant::now()))
            .unwrap();
        rx
    }

    /// Waits (deadline 30 s) until the machine has seen `n` calls.
    fn wait_seen(&self, n: usize) -> Vec<Seen> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.seen.lock().unwrap().clone();
            if s.len() >= n {
                return s;
            }
            assert!(Instant::now() < deadline, "machine saw only {s:?}");
            std::thread::yield_now();
        }
    }

    /// Waits until the sync thread is about to write a batch.
    fn wait_entered(&self) {
        self.entered
            .recv_timeout(Duration::from_secs(30))
            .expect("the sync thread never began a write");
    }
}

fn answer(rx: Answer) -> Vec<Result<AppendResult, Error>> {
    rx.blocking_recv().expect("answered")
}

fn ok(r: &Result<AppendResult, Error>) -> (u64, bool) {
    let r = r.as_ref().expect("recorded");
    (r.sequence, r.duplicate)
}

/// A record whose batch is still being written is a duplicate in the next batch (not appended
/// twice), and that duplicate is answered only after the original's batch is synced.
#[test]
fn duplicate_across_in_flight_batches() {
    let rig = Rig::new();
    let first = rig.send(&[1]);
    rig.wait_entered(); // batch 1 (record 1) is being written, not synced
    let mut second = rig.send(&[1, 2]);
    // Batch 2 is prepared on top of batch 1 while batch 1 is still unsynced.
    let seen = rig.wait_seen(2);
    assert_eq!(seen, vec![Seen::Persist(vec![0]), Seen::Persist(vec![1])]);
    assert!(
        second.try_recv().is_err(),
        "answered before its batch was synced"
    );
    assert_eq!(*rig.len.borrow(), 0);
    rig.gate.send(()).unwrap();
    assert_eq!(
        answer(first).iter().map(ok).collect::<Vec<_>>(),
        [(0, false)]
    );
    rig.wait_entered();
    rig.gate.send(()).unwrap();
    // Record 1 again: the duplicate of sequence 0; record 2: appended once, at 1.
    assert_eq!(
        answer(second).iter().map(ok).collect::<Vec<_>>(),
        [(0, true), (1, false)]
    );
    assert_eq!(*rig.len.borrow(), 2);
    drop(rig.tx);
    rig.thread.join().unwrap();
}

/// Each batch is published after its own synced write returned (the store holds its records),
/// in order, and never a batch prepared behind it; the length watch follows the synced writes.
#[test]
fn publish_never_runs_ahead_of_sync() {
    let rig = Rig::new();
    let a = rig.send(&[1, 2]);
    rig.wait_entered();
    let b = rig.send(&[3]);
    rig.wait_seen(2);
    // Batch 2 is persisted (its state exists in the machine) but nothing is published yet.
    assert!(
        !rig.seen
            .lock()
            .unwrap()
            .iter()
            .any(|s| matches!(s, Seen::Publish(..)))
    );
    rig.gate.send(()).unwrap();
    answer(a);
    assert_eq!(*rig.len.borrow(), 2);
    rig.wait_entered();
    rig.gate.send(()).unwrap();
    answer(b);
    assert_eq!(*rig.len.borrow(), 3);
    // Then a run without the gate's pauses: many batches, back to back.
    rig.open.store(true, Ordering::SeqCst);
    let answers: Vec<_> = (10..60).map(|i| rig.send(&[i, i + 100])).collect();
    for a in answers {
        assert!(answer(a).iter().all(|r| r.is_ok()));
    }
    let seen = rig.seen.lock().unwrap().clone();
    let mut published = 0;
    let mut persisted = 0;
    for s in &seen {
        match s {
            Seen::Persist(seqs) => {
                persisted += 1;
                // At most one batch is persisted beyond the one being written.
                assert!(persisted <= published + 2, "{seen:?}");
                assert!(!seqs.is_empty());
            }
            Seen::Publish(seqs, synced) => {
                published += 1;
                // Every record of the published batch is synced; batches publish in order.
                assert!(seqs.iter().all(|s| s < synced), "{seen:?}");
                assert_eq!(Some(seqs), persisted_nth(&seen, published), "{seen:?}");
            }
        }
    }
    assert_eq!(published, persisted);
    drop(rig.tx);
    rig.thread.join().unwrap();
}

fn persisted_nth(seen: &[Seen], n: usize) -> Option<&Vec<u64>> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Persist(v) => Some(v),
            _ => None,
        })
        .nth(n - 1)
}

/// When a batch's synced write fails, the batch prepared behind it fails too (it was decided
/// on top of the failed one), nothing is published, and the ledger stops.
#[test]
fn failed_write_fails_the_batch_behind_it() {
    let rig = Rig::new();
    let first = rig.send(&[1]);
    rig.wait_entered();
    let second = rig.send(&[2]);
    rig.wait_seen(2);
    rig.fail.store(true, Ordering::SeqCst);
    rig.gate.send(()).unwrap();
    for a in [answer(first), answer(second)] {
        assert!(matches!(a[..], [Err(Error::LedgerStopped)]), "{a:?}");
    }
    rig.thread.join().unwrap();
    assert_eq!(*rig.len.borrow(), 0);
    assert!(
        !rig.seen
            .lock()
            .unwrap()
            .iter()
            .any(|s| matches!(s, Seen::Publish(..)))
    );
    // The writer is gone: a later append is not taken.
    let (reply, _rx) = oneshot::channel();
    assert!(
        rig.tx
            .blocking_send(Job::Append(Vec::new(), reply, Instant::now()))
            .is_err()
    );
}
