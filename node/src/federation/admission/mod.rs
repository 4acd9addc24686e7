//! Admission of a peer's envelope (seed 000, "Federation admission"), as a pipeline of named
//! phases; each record is admitted, quarantined or rejected:
//!
//! 1. [`authenticate`] — the envelope: payload type, the sender is an enabled peer, the TLS
//!    client certificate is that peer's identity (and its pinned leaf, if pinned), the envelope
//!    is addressed here, and it is signed by one of the peer's node keys valid now (a party key
//!    on an envelope is `not_node_key`) — otherwise the whole envelope is refused
//!    ([`FedError::Refused`] with the code) and the refusal is recorded. Then, under the peer's
//!    lock, a duplicate envelope gets its stored answer, and the log proof is verified
//!    ([`super::logproof`]; an invalid proof refuses the envelope);
//! 2. [`triage`] — record by record, in envelope order: dedup (a record decided before gets the
//!    original receipt); well-formed (`malformed`); the author acts for the sending organisation
//!    (`unauthorized_author`), every signature is by the author's own party key or the peer's
//!    node key (`key_not_for_author`), and the record is signed by one of its keys valid now
//!    (`unknown_key`, `bad_signature`); proven by the log proof, else
//!    `["quarantined", "unproven"]`; records failing these count against the peer's
//!    [`super::budget`] (over it: RESOURCE_EXHAUSTED before any write); basis known, else
//!    `["quarantined", "missing_basis"]` (also while an earlier record of the same commitment
//!    is quarantined, so a commitment's records apply in order);
//! 3. [`commit`] — kernel validity: the records that got this far are appended to the ledger
//!    in one group commit and the kernel decides (`admitted`, or
//!    `["rejected", "invalid_operation:<kernel code>"]`);
//! 4. [`declare`] — every decision becomes a node-signed `admission` declaration by
//!    `<org>/work-service` (one more group commit), with bytes that depend on the record and
//!    the decision only ([`super::declaration`]);
//! 5. [`persist`] — receipts, the decisions, quarantined records, the envelope's answer and the
//!    peer's largest checkpoint, in one synced write to the [`super::decisions`] store.
//!
//! Decisions of one peer are taken one envelope at a time (a per-peer lock), in the sender's
//! order when it pipelines (`Envelope.previous_first_sequence`, issue 14), so retries racing
//! their original cannot decide a record twice; a crash anywhere before the synced write leaves
//! a retry to re-create the same ledger records, which the ledger deduplicates.

mod authenticate;
mod commit;
mod declare;
mod persist;
mod triage;

use super::check::Checked;
use super::error::FedError;
use crate::federation::FedContext;
use accord_proto::pb::federation::v1::{DeliverResponse, Signed};
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::signing::{self, ENVELOPE_PAYLOAD_TYPE, RecordId};
use prost::Message;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;

/// What triage decided for one record of the envelope.
enum Work {
    /// Decided before: the original receipt.
    Dup(Signed),
    /// The same record earlier in this envelope.
    SameAs(usize),
    /// Rejected at the door.
    Reject {
        id: RecordId,
        code: &'static str,
        detail: String,
        /// The record's own declared time (0 if it did not decode).
        declared_at: i64,
    },
    /// Kept with no local effect.
    Quarantine {
        c: Checked,
        missing: Vec<RecordId>,
        code: &'static str,
    },
    /// For the kernel.
    Kernel { c: Checked },
}

/// A decision about one record, before and after its declaration.
struct Decided {
    /// Position in the envelope.
    idx: usize,
    id: RecordId,
    commitment: String,
    decision: super::codes::Decision,
    /// The declaration's time (deterministic per record and decision).
    declared_at: i64,
    quarantine: Option<(Checked, Vec<RecordId>, &'static str)>,
}

/// How long a pipelined envelope waits for its predecessor to be decided (issue 14).
const ORDER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `FederationService.Deliver`: admits one envelope (see the module doc).
///
/// Pipelined delivery (issue 14): an envelope naming `previous_first_sequence` is decided only
/// right after that envelope of the same peer, so a peer's records are admitted in its outbox
/// order however its concurrent calls arrive. The stateless, costly part — the records'
/// signatures — is checked before that wait, so it overlaps the writes of the envelope before.
pub async fn deliver(
    cx: &FedContext,
    env_signed: Signed,
    chain: Option<Arc<Vec<CertificateDer<'static>>>>,
) -> Result<DeliverResponse, FedError> {
    let now = cx.clock.now_ms();
    let (peer, env) =
        authenticate::envelope(cx, &env_signed, chain.as_deref().map(|c| c.as_slice()), now)?;
    // Record signatures, all at once (one Ed25519 batch), outside the peer's lock.
    let all: Vec<&SignedRecord> = env.records.iter().collect();
    let sig_ok = peer.verify_batch(&all, now);
    let fed = &cx.federation;
    let lock = fed.peer_lock(peer.name());
    let order = fed.peer_order(peer.name());
    let _guard = match env.previous_first_sequence {
        None => lock.lock().await,
        Some(prev) => turn(&lock, &order, prev).await?,
    };
    let env_id = signing::record_id(ENVELOPE_PAYLOAD_TYPE, &env_signed.payload);
    let resp = match fed.decisions.envelope(&env_id)? {
        Some(e) => {
            tracing::info!(peer = peer.name(), envelope = %hex::encode(env_id), "duplicate envelope: original receipts");
            DeliverResponse::decode(e.response.as_slice())
                .map_err(|e| FedError::corrupt("envelope answer", e))?
        }
        None => admit(cx, &peer, &env_signed, &env, &sig_ok, env_id, now).await?,
    };
    order.send_replace(Some(env.first_sequence));
    Ok(DeliverResponse {
        sequenced: true,
        ..resp
    })
}

/// Waits until the envelope decided last for this peer is the one starting at `prev`, then
/// holds the peer's lock (checked again under it: a stray retry may have gone in between).
async fn turn<'a>(
    lock: &'a tokio::sync::Mutex<()>,
    order: &tokio::sync::watch::Sender<Option<u64>>,
    prev: u64,
) -> Result<tokio::sync::MutexGuard<'a, ()>, FedError> {
    let deadline = tokio::time::Instant::now() + ORDER_WAIT;
    let mut rx = order.subscribe();
    loop {
        let ready = tokio::time::timeout_at(deadline, rx.wait_for(|v| *v == Some(prev)));
        match ready.await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => {
                return Err(FedError::OutOfOrder {
                    previous: prev,
                    waited_ms: ORDER_WAIT.as_millis() as u64,
                });
            }
        }
        let guard = lock.lock().await;
        if *order.borrow() == Some(prev) {
            return Ok(guard);
        }
    }
}

/// Phases 1 (the log proof) to 5 for an authenticated envelope, under the peer's lock.
async fn admit(
    cx: &FedContext,
    peer: &Arc<super::peers::Peer>,
    env_signed: &Signed,
    env: &accord_proto::pb::federation::v1::Envelope,
    sig_ok: &[bool],
    env_id: RecordId,
    now: i64,
) -> Result<DeliverResponse, FedError> {
    // Check 5's evidence: the sender's checkpoint and inclusion proofs (an invalid proof refuses
    // the whole envelope here, before anything is written).
    let log = super::logproof::verify(cx, peer, env, now).await?;
    let work = triage::records(cx, peer, env, &log.proven, sig_ok, now)?;
    // At a commitment's home, a peer's record and the home's decision about it are adjacent in
    // the ledger: the decision is where every other holder applies the record (issue 26), so
    // nothing this node writes in between may be ordered before it there.
    let homed = work.iter().any(|w| match w {
        Work::Kernel { c } => cx.homed_here(&c.record.commitment_id),
        _ => false,
    });
    let ledger = cx.ledger.hold(homed).await;
    let decided = commit::kernel(&ledger, peer, work).await?;
    let declared = declare::decisions(
        cx,
        &ledger,
        peer,
        decided.decided,
        env.checkpointed_declarations,
    )
    .await?;
    drop(ledger);
    persist::envelope(
        cx,
        persist::Admitted {
            peer,
            env_signed,
            env_id,
            receipts: decided.receipts,
            same_as: decided.same_as,
            declared,
            log: &log,
            now,
        },
    )
    .await
}

#[cfg(test)]
pub(crate) mod tests;
