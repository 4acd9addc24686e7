//! The group commit of add-checkpoint (issue 32 item 3).
//!
//! Each request checks its checkpoint and cosigns it on its own task, holding its origin's lock
//! ([`crate::witness`]); only the synced write is left, and that is done here for every origin
//! waiting at once. The first request to find no write under way hands the queue to one blocking
//! task, which writes everything queued in one synced `WriteBatch`, answers those requests, and
//! goes on with whatever queued meanwhile until the queue is empty. So the blocking pool is
//! entered once per busy period rather than once per request, nobody waits on a condition
//! variable, and the cosigning of the next requests overlaps the current write.
//!
//! Each queued checkpoint carries its origin's lock guard: the held checkpoint changes, and the
//! lock is released, only after the write that holds it returned (c2sp.org/tlog-witness: "The
//! witness MUST persist the new checkpoint before responding"; the check and the store are one
//! step per origin), and that happens even if the caller went away. One write never holds two
//! checkpoints of one origin, since the second waits for the first's lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus::IntCounter;
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, oneshot};

use crate::error::Error;
use crate::store::{Latest, Store};

/// A checkpoint checked and cosigned, waiting for its synced write.
pub(crate) struct Pending {
    pub(crate) origin: String,
    pub(crate) latest: Latest,
    /// The origin's lock: the held checkpoint becomes `latest` once written.
    pub(crate) held: OwnedMutexGuard<Option<Latest>>,
    /// Mirrors the held size for lock-free listing.
    pub(crate) size: Arc<AtomicU64>,
    /// Released only when the write is done, even if the caller went away.
    pub(crate) permits: Vec<OwnedSemaphorePermit>,
}

struct Queued {
    pending: Pending,
    answer: oneshot::Sender<Result<(), Error>>,
}

#[derive(Default)]
struct State {
    queue: Vec<Queued>,
    /// A blocking task is draining the queue.
    writing: bool,
}

/// The queue of checkpoints waiting to be written, and its writer.
pub(crate) struct Committer {
    store: Arc<Store>,
    state: Mutex<State>,
    /// Synced writes made (fewer than checkpoints when grouped):
    /// `accord_witness_checkpoint_writes_total`.
    writes: IntCounter,
}

impl Committer {
    pub(crate) fn new(store: Arc<Store>, writes: IntCounter) -> Committer {
        Committer {
            store,
            state: Mutex::new(State::default()),
            writes,
        }
    }

    /// The queue. Every section under this lock only pushes, takes or sets a flag, so a panic
    /// elsewhere cannot leave it half-changed: a poisoned lock is used as it is.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `pending` for the next synced write and waits for it. Must run inside a Tokio
    /// runtime (it may start the blocking writer).
    pub(crate) async fn commit(self: &Arc<Self>, pending: Pending) -> Result<(), Error> {
        let (answer, written) = oneshot::channel();
        let start = {
            let mut st = self.state();
            st.queue.push(Queued { pending, answer });
            !std::mem::replace(&mut st.writing, true)
        };
        if start {
            let writer = Writer {
                committer: self.clone(),
                finished: false,
            };
            // The handle is not awaited: the writer answers through each request's channel.
            drop(tokio::task::spawn_blocking(move || writer.drain()));
        }
        written
            .await
            .map_err(|_| Error::Internal("the witness stopped before the write".to_owned()))?
    }

    /// Synced checkpoint writes made so far.
    #[cfg(test)]
    pub(crate) fn writes(&self) -> u64 {
        self.writes.get()
    }
}

/// The blocking task that drains the queue (one per busy period).
struct Writer {
    committer: Arc<Committer>,
    /// Set when it stopped on an empty queue, handing `writing` back.
    finished: bool,
}

impl Drop for Writer {
    /// A writer that ends any other way — a panic, or a runtime shutting down before the task
    /// ran — drops what is queued (each waiting request is answered with an error, its origin's
    /// lock released with the held checkpoint unchanged) and lets the next request start a
    /// writer, so nobody waits for a write that will not come.
    fn drop(&mut self) {
        if !self.finished {
            let mut st = self.committer.state();
            st.queue.clear();
            st.writing = false;
        }
    }
}

impl Writer {
    /// Writes the queue until it is empty, one synced write per round.
    fn drain(mut self) {
        let c = self.committer.clone();
        loop {
            let round = {
                let mut st = c.state();
                if st.queue.is_empty() {
                    st.writing = false;
                    self.finished = true;
                    return;
                }
                std::mem::take(&mut st.queue)
            };
            let items: Vec<(&str, Vec<u8>)> = round
                .iter()
                .map(|q| (q.pending.origin.as_str(), q.pending.latest.encode()))
                .collect();
            let written = c.store.write_checkpoints(&items).map_err(|e| e.to_string());
            drop(items);
            c.writes.inc();
            for Queued { pending, answer } in round {
                let Pending {
                    latest,
                    mut held,
                    size,
                    permits,
                    ..
                } = pending;
                let result = match &written {
                    Ok(()) => {
                        size.store(latest.size, Ordering::SeqCst);
                        *held = Some(latest);
                        Ok(())
                    }
                    Err(e) => Err(Error::Internal(format!("storing the checkpoint: {e}"))),
                };
                drop(held);
                drop(permits);
                // The caller may have gone away; the checkpoint is stored all the same.
                let _ = answer.send(result);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::sync::Mutex as AsyncMutex;

    use super::*;

    fn latest(size: u64) -> Latest {
        Latest {
            size,
            root: [size as u8; 32],
            body: format!("b{size}\n"),
            note: "n\n".into(),
            cosignature: "c\n".into(),
            timestamp: size,
        }
    }

    struct Origin {
        name: String,
        held: Arc<AsyncMutex<Option<Latest>>>,
        size: Arc<AtomicU64>,
    }

    fn origin(name: &str) -> Origin {
        Origin {
            name: name.to_owned(),
            held: Arc::new(AsyncMutex::new(None)),
            size: Arc::new(AtomicU64::new(0)),
        }
    }

    async fn pending(o: &Origin, size: u64) -> Pending {
        Pending {
            origin: o.name.clone(),
            latest: latest(size),
            held: o.held.clone().lock_owned().await,
            size: o.size.clone(),
            permits: Vec::new(),
        }
    }

    fn committer() -> (tempfile::TempDir, Arc<Committer>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let writes = IntCounter::new("writes", "synced writes").unwrap();
        (dir, Arc::new(Committer::new(store, writes)))
    }

    /// Plays a writer whose write is under way, so that commits queue.
    fn hold_writer(c: &Committer) {
        c.state().writing = true;
    }

    /// Runs the writer that [`hold_writer`] stood in for.
    async fn drain(c: &Arc<Committer>) {
        let writer = Writer {
            committer: c.clone(),
            finished: false,
        };
        tokio::task::spawn_blocking(move || writer.drain())
            .await
            .unwrap();
    }

    async fn wait_queued(c: &Committer, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.state().queue.len() < n {
            assert!(Instant::now() < deadline, "commits never queued");
            tokio::task::yield_now().await;
        }
    }

    /// Many origins committing at once: every checkpoint is stored and held, each caller hears
    /// of its own write, and the writes are grouped (never more synced writes than checkpoints).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_commits_of_many_origins_are_all_stored_and_held() {
        let (_dir, c) = committer();
        let origins: Vec<Arc<Origin>> = (0..8)
            .map(|i| Arc::new(origin(&format!("origin-{i}"))))
            .collect();
        let tasks: Vec<_> = origins
            .iter()
            .map(|o| {
                let (c, o) = (c.clone(), o.clone());
                // One task per origin: each origin's commits in order, as its lock keeps them.
                tokio::spawn(async move {
                    for size in 1..=25 {
                        let p = pending(&o, size).await;
                        c.commit(p).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let mut stored = c.store.load_checkpoints().unwrap();
        stored.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(stored.len(), 8);
        for (i, (name, l)) in stored.into_iter().enumerate() {
            assert_eq!(name, format!("origin-{i}"));
            assert_eq!(l, latest(25));
            assert_eq!(*origins[i].held.lock().await, Some(latest(25)));
            assert_eq!(origins[i].size.load(Ordering::SeqCst), 25);
        }
        assert!(
            c.writes() <= 200,
            "{} writes for 200 checkpoints",
            c.writes()
        );
    }

    /// Checkpoints queued while a write is under way go out together in the next single write.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_queued_during_a_write_share_the_next_one() {
        let (_dir, c) = committer();
        hold_writer(&c);
        let mut tasks = Vec::new();
        for i in 0..3 {
            let o = origin(&format!("o{i}"));
            let p = pending(&o, 1).await;
            let c = c.clone();
            tasks.push(tokio::spawn(async move { c.commit(p).await }));
        }
        wait_queued(&c, 3).await;
        drain(&c).await;
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(c.writes(), 1, "three origins, one synced write");
        assert_eq!(c.store.load_checkpoints().unwrap().len(), 3);
        assert!(
            !c.state().writing,
            "the writer stops when the queue is empty"
        );
    }

    /// A caller that goes away after its checkpoint was queued: the checkpoint is still written,
    /// then held, and the origin's lock is released (the step is atomic per origin).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_checkpoint_queued_by_a_caller_that_left_is_written_and_held() {
        let (_dir, c) = committer();
        hold_writer(&c);
        let o = origin("gone");
        let p = pending(&o, 7).await;
        let task = {
            let c = c.clone();
            tokio::spawn(async move { c.commit(p).await })
        };
        wait_queued(&c, 1).await;
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        assert!(
            o.held.try_lock().is_err(),
            "the queued checkpoint keeps its origin's lock"
        );
        drain(&c).await;
        assert_eq!(*o.held.try_lock().unwrap(), Some(latest(7)));
        assert_eq!(o.size.load(Ordering::SeqCst), 7);
        assert_eq!(
            c.store.load_checkpoints().unwrap(),
            vec![("gone".to_owned(), latest(7))]
        );
    }

    /// A writer that ends without emptying the queue (here: dropped before it ran, as when the
    /// runtime shuts down): the queued request is answered with an error, its origin's lock is
    /// released with nothing held, and the next request starts a writer of its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_that_never_ran_fails_its_queue_and_the_next_request_writes() {
        let (_dir, c) = committer();
        hold_writer(&c);
        let o = origin("o");
        let p = pending(&o, 1).await;
        let task = {
            let c = c.clone();
            tokio::spawn(async move { c.commit(p).await })
        };
        wait_queued(&c, 1).await;
        drop(Writer {
            committer: c.clone(),
            finished: false,
        });
        let answer = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the queued request was never answered")
            .unwrap();
        assert!(
            matches!(answer, Err(Error::Internal(ref m)) if m.contains("stopped before the write")),
            "{answer:?}"
        );
        assert_eq!(*o.held.try_lock().unwrap(), None);
        assert!(c.store.load_checkpoints().unwrap().is_empty());
        let p = pending(&o, 1).await;
        tokio::time::timeout(Duration::from_secs(30), c.commit(p))
            .await
            .expect("the next request found the writer still marked busy")
            .unwrap();
        assert_eq!(*o.held.try_lock().unwrap(), Some(latest(1)));
        assert_eq!(c.writes(), 1);
    }
}
