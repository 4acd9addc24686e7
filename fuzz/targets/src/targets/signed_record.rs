//! `SignedRecord` as a client or peer sends it: protobuf decoding, the signature's key
//! reference, Ed25519 verification over PAE with the party's key, then decoding the payload.

use crate::{party_signer, sample_record};
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::signing;
use prost::Message;

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(signed) = SignedRecord::decode(data) else {
        return;
    };
    static KEY: std::sync::OnceLock<accord_proto::note::Verifier> = std::sync::OnceLock::new();
    let key = KEY.get_or_init(|| party_signer().verifier());
    let mut verified = false;
    for sig in &signed.signatures {
        let _ = signing::signature_key(sig);
        if signing::verify(key, &signed.payload_type, &signed.payload, sig).is_ok() {
            verified = true;
        }
    }
    let _ = signing::record_id(&signed.payload_type, &signed.payload);
    let decoded = Record::decode(signed.payload.as_ref());
    if verified && accord_proto::declaration::check_payload_type(&signed.payload_type).is_ok() {
        // Only our own seed's payload carries a valid signature by this key: no forgery.
        let ok = decoded.expect("the signed seed payload decodes");
        assert_eq!(ok.author, sample_record(&ok.commitment_id).author);
    }
}
