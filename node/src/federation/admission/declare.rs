//! Phase 4: every decision becomes a node-signed admission declaration by
//! `<org>/work-service`, appended in one group commit ([`crate::federation::declaration`]).

use super::Decided;
use crate::federation::FedContext;
use crate::federation::declaration::Declaration;
use crate::federation::error::FedError;
use crate::federation::peers::Peer;
use crate::ledger::AppendResult;
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

/// Declares every decision; resolves once the declarations are durable.
pub(super) async fn decisions(
    cx: &FedContext,
    peer: &Peer,
    decided: Vec<Decided>,
) -> Result<Vec<Declared>, FedError> {
    let mut appends = Vec::with_capacity(decided.len());
    for d in &decided {
        appends.push(
            Declaration {
                author: WORK_SERVICE,
                peer: peer.name(),
                record_id: d.id,
                commitment: &d.commitment,
                decision: &d.decision,
                closes: None,
                declared_at: d.declared_at,
            }
            .sign(&cx.signer, cx.name())?,
        );
    }
    let ids: Vec<RecordId> = appends.iter().map(|a| a.id).collect();
    let results = futures::future::join_all(appends.into_iter().map(|a| cx.ledger.append(a))).await;
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
