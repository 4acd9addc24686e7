//! A federation `Deliver` body: the DSSE-signed `Envelope` and its records, checked as the
//! receiver does (`federation/inbox.rs` `authenticate` and `check`): payload type, decoding,
//! sender is a known peer, receiver is us, no party key signs the envelope, the node key's
//! signature verifies; per record: payload type, decoding, conversion, the author's
//! organisation, the key ↔ party binding and the signature. `Peer::verify_batch` (the fast
//! path) must never accept a record `Peer::verify` refuses.

use crate::{ORG, ORG_ORIGIN, RECEIVER, org_node_signer, party_signer};
use accord_node::fuzzing::{Peer, PeerKey, PeerRecord};
use accord_proto::pb::federation::v1::{Envelope, Signed};
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::signing::{ENVELOPE_PAYLOAD_TYPE, record_id};
use prost::Message;
use std::sync::OnceLock;

const NOW: i64 = 1_700_000_000_000;

fn peer() -> &'static Peer {
    static PEER: OnceLock<Peer> = OnceLock::new();
    PEER.get_or_init(|| {
        let tls = accord_node::fuzzing::generate(ORG, &["localhost".into()]).expect("tls");
        Peer::parse(PeerRecord {
            name: ORG.into(),
            endpoint: "https://localhost:1".into(),
            keys: vec![
                PeerKey {
                    vkey: org_node_signer().verifier().to_vkey(),
                    valid_until_unix_ms: 0,
                },
                PeerKey {
                    vkey: party_signer().verifier().to_vkey(),
                    valid_until_unix_ms: 0,
                },
            ],
            tls_pem: tls.ca_cert_pem,
            enabled: true,
            pin_sha256: String::new(),
        })
        .expect("peer")
    })
}

fn check_record(peer: &Peer, r: &SignedRecord, batch_ok: bool) {
    let verified = peer.verify(&r.payload_type, &r.payload, &r.signatures, NOW);
    if batch_ok {
        assert!(
            verified.is_ok(),
            "verify_batch accepted what verify refuses"
        );
    }
    if accord_proto::declaration::check_payload_type(&r.payload_type).is_err() {
        return;
    }
    let Ok(record) = Record::decode(r.payload.as_ref()) else {
        return;
    };
    let id = record_id(&r.payload_type, &r.payload);
    let Ok(input) = accord_node::fuzzing::record_from_pb(id, &record) else {
        return;
    };
    if input.author.organisation != peer.name() {
        return;
    }
    let binding = peer.check_binding(&input.author.to_string(), &r.signatures);
    if binding.is_ok() && verified.is_ok() {
        // Admissible: signed by a key of the peer that may speak for this author.
        assert_eq!(input.author.organisation, ORG);
    }
}

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(env) = Signed::decode(data) else {
        return;
    };
    let peer = peer();
    // The envelope's own checks, in the receiver's order.
    let envelope = if env.payload_type == ENVELOPE_PAYLOAD_TYPE {
        Envelope::decode(env.payload.as_ref()).ok()
    } else {
        None
    };
    if let Some(e) = &envelope {
        let party_signed = env
            .signatures
            .iter()
            .any(|s| peer.is_party_key_name(&s.key_name));
        let sig = peer.verify(ENVELOPE_PAYLOAD_TYPE, &env.payload, &env.signatures, NOW);
        if e.sender == ORG && e.receiver == RECEIVER && !party_signed && sig.is_ok() {
            // Authenticated: only the node key can have signed it.
            assert!(
                env.signatures.iter().any(|s| s.key_name == ORG_ORIGIN),
                "an envelope authenticated without the node key's signature"
            );
        }
    }
    // The records, whether or not the envelope authenticated (the fuzzer reaches them only
    // through a valid envelope otherwise).
    let records: Vec<SignedRecord> = match envelope {
        Some(e) => e.records,
        None => Envelope::decode(data)
            .map(|e| e.records)
            .unwrap_or_default(),
    };
    let refs: Vec<&SignedRecord> = records.iter().collect();
    let batch = peer.verify_batch(&refs, NOW);
    for (r, ok) in records.iter().zip(batch) {
        check_record(peer, r, ok);
    }
}
