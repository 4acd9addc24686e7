//! Phase 3: the kernel decides every record triage let through, in one group commit; the other
//! records get their decision from triage.

use super::{Decided, Work};
use crate::federation::codes::{self, Decision};
use crate::federation::error::FedError;
use crate::federation::peers::Peer;
use crate::ledger::{Append, Held};
use accord_proto::pb::federation::v1::Signed;

/// Every record's decision, and the receipts already known (duplicates).
pub(super) struct Committed {
    /// Records decided now, in envelope order.
    pub decided: Vec<Decided>,
    /// Per envelope position: the original receipt of a record decided before.
    pub receipts: Vec<Option<Signed>>,
    /// (position, earlier position of the same record).
    pub same_as: Vec<(usize, usize)>,
}

/// Appends the records for the kernel and turns every triaged record into a decision.
pub(super) async fn kernel(
    ledger: &Held<'_, accord_kernel::Record>,
    peer: &Peer,
    work: Vec<Work>,
) -> Result<Committed, FedError> {
    // One message to the writer for the whole envelope: its records share group commits.
    let appends = work
        .iter()
        .filter_map(|w| match w {
            Work::Kernel { c } => Some(Append {
                id: c.id,
                signed: c.signed.clone(),
                input: c.input.clone(),
                at: c.at,
            }),
            _ => None,
        })
        .collect();
    let mut kernel = ledger.append_many(appends).await.into_iter();
    let mut out = Committed {
        decided: Vec::new(),
        receipts: vec![None; work.len()],
        same_as: Vec::new(),
    };
    for (idx, w) in work.into_iter().enumerate() {
        let d = match w {
            Work::Dup(s) => {
                out.receipts[idx] = Some(s);
                continue;
            }
            Work::SameAs(j) => {
                out.same_as.push((idx, j));
                continue;
            }
            Work::Reject {
                id,
                code,
                detail,
                declared_at,
            } => {
                tracing::info!(peer = peer.name(), record_id = %hex::encode(id), code, detail = %detail, "federation: rejected");
                Decided {
                    idx,
                    id,
                    commitment: String::new(),
                    decision: Decision::Rejected(code.into()),
                    declared_at,
                    quarantine: None,
                }
            }
            Work::Quarantine { c, missing, code } => Decided {
                idx,
                id: c.id,
                commitment: c.record.commitment_id.clone(),
                decision: Decision::Quarantined(code.into()),
                // The record's own time: the same declaration on a retry (issue 16).
                declared_at: c.record.declared_at_unix_ms,
                quarantine: Some((c, missing, code)),
            },
            Work::Kernel { c } => {
                let r = kernel.next().ok_or_else(|| {
                    crate::error::Error::Internal("kernel results out of step".into())
                })??;
                let decision = codes::decision_of(&r.outcome);
                Decided {
                    idx,
                    id: c.id,
                    commitment: c.record.commitment_id.clone(),
                    decision,
                    // The time the kernel applied the record at (the author node's, bounded):
                    // a retry re-derives the same declaration, and at a commitment's home it
                    // is the time every other holder applies the record at (issue 26).
                    declared_at: r.applied_at,
                    quarantine: None,
                }
            }
        };
        out.decided.push(d);
    }
    Ok(out)
}
