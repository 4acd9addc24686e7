//! The atomic step of add-checkpoint, run for a batch of requests at a time (issue 32).
//!
//! Each request holds its origin's lock when it is queued here, so a batch has at most one
//! checkpoint per origin and an origin's next checkpoint waits for the batch that holds the
//! previous one (per-origin order). The first request to queue while no batch task waits to
//! start starts one blocking task; that task takes everything queued, checks each request
//! against the checkpoint its origin holds, cosigns, stores the accepted checkpoints in ONE
//! synced RocksDB write, and only then updates the held checkpoints and answers
//! (c2sp.org/tlog-witness, "add-checkpoint": the check and the persisted new checkpoint are
//! atomic, and the witness "MUST persist the new checkpoint before responding"); if the write
//! fails, every request of the batch gets the error and nothing it cosigned is held or sent. One
//! hop to a blocking thread per batch instead of one per request; requests queued after the take
//! form the next batch, which works while this one writes (two batches never share an origin,
//! so their writes may be grouped by [`Store::commit_checkpoints`]). The step runs to the end
//! even if its caller went away.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use accord_proto::checkpoint::{Checkpoint, Cosigner};
use accord_proto::merkle::EMPTY_ROOT;
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, oneshot};
use tracing::debug;

use super::{Cosigned, Slot, check_consistency};
use crate::clock::Clock;
use crate::error::Error;
use crate::request::AddCheckpoint;
use crate::store::{Latest, Store};

/// One request's step, queued with its origin's lock.
pub(super) struct Job {
    pub(super) held: OwnedMutexGuard<Option<Latest>>,
    pub(super) req: AddCheckpoint,
    pub(super) cp: Checkpoint,
    /// The checkpoint note's text (what the cosignature signs).
    pub(super) body: String,
    pub(super) slot: Arc<Slot>,
    /// Released only when the step is done, even if the caller went away.
    pub(super) permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
    pub(super) reply: oneshot::Sender<Result<Cosigned, Error>>,
}

#[derive(Default)]
struct State {
    /// A batch task is started and has not yet taken the queue.
    running: bool,
    queue: Vec<Job>,
}

/// The batch committer (one per witness).
pub(crate) struct Committer {
    store: Arc<Store>,
    cosigners: Arc<Vec<Cosigner>>,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    /// Held by a test to let requests gather before a batch is taken.
    #[cfg(test)]
    pub(crate) gate: tokio::sync::Mutex<()>,
}

impl Committer {
    pub(crate) fn new(
        store: Arc<Store>,
        cosigners: Arc<Vec<Cosigner>>,
        clock: Arc<dyn Clock>,
    ) -> Committer {
        Committer {
            store,
            cosigners,
            clock,
            state: Mutex::new(State::default()),
            #[cfg(test)]
            gate: tokio::sync::Mutex::new(()),
        }
    }

    /// Queues `job`; starts a batch task if none runs. Must be called within a Tokio runtime.
    pub(super) fn submit(self: &Arc<Self>, job: Job) {
        let start = {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            st.queue.push(job);
            !std::mem::replace(&mut st.running, true)
        };
        if start {
            let this = self.clone();
            tokio::task::spawn_blocking(move || this.run());
        }
    }

    /// Requests queued and not yet taken into a batch (for tests).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.state.lock().map_or(0, |s| s.queue.len())
    }

    /// Takes everything queued as one batch and commits it. The next job queued after the take
    /// starts the next batch, whose checks and cosignatures overlap this batch's write; the
    /// store's group commit orders the writes (and merges those that wait together).
    fn run(&self) {
        #[cfg(test)]
        let _gate = self.gate.blocking_lock();
        let batch = {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            st.running = false;
            std::mem::take(&mut st.queue)
        };
        if !batch.is_empty() {
            self.commit(batch);
        }
    }

    /// Checks and cosigns each job, writes the accepted ones in one synced write, then answers.
    fn commit(&self, batch: Vec<Job>) {
        let requests = batch.len();
        let timestamp = self.clock.now();
        let mut staged = Vec::with_capacity(batch.len());
        for job in batch {
            match self.stage(&job, timestamp) {
                Ok(latest) => staged.push((job, latest)),
                Err(e) => job.answer(Err(e)),
            }
        }
        if staged.is_empty() {
            return;
        }
        let writes: Vec<(&str, &Latest)> = staged
            .iter()
            .map(|(job, latest)| (job.cp.origin.as_str(), latest))
            .collect();
        let written = self.store.commit_checkpoints(&writes);
        debug!(
            requests,
            stored = staged.len(),
            ok = written.is_ok(),
            "batch committed"
        );
        match written {
            Ok(()) => {
                for (mut job, latest) in staged {
                    job.slot.size.store(latest.size, Ordering::SeqCst);
                    let cosigned = Cosigned {
                        origin: std::mem::take(&mut job.cp.origin),
                        size: latest.size,
                        root: latest.root,
                        timestamp: latest.timestamp,
                        cosignatures: latest.cosignature.clone(),
                    };
                    *job.held = Some(latest);
                    job.answer(Ok(cosigned));
                }
            }
            Err(e) => {
                let e = e.to_string();
                for (job, _) in staged {
                    job.answer(Err(Error::Internal(format!("storing the checkpoint: {e}"))));
                }
            }
        }
    }

    /// The c2sp.org/tlog-witness checks against the held checkpoint (409, then 422), and the
    /// cosigned checkpoint to store.
    fn stage(&self, job: &Job, timestamp: u64) -> Result<Latest, Error> {
        let (held_size, held_root) = job
            .held
            .as_ref()
            .map_or((0, EMPTY_ROOT), |l| (l.size, l.root));
        if job.req.old_size != held_size {
            return Err(Error::SizeMismatch {
                old_size: job.req.old_size,
                held: held_size,
            });
        }
        check_consistency(held_size, &held_root, &job.cp, &job.req.proof)?;
        let mut cosignature = String::new();
        for c in self.cosigners.iter() {
            let line = c
                .cosign(&job.body, timestamp)
                .map_err(|e| Error::Internal(format!("cosigning failed: {e}")))?;
            cosignature.push_str(&line.to_line());
        }
        Ok(Latest {
            size: job.cp.size,
            root: job.cp.root,
            body: job.body.clone(),
            note: job.req.checkpoint.clone(),
            cosignature,
            timestamp,
        })
    }
}

impl Job {
    /// Releases the permits, then the origin's lock (the held checkpoint already updated on
    /// success), and sends the answer.
    fn answer(self, result: Result<Cosigned, Error>) {
        let Job {
            held,
            permits,
            reply,
            ..
        } = self;
        drop(permits);
        drop(held);
        let _ = reply.send(result);
    }
}
