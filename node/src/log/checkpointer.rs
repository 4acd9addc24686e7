//! The checkpointer: at a configurable interval, when the tree has grown, signs a C2SP
//! tlog-checkpoint with the node's log key (key name = origin), stores it, and takes it to the
//! witnesses; once K of them co-sign, the cosigned checkpoint is stored as the witnessed one.

use super::{LogContext, StoredCheckpoint, WitnessClient};
use crate::error::Error;
use accord_proto::checkpoint::Checkpoint;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs until `shutdown`. A round starts as soon as the ledger grows (issue 14: recorded →
/// witnessed is not held back by a fixed timer), at most every `min_checkpoint_interval_ms`, and
/// at least every `checkpoint_interval_ms` so that witnesses that failed are retried.
pub async fn run_checkpointer(
    node: LogContext,
    witnesses: Arc<WitnessClient>,
    shutdown: CancellationToken,
) {
    let idle = Duration::from_millis(node.config.checkpoint_interval_ms);
    let min = Duration::from_millis(node.config.min_checkpoint_interval_ms).min(idle);
    let mut len = node.ledger.watch_len();
    loop {
        let started = tokio::time::Instant::now();
        if let Err(e) = step(&node, &witnesses).await {
            tracing::warn!(error = %e, "checkpoint step failed");
        }
        // Rate limit: never two rounds closer than `min`.
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(started + min) => {}
        }
        let behind = || {
            let size = node.ledger.len();
            node.log.latest().is_none_or(|c| c.size < size)
        };
        if behind() {
            continue;
        }
        // Wait for growth, or the idle interval (a retry of witnesses that did not co-sign).
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(idle.saturating_sub(min)) => {}
            r = len.changed() => if r.is_err() { return },
        }
    }
}

/// Serializes signing, so that "latest checkpoint" only ever grows even when the periodic round
/// and an on-demand request (a federation sender) sign at the same time.
static SIGNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Blocking: the latest checkpoint if it covers `size` leaves, else a new one signed over the
/// whole ledger (one Ed25519 signature and an O(log n) root), stored as the latest.
fn sign_covering(node: &LogContext, size: u64) -> Result<Option<StoredCheckpoint>, Error> {
    let _g = SIGNING
        .lock()
        .map_err(|_| Error::Internal("checkpoint signing lock poisoned".into()))?;
    if let Some(c) = node.log.latest().filter(|c| c.size >= size) {
        return Ok(Some(c));
    }
    let now = node.ledger.len();
    if now == 0 {
        return Ok(None);
    }
    if now < size {
        return Err(Error::Internal(format!(
            "checkpoint asked for {size} leaves, the ledger has {now}"
        )));
    }
    let root = super::root(node.ledger.store(), now)?;
    let note = Checkpoint::new(&node.origin, now, root)
        .sign(&node.signer)
        .map_err(|e| Error::Internal(e.to_string()))?;
    let c = StoredCheckpoint {
        note,
        size: now,
        root,
        cosignatures: 0,
    };
    node.log.set_latest(node.ledger.store(), c.clone())?;
    tracing::debug!(size = now, "checkpoint signed");
    Ok(Some(c))
}

/// A signed checkpoint that covers the first `size` leaves: the latest one if it does, else one
/// signed now (issue 8: a federation sender proves its batch without waiting for the next
/// checkpoint interval). "Latest" stays monotonic.
pub async fn covering(node: &LogContext, size: u64) -> Result<StoredCheckpoint, Error> {
    if let Some(c) = node.log.latest().filter(|c| c.size >= size) {
        return Ok(c);
    }
    let n = node.clone();
    tokio::task::spawn_blocking(move || sign_covering(&n, size))
        .await
        .map_err(|e| Error::Internal(e.to_string()))??
        .ok_or_else(|| Error::Internal("no checkpoint for an empty ledger".into()))
}

/// One round: sign a new checkpoint if the tree grew, then try to get it witnessed.
pub async fn step(node: &LogContext, witnesses: &WitnessClient) -> Result<(), Error> {
    let size = node.ledger.len();
    let latest = match node.log.latest() {
        Some(c) if c.size >= size => c,
        _ if size == 0 => {
            node.metrics.checkpoint_current(node.clock.now_ms());
            return Ok(());
        }
        _ => {
            let n = node.clone();
            match tokio::task::spawn_blocking(move || sign_covering(&n, size))
                .await
                .map_err(|e| Error::Internal(e.to_string()))??
            {
                Some(c) => c,
                None => return Ok(()),
            }
        }
    };
    node.metrics.checkpoint_current(node.clock.now_ms());
    if witnesses.k() == 0 || node.log.witnessed().is_some_and(|w| w.size >= latest.size) {
        return Ok(());
    }
    if let Some(w) = witnesses.witness(node, &latest).await {
        tracing::info!(
            size = w.size,
            cosignatures = w.cosignatures,
            "checkpoint witnessed"
        );
        node.log.set_witnessed(node.ledger.store(), w)?;
    }
    Ok(())
}
