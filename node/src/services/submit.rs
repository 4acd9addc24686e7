//! The record path's door: checking a signed record from one of this organisation's parties
//! (`Submit`, `SubmitBatch`), in three steps so that a batch checks all its signatures with one
//! Ed25519 batch verification (issue 14):
//!
//! 1. [`Pending::new`]: the envelope of the record — payload type, a payload, signatures — and
//!    which of this organisation's keys each signature names. Nothing is verified yet.
//! 2. the signatures, one by one ([`Pending::verify`]) or for many records at once
//!    ([`verify_all`]); a batch that fails is checked record by record, so one bad record never
//!    fails the others and each error names its own signature.
//! 3. [`Pending::finish`]: the payload is decoded only after its signatures verified (DESIGN.md:
//!    signatures are checked over the bytes received before anything is decoded), and its author
//!    must be the party whose key signed it (any party of this organisation, for the node key).

use crate::error::Error;
use crate::ledger::{Append, AppendResult};
use crate::node::Node;
use accord_proto::note::Verifier;
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::pb::work::v1 as pb;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE, RecordId};
use prost::Message;

/// A signed record whose signatures have been matched to keys but not yet verified.
pub struct Pending<'n> {
    signed: SignedRecord,
    /// Per known signature: the party it speaks for (`None` = the node key: any party), its key,
    /// and its index in `signed.signatures`.
    keys: Vec<(Option<&'n str>, &'n Verifier, usize)>,
    /// PAE(payload_type, payload): the signed message.
    message: Vec<u8>,
}

impl<'n> Pending<'n> {
    /// Step 1: checks the envelope and matches each signature to one of this organisation's keys
    /// (party keys or the node key) by key name and key id. Signatures by other keys are ignored.
    pub fn new(node: &'n Node, signed: SignedRecord) -> Result<Pending<'n>, Error> {
        if signed.payload_type != RECORD_PAYLOAD_TYPE {
            return Err(Error::invalid(
                "record.payload_type",
                format!("must be {RECORD_PAYLOAD_TYPE:?}"),
            ));
        }
        if signed.payload.is_empty() {
            return Err(Error::invalid("record.payload", "empty"));
        }
        if signed.signatures.is_empty() {
            return Err(Error::invalid(
                "record.signatures",
                "at least one signature is required",
            ));
        }
        let mut keys = Vec::new();
        for (i, sig) in signed.signatures.iter().enumerate() {
            let key = if sig.key_name == node.signer.name() {
                Some((None, &node.node_key))
            } else {
                node.party_keys.iter().find_map(|(party, keys)| {
                    keys.iter()
                        .find(|k| k.name() == sig.key_name && k.key_id()[..] == sig.key_id[..])
                        .map(|k| (Some(party.as_str()), k))
                })
            };
            if let Some((party, k)) = key {
                keys.push((party, k, i));
            }
        }
        if keys.is_empty() {
            return Err(Error::BadSignature(
                "record.signatures: no signature by a key of this organisation".into(),
            ));
        }
        let message = signing::pae(RECORD_PAYLOAD_TYPE, &signed.payload);
        Ok(Pending {
            signed,
            keys,
            message,
        })
    }

    /// Step 2, alone: verifies every matched signature.
    pub fn verify(&self) -> Result<(), Error> {
        for (_, k, i) in &self.keys {
            signing::verify(
                k,
                RECORD_PAYLOAD_TYPE,
                &self.signed.payload,
                &self.signed.signatures[*i],
            )
            .map_err(|e| Error::BadSignature(format!("record.signatures[{i}]: {e}")))?;
        }
        Ok(())
    }

    /// Step 3: decodes the payload and binds its author to the signing keys.
    pub fn finish(self, node: &Node) -> Result<(RecordId, Record, SignedRecord), Error> {
        let record = Record::decode(self.signed.payload.as_ref()).map_err(|e| {
            Error::invalid(
                "record.payload",
                format!("not an accord.record.v1.Record: {e}"),
            )
        })?;
        let author = record
            .author
            .as_ref()
            .ok_or_else(|| Error::invalid("record.payload.author", "required"))?;
        if author.organisation != node.name() {
            return Err(Error::invalid(
                "record.payload.author.organisation",
                format!(
                    "{:?} is not this node's organisation {:?}; peers' records arrive through federation",
                    author.organisation,
                    node.name()
                ),
            ));
        }
        if !self
            .keys
            .iter()
            .any(|(p, _, _)| p.is_none_or(|p| p == author.name))
        {
            return Err(Error::BadSignature(format!(
                "record.signatures: not signed by a key of the author {}/{}",
                author.organisation, author.name
            )));
        }
        let id = signing::record_id(RECORD_PAYLOAD_TYPE, &self.signed.payload);
        Ok((id, record, self.signed))
    }
}

/// Checks a signed record from one of this organisation's parties (steps 1–3, signatures one by
/// one). Nothing is written; any failure names the field.
pub fn verify_local(
    node: &Node,
    signed: SignedRecord,
) -> Result<(RecordId, Record, SignedRecord), Error> {
    let p = Pending::new(node, signed)?;
    p.verify()?;
    p.finish(node)
}

/// Step 2 for many records: one Ed25519 batch verification over every matched signature of every
/// pending record. When the batch fails, each record is verified alone, so the answer for each
/// is exactly what [`Pending::verify`] says.
pub fn verify_all(pending: &[Pending<'_>]) -> Vec<Result<(), Error>> {
    let mut items: Vec<(&Verifier, &[u8], &[u8])> = Vec::new();
    for p in pending {
        for (_, k, i) in &p.keys {
            items.push((k, &p.message, &p.signed.signatures[*i].signature));
        }
    }
    if signing::verify_batch(&items).is_ok() {
        return pending.iter().map(|_| Ok(())).collect();
    }
    pending.iter().map(Pending::verify).collect()
}

/// Records one checked record: converts it to the kernel's form at the edge and appends it.
pub async fn append(
    node: &Node,
    signed: SignedRecord,
    record: Record,
    id: RecordId,
) -> Result<pb::SubmitResponse, Error> {
    let input = crate::convert::record_from_pb(id, &record)?;
    let r = node.ledger.append(Append { id, signed, input }).await?;
    Ok(response(id, r))
}

fn response(id: RecordId, r: AppendResult) -> pb::SubmitResponse {
    pb::SubmitResponse {
        record_id: id.to_vec().into(),
        sequence: r.sequence,
        durability: pb::Durability::Recorded as i32,
        outcome: Some(r.outcome),
        duplicate: r.duplicate,
    }
}

/// The per-record error of a batch: what `Submit` would have returned, as data.
fn record_error(e: Error) -> pb::SubmitResult {
    let field = match &e {
        Error::InvalidArgument { field, .. } => field.clone(),
        _ => String::new(),
    };
    let reason = e.reason().to_string();
    let status = tonic::Status::from(e);
    pb::SubmitResult {
        result: Some(pb::submit_result::Result::Error(pb::RecordError {
            code: status.code() as i32,
            reason,
            field,
            message: status.message().to_string(),
        })),
    }
}

/// `SubmitBatch`: every record checked (signatures batch-verified off the async workers), the
/// good ones appended together — the writer takes them into as few group commits as it can — and
/// each answered after its synced write.
pub async fn submit_batch(
    node: std::sync::Arc<Node>,
    records: Vec<SignedRecord>,
) -> Result<pb::SubmitBatchResponse, Error> {
    let max = node.config.limits.max_batch_records;
    if records.len() > max {
        return Err(Error::invalid(
            "records",
            format!("{} records; at most {max} in one batch", records.len()),
        ));
    }
    let n = node.clone();
    // Signature checks are CPU work: keep them off the async workers.
    let checked = tokio::task::spawn_blocking(move || {
        let mut slots: Vec<Result<Option<Pending<'_>>, Error>> = Vec::with_capacity(records.len());
        for signed in records {
            slots.push(Pending::new(&n, signed).map(Some));
        }
        let pending: Vec<Pending<'_>> = slots
            .iter_mut()
            .filter_map(|s| s.as_mut().ok().and_then(Option::take))
            .collect();
        let mut verdicts = verify_all(&pending).into_iter();
        let mut pending = pending.into_iter();
        slots
            .into_iter()
            .map(|slot| {
                slot?;
                let p = pending
                    .next()
                    .ok_or_else(|| Error::Internal("batch order".into()))?;
                verdicts
                    .next()
                    .ok_or_else(|| Error::Internal("batch order".into()))??;
                let (id, record, signed) = p.finish(&n)?;
                let input = crate::convert::record_from_pb(id, &record)?;
                Ok(Append { id, signed, input })
            })
            .collect::<Vec<Result<Append<accord_kernel::Record>, Error>>>()
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))?;
    let appends = checked.into_iter().map(|c| async {
        match c {
            Ok(a) => {
                let id = a.id;
                match node.ledger.append(a).await {
                    Ok(r) => pb::SubmitResult {
                        result: Some(pb::submit_result::Result::Ok(response(id, r))),
                    },
                    Err(e) => record_error(e),
                }
            }
            Err(e) => record_error(e),
        }
    });
    Ok(pb::SubmitBatchResponse {
        results: futures::future::join_all(appends).await,
    })
}
