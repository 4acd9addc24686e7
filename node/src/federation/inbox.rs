//! `FederationService.GetReceipts` (DESIGN.md, "Federation"): the current decision about each
//! record the calling peer delivered, re-signed, with the proof once a checkpoint includes the
//! admission declaration. Admission itself is [`super::admission`]; the decisions are kept by
//! [`super::decisions`].

use super::codes;
use super::declaration::admission_receipt;
use super::error::FedError;
use super::refusals::refuse;
use crate::error::Error;
use crate::federation::FedContext;
use accord_proto::pb::federation::v1::{Receipt, Signed};
use accord_proto::signing::RecordId;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;

/// `FederationService.GetReceipts`: the latest receipt of each record the calling peer (known
/// by its TLS identity) delivered, with the proof once a checkpoint includes the admission.
pub async fn get_receipts(
    cx: &FedContext,
    ids: Vec<RecordId>,
    chain: Option<Arc<Vec<CertificateDer<'static>>>>,
) -> Result<Vec<Signed>, FedError> {
    let callers: Vec<String> = match chain.as_deref() {
        Some(c) => cx
            .federation
            .peers
            .list()
            .into_iter()
            .filter(|p| p.enabled() && p.tls_identity_matches(c))
            .map(|p| p.name().to_string())
            .collect(),
        None => Vec::new(),
    };
    if callers.is_empty() {
        return Err(refuse(
            cx,
            "",
            codes::WRONG_TLS_IDENTITY,
            "GetReceipts: the TLS client certificate is no enabled peer's identity".into(),
        ));
    }
    let n = cx.clone();
    tokio::task::spawn_blocking(move || {
        // One batch per calling peer, signed once (issue 14): every receipt of the answer
        // shares one signature over the batch's Merkle root.
        let now = n.clock.now_ms();
        let mut by_peer: Vec<(String, Vec<Receipt>)> = Vec::new();
        for id in ids {
            let Some(e) = n.federation.decisions.entry(&id)? else {
                continue;
            };
            if !callers.contains(&e.peer) {
                continue;
            }
            let mut r = admission_receipt(n.name(), &e.envelope_id, &id, &e, now);
            super::receipt_proof::attach_proof(&n, &mut r)?;
            match by_peer.iter_mut().find(|(p, _)| *p == e.peer) {
                Some((_, list)) => list.push(r),
                None => by_peer.push((e.peer.clone(), vec![r])),
            }
        }
        Ok::<_, FedError>(
            by_peer
                .into_iter()
                .flat_map(|(peer, list)| {
                    super::receipts::sign_batch(&n.signer, n.name(), &peer, now, list)
                })
                .collect(),
        )
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))?
}
