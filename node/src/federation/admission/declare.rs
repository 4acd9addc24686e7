//! Phase 4: every decision becomes a node-signed admission declaration by
//! `<org>/work-service`, appended in one group commit ([`crate::federation::declaration`]).

use super::Decided;
use crate::federation::FedContext;
use crate::federation::declaration::Declaration;
use crate::federation::error::FedError;
use crate::federation::peers::Peer;
use crate::ledger::{Append, AppendResult, Held};
use crate::projection::WORK_SERVICE;
use accord_proto::signing::RecordId;

/// A decision with its declaration in the ledger.
pub(super) struct Declared {
    pub decided: Decided,
    /// The declaration's id.
    pub admission_id: RecordId,
    /// Where it is in the ledger.
    pub appended: AppendResult,
}

/// Below this many declarations, one thread signs them all.
const PER_THREAD: usize = 64;

/// Declares every decision; resolves once the declarations are durable.
pub(super) async fn decisions(
    cx: &FedContext,
    ledger: &Held<'_, accord_kernel::Record>,
    peer: &Peer,
    decided: Vec<Decided>,
    checkpointed: bool,
) -> Result<Vec<Declared>, FedError> {
    if decided.is_empty() {
        return Ok(Vec::new());
    }
    // Each decision is its own ledger record (seed 000). When the sender proves declarations by
    // the checkpoint (`Envelope.checkpointed_declarations`), only those that may leave this
    // node are signed (`declaration::signed`: a commitment homed here); the others are bound by
    // the node's signed checkpoint (issue 32, item 2). Signing happens off the tokio
    // workers, on as many threads as there are cores (issue 14); the bytes depend on the record
    // and decision only, not on the thread.
    let (signer, org, peer_name) = (
        cx.signer.clone(),
        cx.name().to_string(),
        peer.name().to_string(),
    );
    let signs: Vec<bool> = decided
        .iter()
        .map(|d| !checkpointed || crate::federation::declaration::signed(cx, &d.commitment))
        .collect();
    let (decided, appends) = tokio::task::spawn_blocking(move || {
        let sign = |(d, signs): (&Decided, &bool)| {
            Declaration {
                author: WORK_SERVICE,
                peer: &peer_name,
                record_id: d.id,
                commitment: &d.commitment,
                decision: &d.decision,
                closes: None,
                declared_at: d.declared_at,
            }
            .seal(signs.then_some(&signer), &org)
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(decided.len().div_ceil(PER_THREAD))
            .max(1);
        let threads = if signs.iter().any(|s| *s) { threads } else { 1 };
        let appends: Vec<Result<Append<_>, crate::error::Error>> = if threads == 1 {
            decided.iter().zip(&signs).map(sign).collect()
        } else {
            let chunk = decided.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = decided
                    .chunks(chunk)
                    .zip(signs.chunks(chunk))
                    .map(|(part, s)| {
                        scope.spawn(move || part.iter().zip(s).map(sign).collect::<Vec<_>>())
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| {
                        h.join().unwrap_or_else(|_| {
                            vec![Err(crate::error::Error::Internal(
                                "declaration signing thread panicked".into(),
                            ))]
                        })
                    })
                    .collect()
            })
        };
        (decided, appends)
    })
    .await
    .map_err(|e| crate::error::Error::Internal(e.to_string()))?;
    let appends: Vec<Append<_>> = appends.into_iter().collect::<Result<_, _>>()?;
    if appends.len() != decided.len() {
        return Err(crate::error::Error::Internal("declarations out of step".into()).into());
    }
    let ids: Vec<RecordId> = appends.iter().map(|a| a.id).collect();
    // One message to the writer for every declaration of the envelope (they share group
    // commits), instead of one per declaration.
    let results = ledger.append_many(appends).await;
    decided
        .into_iter()
        .zip(ids)
        .zip(results)
        .map(|((decided, admission_id), r)| {
            Ok(Declared {
                decided,
                admission_id,
                appended: r?,
            })
        })
        .collect()
}
