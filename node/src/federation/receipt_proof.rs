//! The receiver's proof on an admission receipt (DESIGN.md, "Federation": "A receipt should
//! carry proof, not a promise"): once a checkpoint of this node includes the admission
//! declaration, `GetReceipts` answers with that checkpoint (the witnessed one if any, else the
//! latest), the inclusion proof and the admission leaf.

use super::FedContext;
use crate::error::Error;
use accord_proto::pb::federation::v1::Receipt;
use prost::Message;

/// Fills in the checkpoint, inclusion proof and leaf of an admission receipt when a checkpoint
/// of the receiver includes `r.admission_sequence` (the witnessed one preferred).
pub fn attach_proof(cx: &FedContext, r: &mut Receipt) -> Result<(), Error> {
    let seq = r.admission_sequence;
    let cp = cx
        .log
        .witnessed()
        .filter(|c| seq < c.size)
        .or_else(|| cx.log.latest().filter(|c| seq < c.size));
    let Some(cp) = cp else { return Ok(()) };
    let store = cx.ledger.store();
    let proof = crate::log::inclusion_proof(store, seq, cp.size)?;
    let leaf = store
        .get(seq)?
        .and_then(|e| e.record)
        .ok_or_else(|| Error::Storage(format!("admission record at {seq} is missing")))?;
    r.checkpoint = cp.note;
    r.inclusion_proof = proof.into_iter().map(|h| h.to_vec().into()).collect();
    r.admission_leaf = leaf.encode_to_vec().into();
    Ok(())
}
