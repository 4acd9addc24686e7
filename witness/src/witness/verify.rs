//! Batch verification of the log signatures of concurrent add-checkpoint requests (issue 32).
//!
//! A request that finds no verification running verifies, inline on its own task, its note and
//! every note queued meanwhile by requests on other threads, with one
//! `ed25519_dalek::verify_batch` per round, until the queue is empty; requests that find one
//! running queue their note and wait for its verdict. A round whose batch fails checks its notes
//! one by one, so a bad signature gets its own 403 and the others still pass. Verdicts are those
//! of [`Note::verify`] (c2sp.org/signed-note: signatures by unknown keys are ignored, a trusted
//! key's failing signature rejects the note, at least one trusted key must have signed); a note
//! that needs anything but Ed25519 checks (another key kind, an ambiguous key, no trusted
//! signature) is verified alone by [`Note::verify`], which also words the error.
//!
//! Verification stays ahead of the per-origin queue, so only checkpoints the log signed count
//! against it (see [`super::Limits`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use accord_proto::note::{KeyKind, Note, Verifier};
use tokio::sync::oneshot;
use tracing::debug;

use crate::logs::LogConfig;

/// A note to verify against its log's keys.
pub(crate) struct Check {
    pub(crate) note: Arc<Note>,
    pub(crate) log: Arc<LogConfig>,
}

type Verdict = Result<(), accord_proto::Error>;

struct Waiting {
    check: Check,
    reply: oneshot::Sender<Verdict>,
}

#[derive(Default)]
struct State {
    /// A request is verifying rounds.
    running: bool,
    queue: Vec<Waiting>,
}

/// The verification queue (one per witness).
#[derive(Default)]
pub(crate) struct SignatureQueue {
    state: Mutex<State>,
}

impl SignatureQueue {
    /// Verifies `check`, together with whatever other requests queue meanwhile.
    pub(crate) async fn verify(&self, check: Check) -> Verdict {
        let wait = {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if st.running {
                let (reply, rx) = oneshot::channel();
                st.queue.push(Waiting { check, reply });
                Err(rx)
            } else {
                st.running = true;
                Ok(check)
            }
        };
        let check = match wait {
            Ok(check) => check,
            Err(rx) => {
                return rx.await.unwrap_or(Err(accord_proto::Error::UnverifiedNote));
            }
        };
        // This request verifies rounds until nobody is waiting. No await below: a dropped
        // caller cannot leave the others without a verdict.
        let mine = verify_all(std::slice::from_ref(&check)).remove(0);
        loop {
            let round = {
                let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if st.queue.is_empty() {
                    st.running = false;
                    break;
                }
                std::mem::take(&mut st.queue)
            };
            let (checks, replies): (Vec<_>, Vec<_>) =
                round.into_iter().map(|w| (w.check, w.reply)).unzip();
            for (reply, verdict) in replies.into_iter().zip(verify_all(&checks)) {
                let _ = reply.send(verdict);
            }
        }
        mine
    }
}

#[cfg(test)]
impl SignatureQueue {
    /// Marks a round as running (or not), so that requests queue (tests).
    pub(crate) fn set_running(&self, running: bool) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .running = running;
    }

    /// Requests waiting for a round (tests).
    pub(crate) fn queued(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .queue
            .len()
    }
}

/// Verdicts for `checks`: one `verify_batch` over the Ed25519 signatures of all the batchable
/// notes; if it fails (or for a note that is not batchable), [`Note::verify`] one by one.
pub(crate) fn verify_all(checks: &[Check]) -> Vec<Verdict> {
    let plans: Vec<Option<Plan>> = checks.iter().map(plan).collect();
    let mut items: Vec<(&Verifier, &[u8], &[u8])> = Vec::new();
    for (c, p) in checks.iter().zip(&plans) {
        for (v, sig) in p.iter().flatten() {
            items.push((v, c.note.text().as_bytes(), sig));
        }
    }
    // A lone signature is checked alone: `verify_batch` costs more than `verify` for one.
    let batch_ok = items.len() > 1 && accord_proto::signing::verify_batch(&items).is_ok();
    debug!(
        notes = checks.len(),
        signatures = items.len(),
        batch_ok,
        "log signatures verified"
    );
    checks
        .iter()
        .zip(&plans)
        .map(|(c, p)| match p {
            Some(_) if batch_ok => Ok(()),
            _ => c.note.verify(c.log.verifiers()).map(|_| ()),
        })
        .collect()
}

/// A note's signatures to check: (trusted key, signature bytes).
type Plan<'a> = Vec<(&'a Verifier, &'a [u8])>;

/// The signatures [`Note::verify`] would check for `c`, when all are Ed25519 (type 0x01) and
/// at least one is by a trusted key; `None` when the note must take the one-by-one path.
fn plan(c: &Check) -> Option<Plan<'_>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for sig in c.note.signatures() {
        let mut matching = c
            .log
            .verifiers()
            .iter()
            .filter(|v| v.name() == sig.name && v.key_id() == sig.key_id);
        let Some(v) = matching.next() else {
            continue;
        };
        if matching.next().is_some() || v.kind() != KeyKind::Ed25519 {
            return None;
        }
        if seen.insert((sig.key_id, sig.name.as_str())) {
            out.push((v, sig.signature.as_slice()));
        }
    }
    (!out.is_empty()).then_some(out)
}
