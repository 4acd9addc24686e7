//! Log proofs (issue 8, "the sender proves it recorded what it sends"): every envelope carries
//! the sender's signed checkpoint and each record's inclusion proof in the sender's log, so a
//! peer — even one holding the sender's node key — cannot make this node hold a record that the
//! sender's own log (witnessed, seen by its operator and auditors) does not contain.
//!
//! Sender side ([`build`]): a checkpoint that covers the batch (the latest one, or one signed on
//! demand — [`crate::log::covering`]), the inclusion proof of each record's leaf (its ledger
//! sequence), and a consistency proof from the size the receiver is believed to hold.
//!
//! Receiver side ([`verify`]): the checkpoint is signed by one of the peer's node keys valid now
//! and its origin is that key's name (else `bad_log_proof`); each inclusion proof puts
//! `SHA-256(0x00 ‖ encoded SignedRecord)` — the exact leaf both logs record — at its index under
//! the checkpoint's root (else `bad_log_proof`); and the checkpoint is consistent with the
//! largest checkpoint of that peer verified before (else `log_inconsistent`): with the proof in
//! the envelope when it starts at the size held here, else with one fetched from the peer's
//! `LogService.GetConsistencyProof`. The largest verified checkpoint is kept per peer in cf
//! `inbox` (`l ‖ peer`), written with the envelope. Records without an inclusion proof are
//! quarantined `unproven`.
//!
//! The bound: a holder of the node key can still sign a fork of the sender's log. A receiver
//! that has verified a checkpoint of the real log refuses the fork (`log_inconsistent`); one
//! that never did accepts its first checkpoint on trust — and the fork is then a signed,
//! non-repudiable statement by the sender's key that its witnesses will refuse to co-sign.

use super::FedContext;
use super::codes;
use super::error::{BadProof, FedError};
use super::peers::Peer;
use super::refusals::refuse;
use crate::error::Error;
use accord_proto::checkpoint::{Checkpoint, open_checkpoint};
use accord_proto::merkle::{leaf_hash, verify_consistency, verify_inclusion};
use accord_proto::note::Note;
use accord_proto::pb::federation::v1::{Envelope, LogProof, RecordInclusion};
use accord_proto::pb::log::v1::GetConsistencyProofRequest;
use accord_proto::pb::record::v1::SignedRecord;
use prost::Message;

/// Most hashes in one proof (a tree of 2^64 leaves needs 64; consistency at most ~128).
const MAX_PROOF: usize = 130;

pub use super::decisions::Held;

/// The largest checkpoint of `peer` verified here, if any.
pub fn held(cx: &FedContext, peer: &str) -> Result<Option<Held>, Error> {
    cx.federation.decisions.held(peer)
}

/// What [`verify`] established.
#[derive(Debug)]
pub struct Verified {
    /// Per record: proven included in the sender's log.
    pub proven: Vec<bool>,
    /// The checkpoint to keep as the peer's largest (when it grew).
    pub grew: Option<Held>,
}

impl Verified {
    /// Adds the new largest checkpoint, if any, to `batch`.
    pub fn keep(
        &self,
        batch: &mut crate::ledger::Batch,
        cx: &FedContext,
        peer: &str,
    ) -> Result<(), Error> {
        match &self.grew {
            Some(h) => cx.federation.decisions.put_held(batch, peer, h),
            None => Ok(()),
        }
    }
}

fn hashes(v: &[prost::bytes::Bytes], what: &str) -> Result<Vec<[u8; 32]>, BadProof> {
    if v.len() > MAX_PROOF {
        return Err(BadProof(format!("{what}: more than {MAX_PROOF} hashes")));
    }
    v.iter()
        .map(|h| {
            <[u8; 32]>::try_from(h.as_ref())
                .map_err(|_| BadProof(format!("{what}: a hash is not 32 bytes")))
        })
        .collect()
}

/// The leaf hash of a record as a log records it.
pub fn record_leaf(r: &SignedRecord) -> [u8; 32] {
    leaf_hash(&r.encode_to_vec())
}

/// Verifies an envelope's log proof (see the module doc). Err is the refusal (recorded).
pub async fn verify(
    cx: &FedContext,
    peer: &Peer,
    env: &Envelope,
    now: i64,
) -> Result<Verified, FedError> {
    let n = env.records.len();
    let Some(lp) = env.log_proof.as_ref().filter(|p| !p.checkpoint.is_empty()) else {
        return Ok(Verified {
            proven: vec![false; n],
            grew: None,
        });
    };
    let bad = |d: String| refuse(cx, peer.name(), codes::BAD_LOG_PROOF, d);
    let note =
        Note::parse(lp.checkpoint.as_bytes()).map_err(|e| bad(format!("checkpoint: {e}")))?;
    let cp = Checkpoint::parse(note.text()).map_err(|e| bad(format!("checkpoint: {e}")))?;
    let log_keys: Vec<_> = peer
        .node_keys_at(now)
        .into_iter()
        .filter(|k| k.name() == cp.origin)
        .collect();
    if log_keys.is_empty() {
        return Err(bad(format!(
            "checkpoint: no node key of {} valid now is named after its origin {:?}",
            peer.name(),
            cp.origin.chars().take(128).collect::<String>()
        )));
    }
    open_checkpoint(lp.checkpoint.as_bytes(), &cp.origin, &log_keys, &[])
        .map_err(|e| bad(format!("checkpoint: {e}")))?;

    let mut proven = vec![false; n];
    for (i, (r, inc)) in env.records.iter().zip(&lp.inclusions).enumerate() {
        let proof =
            hashes(&inc.inclusion_proof, &format!("inclusions[{i}]")).map_err(|e| bad(e.0))?;
        verify_inclusion(&record_leaf(r), inc.leaf_index, cp.size, &proof, &cp.root).map_err(
            |e| {
                bad(format!(
                    "records[{i}] is not leaf {} of the checkpoint of size {}: {e}",
                    inc.leaf_index, cp.size
                ))
            },
        )?;
        proven[i] = true;
    }

    let inconsistent = |d: String| refuse(cx, peer.name(), codes::LOG_INCONSISTENT, d);
    let grew = Some(Held {
        size: cp.size,
        root: hex::encode(cp.root),
    });
    let grew = match held(cx, peer.name())? {
        None => grew,
        Some(h) => {
            let root: [u8; 32] = hex::decode(&h.root)
                .ok()
                .and_then(|r| r.try_into().ok())
                .ok_or_else(|| FedError::corrupt("held checkpoint", "root is not 32 hex bytes"))?;
            if cp.size < h.size {
                return Err(inconsistent(format!(
                    "checkpoint size {} is older than size {} verified before",
                    cp.size, h.size
                )));
            }
            if cp.size == h.size {
                if cp.root != root {
                    return Err(inconsistent(format!(
                        "checkpoint of size {} has another root than the one verified before",
                        cp.size
                    )));
                }
                None
            } else {
                let proof = if lp.consistency_from_size == h.size {
                    hashes(&lp.consistency_proof, "consistency_proof").map_err(|e| bad(e.0))?
                } else {
                    fetch_consistency(cx, peer, h.size, cp.size).await?
                };
                verify_consistency(h.size, cp.size, &proof, &root, &cp.root).map_err(|e| {
                    inconsistent(format!(
                        "checkpoint of size {} does not extend the one of size {} verified before: {e}",
                        cp.size, h.size
                    ))
                })?;
                grew
            }
        }
    };
    Ok(Verified { proven, grew })
}

/// The consistency proof between two sizes of the peer's log, from its LogService.
async fn fetch_consistency(
    cx: &FedContext,
    peer: &Peer,
    size1: u64,
    size2: u64,
) -> Result<Vec<[u8; 32]>, FedError> {
    let resp = match cx
        .transport
        .consistency_proof(peer, GetConsistencyProofRequest { size1, size2 })
        .await
    {
        Ok(r) => r,
        // The peer's own log says it has no such tree: the checkpoint is not of its log.
        Err(s)
            if matches!(
                s.code(),
                tonic::Code::InvalidArgument
                    | tonic::Code::FailedPrecondition
                    | tonic::Code::NotFound
                    | tonic::Code::OutOfRange
            ) =>
        {
            return Err(refuse(
                cx,
                peer.name(),
                codes::LOG_INCONSISTENT,
                format!(
                    "the peer's log has no consistency proof {size1}..{size2}: {:?}",
                    s.code()
                ),
            ));
        }
        Err(s) => {
            return Err(FedError::Node(Error::Unavailable(format!(
                "consistency proof {size1}..{size2} from {}: {:?}",
                peer.name(),
                s.code()
            ))));
        }
    };
    hashes(&resp.hashes, "fetched consistency proof")
        .map_err(|d| refuse(cx, peer.name(), codes::LOG_INCONSISTENT, d.0))
}

/// Sender side: the log proof for records at these ledger sequences (leaf indexes), with a
/// consistency proof from `held` (the size the receiver is believed to hold, 0 if unknown).
/// Blocking (storage reads); `cp` covers every sequence.
pub fn build(
    cx: &FedContext,
    cp: &crate::log::StoredCheckpoint,
    seqs: &[u64],
    held: u64,
) -> Result<LogProof, Error> {
    let store = cx.ledger.store();
    let mut inclusions = Vec::with_capacity(seqs.len());
    for &seq in seqs {
        let proof = crate::log::inclusion_proof(store, seq, cp.size)?;
        inclusions.push(RecordInclusion {
            leaf_index: seq,
            inclusion_proof: proof.into_iter().map(|h| h.to_vec().into()).collect(),
        });
    }
    let (from, consistency) = if held > 0 && held < cp.size {
        (held, crate::log::consistency_proof(store, held, cp.size)?)
    } else if held == cp.size {
        (held, Vec::new())
    } else {
        (0, Vec::new())
    };
    Ok(LogProof {
        checkpoint: cp.note.clone(),
        inclusions,
        consistency_from_size: from,
        consistency_proof: consistency.into_iter().map(|h| h.to_vec().into()).collect(),
    })
}
