//! The record path's door: checking a signed record from one of this organisation's parties
//! (`Submit`, `SubmitBatch`), in three steps so that a batch checks all its signatures with one
//! Ed25519 batch verification (issue 14):
//!
//! 1. [`Pending::new`]: the envelope of the record — payload type, a payload, signatures — and
//!    which of this organisation's keys each signature names. Nothing is verified yet.
//! 2. the signatures, for many records at once (through [`BatchVerifier`], which checks the signatures of every concurrent `Submit` and
//!    `SubmitBatch` call with one `verify_batch`); a batch that fails is checked record by
//!    record, so one bad record never fails the others and each error names its own signature.
//! 3. [`Pending::finish`]: the payload is decoded only after its signatures verified (DESIGN.md:
//!    signatures are checked over the bytes received before anything is decoded), and its author
//!    must be the party whose key signed it (any party of this organisation, for the node key).

mod batch_verify;

pub use batch_verify::{BatchVerifier, Check};

use crate::error::Error;
use crate::ledger::{Append, AppendResult};
use crate::node::Node;
use accord_proto::note::Verifier;
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::pb::work::v1 as pb;
use accord_proto::signing::{self, RecordId};
use prost::Message;

/// A signed record whose signatures have been matched to keys but not yet verified.
pub struct Pending<'n> {
    signed: SignedRecord,
    /// Per known signature: the party it speaks for (`None` = the node key: any party), its key,
    /// and its index in `signed.signatures`.
    keys: Vec<(Option<&'n str>, &'n Verifier, usize)>,
    /// PAE(payload_type, payload): the signed message (moved out by [`Pending::check`]).
    message: Vec<u8>,
    /// SHA-256 of the message: the record id.
    id: RecordId,
}

impl<'n> Pending<'n> {
    /// Step 1: checks the envelope and matches each signature to one of this organisation's keys
    /// (party keys or the node key) by key name and key id. Signatures by other keys are ignored.
    pub fn new(node: &'n Node, signed: SignedRecord) -> Result<Pending<'n>, Error> {
        accord_proto::declaration::check_payload_type(&signed.payload_type)
            .map_err(|e| Error::invalid("record.payload_type", e))?;
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
        let message = signing::pae(&signed.payload_type, &signed.payload);
        // signing::record_id, without building the PAE a second time.
        let id = <sha2::Sha256 as sha2::Digest>::digest(&message).into();
        Ok(Pending {
            signed,
            keys,
            message,
            id,
        })
    }

    /// Step 2 by a [`BatchVerifier`]: what it needs to check, owned (the message moves out; the
    /// payload and signatures are shared `Bytes`).
    pub fn check(&mut self) -> Check {
        Check {
            keys: self
                .keys
                .iter()
                .map(|(_, k, i)| ((*k).clone(), *i))
                .collect(),
            payload_type: self.signed.payload_type.clone(),
            message: std::mem::take(&mut self.message),
            payload: self.signed.payload.clone(),
            signatures: self.signed.signatures.clone(),
        }
    }

    /// Step 3: decodes the payload and binds its author to the signing keys.
    pub fn finish(self, node: &Node) -> Result<(RecordId, Record, SignedRecord), Error> {
        let record = Record::decode(self.signed.payload.as_ref()).map_err(|e| {
            Error::invalid(
                "record.payload",
                format!("not an accord.record.v1.Record: {e}"),
            )
        })?;
        accord_proto::declaration::check_matches(&self.signed.payload_type, &record)
            .map_err(|e| Error::invalid("record.payload_type", e))?;
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
        Ok((self.id, record, self.signed))
    }
}

/// Records one checked record: converts it to the kernel's form at the edge and appends it.
pub async fn append(
    node: &Node,
    signed: SignedRecord,
    record: Record,
    id: RecordId,
) -> Result<pb::SubmitResponse, Error> {
    let input = crate::convert::record_from_pb(id, &record)?;
    let _received = node.received.hold([(id, signed.payload.clone())]);
    let r = node
        .ledger
        .append(Append {
            id,
            signed,
            input,
            at: None,
        })
        .await?;
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

/// `Submit`: the record's signatures join the pending set of [`BatchVerifier`] (verified together
/// with those of every concurrent call), then the record is appended and answered once synced.
pub async fn submit_one(
    node: &Node,
    verifier: &BatchVerifier,
    signed: SignedRecord,
) -> Result<pb::SubmitResponse, Error> {
    let mut p = Pending::new(node, signed)?;
    verifier
        .verify(vec![p.check()])
        .await
        .pop()
        .unwrap_or_else(|| Err(Error::Internal("no verdict".into())))?;
    let (id, record, signed) = p.finish(node)?;
    // Formatted only when the span is recorded (not on every call at the default log level).
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("record_id", hex::encode(id));
    }
    append(node, signed, record, id).await
}

/// `SubmitBatch`: every record checked (its signatures verified by the [`BatchVerifier`] in one
/// set, together with concurrent calls), the good ones sent to the writer in one message — it
/// takes them into as few group commits as it can — and each answered after its synced write.
pub async fn submit_batch(
    node: &Node,
    verifier: &BatchVerifier,
    records: Vec<SignedRecord>,
) -> Result<pb::SubmitBatchResponse, Error> {
    let max = node.config.limits.max_batch_records;
    if records.len() > max {
        return Err(Error::invalid(
            "records",
            format!("{} records; at most {max} in one batch", records.len()),
        ));
    }
    let mut slots: Vec<Result<Pending<'_>, Error>> = records
        .into_iter()
        .map(|signed| Pending::new(node, signed))
        .collect();
    let checks: Vec<Check> = slots
        .iter_mut()
        .filter_map(|s| s.as_mut().ok().map(Pending::check))
        .collect();
    let mut verdicts = verifier.verify(checks).await.into_iter();
    // Per slot: the append's index among the good ones, or the record's error.
    let mut appends = Vec::new();
    let mut plan: Vec<Result<usize, Error>> = Vec::with_capacity(slots.len());
    for slot in slots {
        let checked = slot.and_then(|p| {
            verdicts
                .next()
                .unwrap_or_else(|| Err(Error::Internal("batch order".into())))?;
            let (id, record, signed) = p.finish(node)?;
            let input = crate::convert::record_from_pb(id, &record)?;
            Ok(Append {
                id,
                signed,
                input,
                at: None,
            })
        });
        plan.push(checked.map(|a| {
            appends.push(a);
            appends.len() - 1
        }));
    }
    let ids: Vec<RecordId> = appends.iter().map(|a| a.id).collect();
    let _received = node
        .received
        .hold(appends.iter().map(|a| (a.id, a.signed.payload.clone())));
    let mut appended: Vec<Option<Result<AppendResult, Error>>> = node
        .ledger
        .append_many(appends)
        .await
        .into_iter()
        .map(Some)
        .collect();
    let results = plan
        .into_iter()
        .map(|p| {
            let r = p.and_then(|i| {
                let r = appended
                    .get_mut(i)
                    .and_then(Option::take)
                    .unwrap_or_else(|| Err(Error::Internal("batch order".into())))?;
                Ok(response(ids[i], r))
            });
            match r {
                Ok(resp) => pb::SubmitResult {
                    result: Some(pb::submit_result::Result::Ok(resp)),
                },
                Err(e) => record_error(e),
            }
        })
        .collect();
    Ok(pb::SubmitBatchResponse { results })
}
