//! Cross-request batch verification (issue 14): the signatures of every `Submit` and
//! `SubmitBatch` call that is waiting go into one pending set, and a small pool of verifier
//! threads (one per core) each drains what is pending and checks it with one Ed25519
//! `verify_batch`. Only when a drained set fails is it checked request by request, and a failing
//! request record by record, so one bad signature never fails anyone else and each error names its
//! own signature. No request spawns a blocking task of its own, and no signature is checked on an
//! async worker.

use crate::error::Error;
use crate::metrics::{AppendStage, Metrics};
use accord_proto::note::Verifier;
use accord_proto::pb::record::v1::Signature;
use accord_proto::signing;
use prost::bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;
use tokio::sync::oneshot;

/// One record's matched signatures, owned so that a verifier thread can take them.
#[derive(Debug)]
pub struct Check {
    /// Per matched signature: its key and its index in `signatures`.
    pub(super) keys: Vec<(Verifier, usize)>,
    /// The record's payload type (a typed Declaration's or the generic one).
    pub(super) payload_type: String,
    /// PAE(payload_type, payload): the signed message.
    pub(super) message: Vec<u8>,
    /// The payload as received (for the one-by-one path, which names the failing signature).
    pub(super) payload: Bytes,
    /// The record's signatures as received.
    pub(super) signatures: Vec<Signature>,
}

impl Check {
    /// Every matched signature, one by one; the error names the first that fails.
    pub fn verify_one(&self) -> Result<(), Error> {
        for (k, i) in &self.keys {
            signing::verify(k, &self.payload_type, &self.payload, &self.signatures[*i])
                .map_err(|e| Error::BadSignature(format!("record.signatures[{i}]: {e}")))?;
        }
        Ok(())
    }

    fn items<'a>(&'a self, out: &mut Vec<(&'a Verifier, &'a [u8], &'a [u8])>) {
        for (k, i) in &self.keys {
            out.push((k, &self.message, &self.signatures[*i].signature));
        }
    }

    fn signature_count(&self) -> usize {
        self.keys.len()
    }
}

/// Verdicts for `checks`: one `verify_batch` over all of them; if it fails, one by one.
pub fn verify_checks(checks: &[Check]) -> Vec<Result<(), Error>> {
    let mut items = Vec::new();
    for c in checks {
        c.items(&mut items);
    }
    if signing::verify_batch(&items).is_ok() {
        return checks.iter().map(|_| Ok(())).collect();
    }
    checks.iter().map(Check::verify_one).collect()
}

struct Job {
    checks: Vec<Check>,
    /// When the request joined the pending set (for `accord_append_stage_seconds`).
    queued: Instant,
    reply: oneshot::Sender<Vec<Result<(), Error>>>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// A verifier thread takes jobs until it holds at least this many signatures.
    max_signatures: usize,
    /// Stage timings, once the node's metrics are attached ([`BatchVerifier::observe`]).
    metrics: OnceLock<Metrics>,
}

/// The pending set and its verifier threads; the threads end when this is dropped.
pub struct BatchVerifier {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BatchVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchVerifier").finish_non_exhaustive()
    }
}

impl BatchVerifier {
    /// Starts `threads` verifier threads (at least one), each verifying up to about
    /// `max_signatures` signatures at a time.
    pub fn start(threads: usize, max_signatures: usize) -> Result<BatchVerifier, Error> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            max_signatures: max_signatures.max(1),
            metrics: OnceLock::new(),
        });
        for i in 0..threads.max(1) {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("verify-{i}"))
                .spawn(move || run(&s))
                .map_err(|e| Error::Internal(format!("spawn verifier thread: {e}")))?;
        }
        Ok(BatchVerifier { shared })
    }

    /// One verifier thread per core.
    pub fn per_core(max_signatures: usize) -> Result<BatchVerifier, Error> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::start(cores, max_signatures)
    }

    /// Reports the verify_queue and verify stages to `metrics` from now on.
    pub fn observe(&self, metrics: Metrics) {
        let _ = self.shared.metrics.set(metrics);
    }

    /// Verdicts for `checks`, in order, once a verifier thread checked them (together with
    /// whatever else was pending).
    pub async fn verify(&self, checks: Vec<Check>) -> Vec<Result<(), Error>> {
        if checks.is_empty() {
            return Vec::new();
        }
        let n = checks.len();
        let (reply, rx) = oneshot::channel();
        {
            let Ok(mut q) = self.shared.queue.lock() else {
                return internal(n);
            };
            q.jobs.push_back(Job {
                checks,
                queued: Instant::now(),
                reply,
            });
        }
        self.shared.ready.notify_one();
        rx.await.unwrap_or_else(|_| internal(n))
    }
}

impl Drop for BatchVerifier {
    fn drop(&mut self) {
        if let Ok(mut q) = self.shared.queue.lock() {
            q.closed = true;
        }
        self.shared.ready.notify_all();
    }
}

fn internal(n: usize) -> Vec<Result<(), Error>> {
    (0..n)
        .map(|_| Err(Error::Internal("signature verifier stopped".into())))
        .collect()
}

fn run(shared: &Shared) {
    loop {
        let jobs = {
            let Ok(mut q) = shared.queue.lock() else {
                return;
            };
            while q.jobs.is_empty() && !q.closed {
                q = match shared.ready.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
            if q.jobs.is_empty() {
                return;
            }
            let mut jobs = Vec::new();
            let mut signatures = 0;
            while signatures < shared.max_signatures {
                let Some(j) = q.jobs.pop_front() else { break };
                signatures += j.checks.iter().map(Check::signature_count).sum::<usize>();
                jobs.push(j);
            }
            // Others may be waiting for work that this thread left in the queue.
            if !q.jobs.is_empty() {
                shared.ready.notify_one();
            }
            jobs
        };
        verify_jobs(jobs, shared.metrics.get());
    }
}

/// All drained jobs in one batch; on failure each job alone (then record by record).
fn verify_jobs(jobs: Vec<Job>, metrics: Option<&Metrics>) {
    let started = Instant::now();
    if let Some(m) = metrics {
        for j in &jobs {
            m.append_stage(AppendStage::VerifyQueue, started - j.queued);
        }
    }
    let mut items = Vec::new();
    for j in &jobs {
        for c in &j.checks {
            c.items(&mut items);
        }
    }
    let all_good = signing::verify_batch(&items).is_ok();
    drop(items);
    if let Some(m) = metrics {
        m.append_stage(AppendStage::Verify, started.elapsed());
    }
    for j in jobs {
        let verdicts = if all_good {
            j.checks.iter().map(|_| Ok(())).collect()
        } else if j.checks.len() == 1 {
            vec![j.checks[0].verify_one()]
        } else {
            verify_checks(&j.checks)
        };
        let _ = j.reply.send(verdicts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accord_proto::note::Signer;
    use accord_proto::signing::RECORD_PAYLOAD_TYPE;
    use ed25519_dalek::SigningKey;

    fn check(signer: &Signer, payload: &[u8], tamper: bool) -> Check {
        let mut sig = signing::sign(signer, RECORD_PAYLOAD_TYPE, payload);
        if tamper {
            let mut b = sig.signature.to_vec();
            b[0] ^= 1;
            sig.signature = b.into();
        }
        Check {
            keys: vec![(signer.verifier(), 0)],
            payload_type: RECORD_PAYLOAD_TYPE.into(),
            message: signing::pae(RECORD_PAYLOAD_TYPE, payload),
            payload: Bytes::copy_from_slice(payload),
            signatures: vec![sig],
        }
    }

    /// Concurrent requests share the verifier; a bad signature fails only its own record, and
    /// its error names the signature.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_get_their_own_verdicts() {
        let signer =
            Signer::from_signing_key("a.example/p", SigningKey::from_bytes(&[7; 32])).unwrap();
        let v = Arc::new(BatchVerifier::start(2, 16).unwrap());
        let mut calls = Vec::new();
        for r in 0..40u32 {
            let v = v.clone();
            let signer = signer.clone();
            calls.push(tokio::spawn(async move {
                // Request r has r % 4 + 1 records; in every fifth request record 0 is bad.
                let checks = (0..r % 4 + 1)
                    .map(|i| check(&signer, &[r as u8, i as u8], r % 5 == 0 && i == 0))
                    .collect();
                (r, v.verify(checks).await)
            }));
        }
        for c in calls {
            let (r, verdicts) = c.await.unwrap();
            assert_eq!(verdicts.len(), (r % 4 + 1) as usize);
            for (i, v) in verdicts.iter().enumerate() {
                if r % 5 == 0 && i == 0 {
                    let e = v.as_ref().unwrap_err().to_string();
                    assert!(e.contains("record.signatures[0]"), "{e}");
                } else {
                    assert!(v.is_ok(), "request {r} record {i}: {v:?}");
                }
            }
        }
    }

    #[tokio::test]
    async fn verifier_stops_when_dropped() {
        let v = BatchVerifier::start(1, 4).unwrap();
        let shared = Arc::downgrade(&v.shared);
        drop(v);
        // The thread lets go of the shared state once it sees the queue closed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.upgrade().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "verifier thread still running"
            );
            tokio::task::yield_now().await;
            std::thread::yield_now();
        }
    }
}
