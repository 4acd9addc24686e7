//! Checks 3 and 4 of admission for one peer record (seed 000, "Federation admission"): well
//! formed, its author acts for the sending organisation, key ↔ party binding, and a signature by
//! one of its keys valid now. Shared by admission and the quarantine (which re-reads a record it
//! kept), so both build the same [`Checked`] record.

use super::codes;
use super::error::Rejection;
use super::peers::Peer;
use accord_kernel as k;
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::signing::RecordId;
use prost::Message;

/// A peer record that passed checks 3 and 4: decoded once, in wire and kernel form.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its id.
    pub id: RecordId,
    /// The signed record, as received.
    pub signed: SignedRecord,
    /// The decoded record.
    pub record: Record,
    /// Its kernel form.
    pub input: k::Record,
    /// The time to apply it at (issue 26, item 2): the sender's, for a record of the sender's
    /// own organisation (`Envelope.applied_at_unix_ms`, bounded at a commitment's home by
    /// `federation.clock_skew_ms`); `None` = this node's clock.
    pub at: Option<i64>,
}

impl Checked {
    /// Decodes a record kept by this node (it passed the checks when it was kept).
    pub fn decode(id: RecordId, signed: SignedRecord) -> Result<Checked, Rejection> {
        let record = Record::decode(signed.payload.as_ref()).map_err(|e| {
            Rejection::new(codes::MALFORMED, format!("payload does not decode: {e}"))
        })?;
        let input = crate::convert::record_from_pb(id, &record)
            .map_err(|e| Rejection::new(codes::MALFORMED, e.to_string()))?;
        Ok(Checked {
            id,
            signed,
            record,
            input,
            at: None,
        })
    }
}

/// Check 3 for one peer record: the payload type (the generic record type, or a typed
/// Declaration naming the record's own operation: `accord_proto::declaration`), and it decodes
/// (`malformed`).
pub fn decode(id: RecordId, signed: &SignedRecord) -> Result<Checked, Rejection> {
    let shown = || signed.payload_type.chars().take(96).collect::<String>();
    accord_proto::declaration::check_payload_type(&signed.payload_type).map_err(|e| {
        Rejection::new(
            codes::MALFORMED,
            format!(
                "payload type {:?}: {}",
                shown(),
                e.chars().take(160).collect::<String>()
            ),
        )
    })?;
    let checked = Checked::decode(id, signed.clone())?;
    accord_proto::declaration::check_matches(&signed.payload_type, &checked.record)
        .map_err(|e| Rejection::new(codes::MALFORMED, format!("payload type {:?} {e}", shown())))?;
    Ok(checked)
}

/// Check 4 for a decoded record of `peer`: the author acts for the peer
/// (`unauthorized_author`), key ↔ party binding (`key_not_for_author`), and — unless the
/// envelope's batch verification already established it (`signature_verified`) — a signature by
/// one of its keys valid at `now` (`unknown_key`, `bad_signature`).
pub fn authorise(
    peer: &Peer,
    c: &Checked,
    now: i64,
    signature_verified: bool,
) -> Result<(), Rejection> {
    if c.input.author.organisation != peer.name() {
        return Err(Rejection::new(
            codes::UNAUTHORIZED_AUTHOR,
            format!(
                "author {} does not act for the sending organisation {:?}",
                c.input.author,
                peer.name()
            ),
        ));
    }
    peer.check_binding(&c.input.author.to_string(), &c.signed.signatures)?;
    if !signature_verified {
        peer.verify(
            &c.signed.payload_type,
            &c.signed.payload,
            &c.signed.signatures,
            now,
        )?;
    }
    Ok(())
}

/// A record rejected at the door (checks 3 and 4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rejection}")]
pub struct Rejected {
    /// Why.
    pub rejection: Rejection,
    /// The record's own declared time (0 when it did not decode): the time of the declaration
    /// about it, so that the declaration's bytes depend on the record only (issue 16).
    pub declared_at: i64,
}

/// Checks 3 and 4 for one record of `peer` ([`decode`], then [`authorise`]).
pub fn check(
    peer: &Peer,
    id: RecordId,
    signed: &SignedRecord,
    now: i64,
    signature_verified: bool,
) -> Result<Checked, Rejected> {
    let c = decode(id, signed).map_err(|rejection| Rejected {
        rejection,
        declared_at: 0,
    })?;
    authorise(peer, &c, now, signature_verified).map_err(|rejection| Rejected {
        rejection,
        declared_at: c.record.declared_at_unix_ms,
    })?;
    Ok(c)
}
