//! Admission declarations and receipts (seed 000, "Federation admission": "Linked to a local
//! Work through an admission Declaration"): every decision about a peer record is a node-signed
//! `admission` record in this node's ledger, and the peer is answered with a receipt naming it.
//!
//! A declaration's bytes are a function of the record and the decision only (issue 16): its
//! declared time is the admitted record's recorded time, the time the quarantine opened, or the
//! peer record's own declared time — never the clock at the moment of writing. A receiver that
//! crashes after appending a declaration and before keeping the decision re-creates the same
//! bytes on the retry, and the ledger answers it as a duplicate instead of recording a second,
//! different declaration.

use super::codes::Decision;
use super::decisions::Entry;
use crate::error::Error;
use crate::ledger::Append;
use accord_kernel as k;
use accord_proto::note::Signer;
use accord_proto::pb::federation::v1::{Receipt, ReceiptKind};
use accord_proto::pb::record::v1::{self as pb, Record, record::Operation};
use accord_proto::signing::{self, RecordId};

/// One admission declaration, before signing.
#[derive(Debug, Clone)]
pub struct Declaration<'a> {
    /// The declaring party of this organisation (`work-service`, or `operator` by hand).
    pub author: &'a str,
    /// The peer the record came from.
    pub peer: &'a str,
    /// The peer record decided about.
    pub record_id: RecordId,
    /// Its commitment ("" when it did not decode: declared under `federation:<peer>`).
    pub commitment: &'a str,
    /// The decision.
    pub decision: &'a Decision,
    /// The declaration that opened a quarantine this one closes.
    pub closes: Option<RecordId>,
    /// The declared time: deterministic per (record, decision), see the module doc.
    pub declared_at: i64,
}

impl Declaration<'_> {
    /// The declaration as a record of organisation `org`, ready to append: signed with the node
    /// key when `signer` is given — the declarations that may leave this node ([`signed`]) — and
    /// otherwise with no signature, its bytes bound by the node's signed checkpoint instead
    /// (issue 32, item 2; ARCHITECTURE.md, "Admission declarations and their signatures").
    pub fn seal(&self, signer: Option<&Signer>, org: &str) -> Result<Append<k::Record>, Error> {
        let commitment = if self.commitment.is_empty() {
            format!("federation:{}", self.peer)
        } else {
            self.commitment.to_string()
        };
        let record = Record {
            author: Some(pb::PartyRef {
                organisation: org.to_string(),
                name: self.author.to_string(),
            }),
            declared_at_unix_ms: self.declared_at,
            commitment_id: commitment,
            operation: Some(Operation::Admission(pb::Admission {
                record_id: self.record_id.to_vec().into(),
                peer: self.peer.to_string(),
                outcome: self.decision.outcome() as i32,
                code: self.decision.code().to_string(),
                closes: self.closes.map(|c| c.to_vec().into()).unwrap_or_default(),
            })),
            ..Default::default()
        };
        let signed = match signer {
            Some(signer) => signing::sign_record(signer, &record),
            None => pb::SignedRecord {
                payload: prost::Message::encode_to_vec(&record).into(),
                payload_type: accord_proto::declaration::payload_type(&record),
                signatures: Vec::new(),
            },
        };
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        let input = crate::convert::record_from_pb(id, &record)?;
        Ok(Append {
            id,
            signed,
            input,
            at: None,
        })
    }
}

/// Whether a declaration about a record of `commitment` is signed: when it may leave this node.
/// Admission declarations are federated only from a commitment's home (its final decisions,
/// the order other holders follow: [`super::route::federated`]), so one about a commitment
/// homed elsewhere never leaves; it is read only here, with an inclusion proof against this
/// node's signed checkpoint (the receipt's proof). A commitment this node does not know yet
/// is signed for, as if it might be homed here. `""` (a record that did not decode, declared
/// under `federation:<peer>`) is never homed anywhere.
pub fn signed(cx: &super::FedContext, commitment: &str) -> bool {
    if commitment.is_empty() {
        return false;
    }
    cx.projection.read().ok().is_none_or(|p| {
        p.get(commitment)
            .is_none_or(|k| k.home_org(cx.name()) == cx.name())
    })
}

/// An admission receipt (unsigned) from `org` for a decided record, issued at `issued_at`.
pub fn admission_receipt(
    org: &str,
    envelope_id: &RecordId,
    record_id: &RecordId,
    e: &Entry,
    issued_at: i64,
) -> Receipt {
    Receipt {
        kind: ReceiptKind::Admission as i32,
        receiver: org.to_string(),
        sender: e.peer.clone(),
        envelope_id: envelope_id.to_vec().into(),
        record_id: record_id.to_vec().into(),
        outcome: e.decision.outcome() as i32,
        code: e.decision.code().to_string(),
        admission_record_id: e.admission_id.to_vec().into(),
        admission_sequence: e.admission_seq,
        issued_at_unix_ms: issued_at,
        ..Default::default()
    }
}
