//! The checkpointer: at a configurable interval, when the tree has grown, signs a C2SP
//! tlog-checkpoint with the node's log key (key name = origin), stores it, and takes it to the
//! witnesses; once K of them co-sign, the cosigned checkpoint is stored as the witnessed one.

use super::{StoredCheckpoint, WitnessClient};
use crate::error::Error;
use crate::server::Node;
use accord_proto::checkpoint::Checkpoint;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs until `shutdown`.
pub async fn run_checkpointer(
    node: Arc<Node>,
    witnesses: Arc<WitnessClient>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(
        node.config.log.checkpoint_interval_ms,
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = step(&node, &witnesses).await {
            tracing::warn!(error = %e, "checkpoint step failed");
        }
    }
}

/// One round: sign a new checkpoint if the tree grew, then try to get it witnessed.
pub async fn step(node: &Arc<Node>, witnesses: &WitnessClient) -> Result<(), Error> {
    let size = node.ledger.len();
    let latest = node.log.latest();
    let latest = match latest {
        Some(c) if c.size >= size => c,
        _ if size == 0 => {
            node.metrics.checkpoint_current();
            return Ok(());
        }
        _ => {
            let n = node.clone();
            let c = tokio::task::spawn_blocking(move || -> Result<StoredCheckpoint, Error> {
                let root = super::root(n.ledger.store(), size)?;
                let note = Checkpoint::new(n.config.origin(), size, root)
                    .sign(&n.signer)
                    .map_err(|e| Error::Internal(e.to_string()))?;
                let c = StoredCheckpoint {
                    note,
                    size,
                    root,
                    cosignatures: 0,
                };
                n.log.set_latest(n.ledger.store(), c.clone())?;
                Ok(c)
            })
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
            tracing::debug!(size, "checkpoint signed");
            c
        }
    };
    node.metrics.checkpoint_current();
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
