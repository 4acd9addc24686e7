//! The records most end-to-end tests write, built in one place: a party's request of a
//! commitment from another party of the same organisation, and its submission signed by the
//! party's own key.

use crate::WorkClient;
use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1 as work;

/// `org/author`'s request of `commitment` from `org/candidate`, titled `title`.
pub fn request(org: &str, author: &str, candidate: &str, commitment: &str, title: &str) -> Record {
    let party = |name: &str| PartyRef {
        organisation: org.into(),
        name: name.into(),
    };
    Record {
        author: Some(party(author)),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(party(candidate)),
            terms: Some(rec::Terms {
                title: title.into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// acme/alice's request of `commitment` from acme/bob, titled `title`.
pub fn alice_asks_bob(commitment: &str, title: &str) -> Record {
    request("acme", "alice", "bob", commitment, title)
}

/// Submits `r` signed by `signer` through the record door; the answer (fails on an error).
pub async fn submit(c: &mut WorkClient, signer: &Signer, r: &Record) -> work::SubmitResponse {
    c.submit(work::SubmitRequest {
        record: Some(accord_proto::signing::sign_record(signer, r)),
    })
    .await
    .expect("submit")
    .into_inner()
}

/// `r` encoded and signed by `key` under `payload_type`, whatever the record's operation: for
/// tests of the payload types a node reads (`accord_proto::declaration`) — the generic type of
/// records signed before typed Declarations, or a type that names another operation.
pub fn signed_as(key: &Signer, payload_type: &str, r: &Record) -> rec::SignedRecord {
    use prost::Message as _;
    let payload = r.encode_to_vec();
    rec::SignedRecord {
        signatures: vec![accord_proto::signing::sign(key, payload_type, &payload)],
        payload: payload.into(),
        payload_type: payload_type.into(),
    }
}
